# sfs — build, test and run.
#
#   make            libsfs + bin/sfs, bin/sfs-worker, bin/sfs-compactor, bin/sfs-checkpointer,
#                   and the keyed-state benchmark $(BUILD)/bench/bench_state (built, not run)
#   make test       install missing Debian packages, build, run every test (README's command)
#   make run        install, build and run the main job for ~15 s (scripts/run-demo.sh: a
#                   supervised group that checkpoints, then a summary of what it did)
#   make asan       the tests under AddressSanitizer + UBSan (objects in build-asan/)
#   make tsan       the multi-threaded processes under ThreadSanitizer in real runs (build-tsan/)
#   make bench      benchmarks (bench_state with --quick); figures go to bench/RESULTS.md by
#                   hand, with the command
#   make bench-scale  bench/scale.sh: queries x backends x 2M/20M/100M events, one run at a
#                   time (hours; QUERIES, BACKENDS, EVENTS, TIMEOUT... narrow it, see the script)
#   make soak       every test with SFS_SOAK=1: randomized and crash tests run 20x longer
#   make fuzz       every reader of a file under libFuzzer, FUZZ_TIME (60) s each;
#                   make fuzz-long: 10M executions each (FUZZ_RUNS)
#   make install    the public headers, libsfs.so + libsfs.a, sfs.pc and the binaries under
#                   $(DESTDIR)$(PREFIX) (scripts/install.sh); make uninstall removes them
#
# Knobs (make VAR=value):
#   BUILD      object directory (build)          BIN    binaries (bin)
#   OPT        optimisation flags (-O2 -g)
#   SAN        extra sanitizer flags (asan sets)  JOBS   Criterion's parallel jobs (2)
#   TEST_TIMEOUT  seconds per test binary or script (300)
#   LIB_EXCLUDE   sources to leave out of libsfs.a (work in progress)
#   PREFIX     where make install puts things (/usr/local)   DESTDIR  staging root ()

BUILD  ?= build
BIN    ?= bin
OPT    ?= -O2 -g
SAN    ?=
JOBS   ?= 2
TEST_TIMEOUT ?= 300

PKGS    := liburcu rocksdb liblz4 libzstd numa libisal
# jemalloc is the malloc of every sfs process (not under ASan, which brings its own);
# --no-as-needed keeps it linked although no symbol is asked of it by name.
EXPECT_ALLOC ?= jemalloc
ALLOC_LIB ?= -Wl,--no-as-needed $(shell pkg-config --libs jemalloc 2>/dev/null) -Wl,--as-needed
DEPS_OK := $(BUILD)/.deps-ok

CC      := gcc
# C++ for one file only: baseline/rdb_mem.cc, what RocksDB's C API cannot build (Flink's
# managed memory for the rocksdb-direct baseline); everything else is C.
CXX     := g++
CXXFLAGS := -std=gnu++17 $(OPT) $(SAN) -Wall -Wextra -Werror -Wno-unused-parameter \
           -fno-strict-aliasing -D_GNU_SOURCE -pthread -I include -I .
CFLAGS  := -std=gnu11 $(OPT) $(SAN) -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
           -fno-strict-aliasing -D_GNU_SOURCE -D_LGPL_SOURCE -pthread -I include -I .
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# A --merge-lib plugin calls sfs_merge_define() in the binary that loads it
# (libsfs is linked statically): export that one symbol, not the whole table.
LDLIBS   = $(PKG_LIBS) $(ALLOC_LIB) -Wl,--export-dynamic-symbol=sfs_merge_define -lstdc++ -lpthread -lm
CRIT_LIBS = $(shell pkg-config --libs criterion 2>/dev/null)

# The library: every subsystem's modules (each role's main.c is its binary), what a
# program on include/sfs.h links; every global in it is sfs_ or sfs__ (STYLE rule 1).
LIB_SRCS := $(filter-out %/main.c $(LIB_EXCLUDE),$(wildcard common/*.c shm/*.c \
              worker/*.c compactor/*.c checkpointer/*.c store/*.c store/*/*.c \
              store/table/layout/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libsfs.a
# The Nexmark runtime: not the library but a program on its public API (runtime/,
# query/, the generator nexmark/) and the rocksdb-direct baseline beside it (baseline/),
# what bin/sfs and bin/sfs-worker run; its own archive, never installed, linked before
# the library.  Its names are its own (rt_, q_, nx_).
NX_SRCS  := $(filter-out $(LIB_EXCLUDE),$(wildcard nexmark/*.c runtime/*.c query/*.c baseline/*.c))
NX_CXX_SRCS := baseline/rdb_mem.cc
NX_OBJS  := $(NX_SRCS:%.c=$(BUILD)/%.o) $(NX_CXX_SRCS:%.cc=$(BUILD)/%.o)
NX_LIB   := $(BUILD)/libsfs-nexmark.a
# What a binary, test or benchmark of the tree links.
LINK_LIBS := $(NX_LIB) $(LIB)

# The installable library.  PUBLIC_HEADERS is the API: installed, and the only functions
# libsfs.so exports.  Many internal functions are named sfs_* too (sfs_seg_*, sfs__err),
# so the .so is linked with a version script generated from these headers
# (scripts/libsfs-exports.sh: the functions they declare, read by the compiler, global;
# everything else local), and the link is checked: every declared function defined, and
# nothing else exported (nm -D).  Objects are compiled with default visibility; only the
# link hides.  The .so is built from the library's sources compiled again with -fPIC in
# $(BUILD)/pic/, so the static objects of the binaries and tests stay as they are; it
# links the packages' libraries but not jemalloc (a program linking libsfs keeps its own
# malloc) and exports no plugin hook (sfs_merge_define is public anyway).  The installed
# libsfs.a is $(LIB) itself (the Nexmark runtime is not in it).  The version, and the soname
# libsfs.so.MAJOR, come from SFS_VERSION_MAJOR/MINOR in include/sfs.h.
PUBLIC_HEADERS := include/sfs.h include/sfs_keygroup.h include/sfs_join.h include/sfs_output.h
PREFIX  ?= /usr/local
DESTDIR ?=
sfs_version_of = $(shell sed -n 's/^.define SFS_VERSION_$(1)[[:space:]]*\([0-9][0-9]*\)$$/\1/p' include/sfs.h)
SFS_VERSION_MAJOR := $(call sfs_version_of,MAJOR)
SFS_VERSION_MINOR := $(call sfs_version_of,MINOR)
ifeq ($(SFS_VERSION_MAJOR),)
$(error include/sfs.h: no numeric SFS_VERSION_MAJOR define)
endif
ifeq ($(SFS_VERSION_MINOR),)
$(error include/sfs.h: no numeric SFS_VERSION_MINOR define)
endif
SFS_VERSION := $(SFS_VERSION_MAJOR).$(SFS_VERSION_MINOR).0
SONAME   := libsfs.so.$(SFS_VERSION_MAJOR)
SHLIB    := $(BUILD)/libsfs.so.$(SFS_VERSION)
SHLIB_MAP := $(BUILD)/libsfs.map
PIC_OBJS := $(LIB_SRCS:%.c=$(BUILD)/pic/%.o)
# What scripts/install.sh copies (absolute paths, and the compiler and sanitizer flags a
# program linking this build needs): make install and tests/e2e_install.sh read it.
INSTALL_ENV := $(BUILD)/install.env

BINS := $(BIN)/sfs $(BIN)/sfs-worker $(BIN)/sfs-compactor $(BIN)/sfs-checkpointer
SUP_SRCS := $(wildcard supervisor/*.c)
# The keyed-state benchmark, a program of its own from several files (bench/state/, its
# main in main.c; BENCH_BINS are one file each, bench/bench_*.c).  `make` builds it too,
# as it did when it was a command of bin/sfs, so that it keeps compiling; bin/sfs, the
# product's CLI, links no benchmark.
BENCH_STATE_SRCS := $(wildcard bench/state/*.c)
BENCH_STATE := $(BUILD)/bench/bench_state
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps test run jni flink flink-test asan tsan bench bench-scale soak clean fuzz install uninstall FORCE
# Keep objects make would treat as intermediates (role mains).
.SECONDARY:
all: $(DEPS_OK) $(LIB) $(NX_LIB) $(BINS) $(SHLIB) $(INSTALL_ENV) $(BENCH_STATE)

# The build installs its own packages (idempotent: dpkg is asked first).
$(DEPS_OK): scripts/deps.sh
	@./scripts/deps.sh
	@mkdir -p $(@D) && touch $@
deps:
	@./scripts/deps.sh

$(BUILD)/%.o: %.c $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cc $(DEPS_OK)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

# Made anew each time: ar replaces members by name and never drops one, so an object
# whose source moved or went away (and one of two same-named objects: store/target.o,
# store/memory/target.o) would otherwise linger or be lost in an archive updated in place;
# the Makefile is a prerequisite, so a source list that lost a file makes it anew too.
$(LIB): $(LIB_OBJS) Makefile
	@rm -f $@
	ar rcs $@ $(filter %.o,$^)
$(NX_LIB): $(NX_OBJS) Makefile
	@rm -f $@
	ar rcs $@ $(filter %.o,$^)

# The shared library's objects (the more specific pattern wins over $(BUILD)/%.o).
$(BUILD)/pic/%.o: %.c $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/pic/%.o: %.cc $(DEPS_OK)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -fPIC $(PKG_CFLAGS) -MMD -MP -c $< -o $@

# The version script; $(INSTALL_ENV) names PUBLIC_HEADERS, so a header added there
# regenerates it.
$(SHLIB_MAP): $(PUBLIC_HEADERS) scripts/libsfs-exports.sh $(INSTALL_ENV)
	@mkdir -p $(@D)
	CC=$(CC) scripts/libsfs-exports.sh --map $(PUBLIC_HEADERS) >$@.tmp && mv $@.tmp $@

# -z defs: every dependency is named here, so a user links -lsfs alone.  A failed
# export check removes the .so, so the next make tries again.
$(SHLIB): $(PIC_OBJS) $(SHLIB_MAP)
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=$(SHLIB_MAP) \
	  -Wl,-z,defs -o $@ $(PIC_OBJS) $(PKG_LIBS) -lstdc++ -lpthread -lm
	@CC=$(CC) scripts/libsfs-exports.sh --check $@ $(PUBLIC_HEADERS) || { rm -f $@; exit 1; }

# Written at every make, replaced only when it changes (its inputs are variables).
$(INSTALL_ENV): FORCE
	@mkdir -p $(@D)
	@{ echo "# Written by make: what scripts/install.sh installs from this build."; \
	  echo "SFS_VERSION=$(SFS_VERSION)"; \
	  echo "PUBLIC_HEADERS='$(abspath $(PUBLIC_HEADERS))'"; \
	  echo "INCLUDE_ROOT='$(abspath include)'"; \
	  echo "SHLIB='$(abspath $(SHLIB))'"; \
	  echo "STLIB='$(abspath $(LIB))'"; \
	  echo "BINS='$(abspath $(BINS))'"; \
	  echo "PC_IN='$(abspath sfs.pc.in)'"; \
	  echo "PC_REQUIRES='$(PKGS)'"; \
	  echo "SFS_CC='$(CC)'"; \
	  echo "SFS_SAN='$(SAN)'"; } >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
FORCE:

install: $(SHLIB) $(LIB) $(BINS) $(INSTALL_ENV)
	DESTDIR='$(DESTDIR)' ./scripts/install.sh '$(PREFIX)' $(INSTALL_ENV)
uninstall: $(INSTALL_ENV)
	DESTDIR='$(DESTDIR)' ./scripts/install.sh --uninstall '$(PREFIX)' $(INSTALL_ENV)

# bin/sfs alone serves HTTP (`sfs run --metrics-addr`): libmicrohttpd is linked there,
# never into libsfs (nor named by sfs.pc).
SFS_PKGS := libmicrohttpd
$(SUP_SRCS:%.c=$(BUILD)/%.o): PKG_CFLAGS += $(shell pkg-config --cflags $(SFS_PKGS) 2>/dev/null)
$(BIN)/sfs: $(SUP_SRCS:%.c=$(BUILD)/%.o) $(LINK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs $(SFS_PKGS) 2>/dev/null)
$(BIN)/sfs-%: $(BUILD)/%/main.o $(LINK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(LINK_LIBS) tests/helpers.h tests/state_helpers.h tests/backend_fixture.h tests/target_keys.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(LINK_LIBS) $(CRIT_LIBS) $(LDLIBS)

# The --merge-lib plugin of test_merge, beside it (the test finds it by its own path).
$(BUILD)/tests/merge_plugin.so: tests/merge_plugin.c include/sfs.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -shared -o $@ $<
$(BUILD)/tests/test_merge: $(BUILD)/tests/merge_plugin.so

$(BUILD)/bench/%: bench/%.c $(LINK_LIBS) $(BINS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(LINK_LIBS) $(LDLIBS)

$(BENCH_STATE): $(BENCH_STATE_SRCS:%.c=$(BUILD)/%.o) $(LINK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The power-loss test's tools (tests/powerloss/): the LD_PRELOAD shim that records what
# fsync made durable, and the tool that rebuilds a tree from it.  Test-only, never in
# libsfs; built without $(SAN) (a preloaded library cannot bring its own sanitizer).
POWERLOSS := $(BUILD)/tests/libsfs_powerloss.so $(BUILD)/tests/powerloss_restore
$(BUILD)/tests/libsfs_powerloss.so: tests/powerloss/shim.c tests/powerloss/powerloss.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -Wno-format-truncation -D_GNU_SOURCE -I . -fPIC -shared -o $@ $< -ldl
$(BUILD)/tests/powerloss_restore: tests/powerloss/restore.c tests/powerloss/powerloss.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -Wno-format-truncation -D_GNU_SOURCE -I . -o $@ $<

# Sanitized binaries run the Nexmark oracle ~5x slower: a smaller stream.
asan:
	LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp) ASAN_OPTIONS=abort_on_error=0 \
	SFS_NEXMARK_EVENTS=50000 TEST_TIMEOUT=900 \
	$(MAKE) BUILD=build-asan BIN=build-asan/bin ALLOC_LIB= EXPECT_ALLOC=libc OPT="-O1 -g" FLINK=0 \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# ThreadSanitizer over the multi-threaded processes in real runs (scripts/tsan.sh
# says why not the unit tests); shm/atomic.h maps its atomics to GCC's builtins there.
tsan:
	$(MAKE) BUILD=build-tsan BIN=build-tsan/bin ALLOC_LIB= EXPECT_ALLOC=libc OPT="-O1 -g" \
	  SAN="-fsanitize=thread" build-tsan/bin/sfs build-tsan/bin/sfs-worker \
	  build-tsan/bin/sfs-compactor build-tsan/bin/sfs-checkpointer
	SFS_BIN=$(abspath build-tsan/bin) ./scripts/tsan.sh

run: all
	@./scripts/run-demo.sh

# ---- Flink (flink/README.md) ---------------------------------------------------------
# The JNI library a TaskManager JVM loads: flink/jni/sfs_jni.c on libsfs's sources compiled
# again with SFS_NO_ROCKSDB (Flink's RocksDB lives in the same process; FLINK.md), without
# the Nexmark runtime, queries, compactor and checkpointer (the group's own processes run
# those).  Only the JNI entry points are exported (flink/jni/exports.map).  Checked: no
# rocksdb in its dependencies or symbols.
JNI_DIR  := $(BUILD)/jni
JNI_LIB  := $(JNI_DIR)/libsfs_jni.so
JNI_SRCS := $(filter-out %/main.c common/rdb.c,$(wildcard common/*.c shm/*.c worker/*.c \
              store/registry.c store/open.c store/target.c store/layout.c store/map_run.c store/stage_scan.c store/rocksdb/layout.c \
              store/memory/*.c store/table/*.c store/table/layout/*.c))
JNI_OBJS := $(JNI_SRCS:%.c=$(JNI_DIR)/obj/%.o)
JAVA_HOME ?= $(shell dirname $$(dirname $$(readlink -f $$(command -v javac))))
FLINK_JAR := flink/target/sfs-flink-0.1.0.jar

$(JNI_DIR)/obj/%.o: %.c $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -DSFS_NO_ROCKSDB $(PKG_CFLAGS) -MMD -MP -c $< -o $@

$(JNI_LIB): flink/jni/sfs_jni.c flink/jni/exports.map $(JNI_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -I$(JAVA_HOME)/include -I$(JAVA_HOME)/include/linux -shared \
	  -Wl,--version-script=flink/jni/exports.map -Wl,-z,defs -o $@ flink/jni/sfs_jni.c \
	  $(JNI_OBJS) $$(pkg-config --libs liburcu liblz4 libzstd numa libisal) -lpthread -lm
	@if ldd $@ | grep -qi rocksdb || nm -D $@ | grep -qi rocksdb; then \
	  echo "$@: links RocksDB (it must not: Flink's own build shares the JVM)"; rm -f $@; exit 1; fi

jni: $(JNI_LIB)

# The jar; its tests run in make test (flink-test), after the C tests.
flink: all $(JNI_LIB)
	cd flink && mvn -B -q -DskipTests package

flink-test: all $(JNI_LIB)
	cd flink && mvn -B -q -Dsfs.require=true test

# The Flink suite runs last (FLINK_TESTS); FLINK=0 leaves it out (a sanitizer build: the
# JVM loads the unsanitized JNI library).
FLINK ?= 1
test: all $(TEST_BINS) $(POWERLOSS) $(if $(filter 1,$(FLINK)),$(JNI_LIB))
	@BUILD=$(BUILD) SFS_BIN=$(abspath $(BIN)) SFS_EXPECT_ALLOC=$(EXPECT_ALLOC) JOBS=$(JOBS) TEST_TIMEOUT=$(TEST_TIMEOUT) \
	  FLINK_TESTS=$(filter 1,$(FLINK)) ./scripts/run-tests.sh


bench: all $(BENCH_BINS)
	@for b in $(BENCH_BINS); do echo "== $$b"; $$b || exit 1; done
	@echo "== $(BENCH_STATE) --quick"; $(BENCH_STATE) --quick
	@echo "== nexmark oracle, 2M events"; SFS_NEXMARK_EVENTS=2000000 SFS_BIN=$(abspath $(BIN)) bash tests/e2e_nexmark.sh
	@echo "== bench/nexmark.sh"; SFS_BIN=$(abspath $(BIN)) bash bench/nexmark.sh

# The scale bench (issue 18): its knobs are the script's environment (QUERIES, BACKENDS,
# EVENTS, DIRECT_MAX, TIMEOUT, RESULTS, CHART, ...); gnuplot comes with scripts/deps.sh.
bench-scale: all
	@SFS_BIN=$(abspath $(BIN)) bash bench/scale.sh

# Every reader of a file under libFuzzer, FUZZ_TIME seconds each (tests/fuzz/): the table
# store's data files (fuzz_datafile), snapshots + manifest lists + manifests (fuzz_manifest)
# and deletion-vector indexes (fuzz_dvec), sealed write buffers' images (fuzz_bufimg); a checkpoint's _metadata (fuzz_metadata), the table
# target's TABLES (fuzz_tables), the sink's changelogs (fuzz_sinklog), the memory target's
# dump (fuzz_memdump) and the state registry's states= value (fuzz_states).
# tests/fuzz/seed_<target>.c writes each one's corpus of valid files, and findings land in
# $(FUZZ_DIR) as <target>-crash-*; a finding, once fixed, goes under tests/fuzz/regress/
# <target>/ as the bytes the reader saw, and tests/test_fuzz_regress.c feeds it to the reader
# in `make test`.  Needs clang and libFuzzer (Debian: clang, libclang-rt-*-dev), installed
# here only, never by `make test`.  Without them it falls back to tests/fuzz/fuzz_main.c: the
# same targets, gcc + ASan/UBSan, random mutations of the seed corpus, no coverage feedback.
# One target alone: make fuzz-<target> (fuzz-metadata, ...).  FUZZ_RUNS=N runs each target
# for N executions instead of FUZZ_TIME seconds; make fuzz-long is FUZZ_RUNS=10000000 over
# every target, one at a time, each one's output in $(FUZZ_DIR)/<target>.log
# (bench/RESULTS.md, "File readers under libFuzzer").
FUZZ_TIME ?= 60
FUZZ_RUNS ?=
FUZZ_DIR  := $(BUILD)/fuzz
FUZZ_TARGETS := datafile manifest dvec bufimg metadata tables sinklog memdump states
FUZZ_COMMON := common/crc32c.c common/err.c common/fault.c common/fs.c
FUZZ_SRCS_datafile := store/table/layout/datafile_write.c store/table/layout/datafile_read.c store/table/layout/file.c
FUZZ_SRCS_manifest := store/table/layout/manifest.c store/table/layout/file.c
FUZZ_SRCS_dvec := store/table/layout/dvec.c store/table/layout/file.c
FUZZ_SRCS_bufimg := store/table/layout/bufimage.c store/table/layout/file.c worker/wbuf.c
# _metadata's format is a file of its own (checkpointer/metadata.c, no storage); the harness
# of TABLES stubs what its reader's file needs only for writing (the table engine's key
# prefix): so each links these sources alone.
FUZZ_SRCS_metadata := checkpointer/metadata.c
FUZZ_SRCS_tables := store/table/table_snap.c store/table/layout/datafile_write.c store/table/layout/datafile_read.c \
                    store/table/layout/dvec.c store/table/layout/file.c
FUZZ_SRCS_sinklog := runtime/sink.c runtime/util.c
FUZZ_SRCS_memdump := store/memory/memdump_read.c
FUZZ_SRCS_states := checkpointer/coord_states.c common/merge.c
# UBSan findings abort (not just print), so the fuzzer stops on them as on a crash.
FUZZ_FLAGS = -std=gnu11 -g -O1 -D_GNU_SOURCE -I include -I . -fno-omit-frame-pointer \
             -fno-sanitize-recover=undefined
# libFuzzer's bound, and the fallback's (seconds, then executions: a day, or FUZZ_RUNS).
FUZZ_BOUND = $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS),-max_total_time=$(FUZZ_TIME))
FUZZ_GCC_BOUND = $(if $(FUZZ_RUNS),86400 $(FUZZ_RUNS),$(FUZZ_TIME))
FUZZ_GOALS := $(FUZZ_TARGETS:%=fuzz-%)
.PHONY: fuzz-tools fuzz-long $(FUZZ_GOALS)
fuzz: $(FUZZ_GOALS)
fuzz-long: $(LINK_LIBS) fuzz-tools
	@mkdir -p $(FUZZ_DIR); for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz-$$t: 10000000 executions, log $(FUZZ_DIR)/$$t.log"; \
	  $(MAKE) --no-print-directory fuzz-$$t FUZZ_RUNS=10000000 >$(FUZZ_DIR)/$$t.log 2>&1 || \
	    { echo "fuzz-$$t failed: $(FUZZ_DIR)/$$t.log"; exit 1; }; \
	  grep -E '^stat::(number_of_executed_units|average_exec_per_sec)|^fuzz_main:' $(FUZZ_DIR)/$$t.log; \
	done
fuzz-tools:
	@command -v clang >/dev/null && ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a \
	  >/dev/null 2>&1 || { echo "fuzz: installing clang + libFuzzer"; SUDO=; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	  --no-install-recommends clang libclang-rt-dev >/dev/null || echo "fuzz: install failed"; }
$(FUZZ_GOALS): fuzz-%: $(LINK_LIBS) fuzz-tools
	@mkdir -p $(FUZZ_DIR)/corpus-$*
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $(FUZZ_DIR)/seed_$* tests/fuzz/seed_$*.c $(LINK_LIBS) $(LDLIBS)
	$(FUZZ_DIR)/seed_$* $(FUZZ_DIR)/corpus-$*
	@if clang $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined -o $(FUZZ_DIR)/fuzz_$* \
	      tests/fuzz/fuzz_$*.c $(FUZZ_SRCS_$*) $(FUZZ_COMMON) -llz4 -lzstd -lisal -lpthread; then \
	  echo "fuzz $*: libFuzzer, $(FUZZ_BOUND)"; \
	  $(FUZZ_DIR)/fuzz_$* $(FUZZ_BOUND) -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=640 \
	    -artifact_prefix=$(FUZZ_DIR)/$*- -print_final_stats=1 $(FUZZ_DIR)/corpus-$*; \
	else \
	  echo "fuzz $*: no libFuzzer here: the gcc + ASan fallback driver, $(FUZZ_GCC_BOUND)"; \
	  $(CC) $(FUZZ_FLAGS) -fsanitize=address,undefined -o $(FUZZ_DIR)/fuzz_$*_gcc \
	    tests/fuzz/fuzz_main.c tests/fuzz/fuzz_$*.c $(FUZZ_SRCS_$*) $(FUZZ_COMMON) -llz4 -lzstd -lisal -lpthread && \
	  $(FUZZ_DIR)/fuzz_$*_gcc $(FUZZ_DIR)/corpus-$* $(FUZZ_GCC_BOUND); \
	fi

soak: all $(TEST_BINS) $(POWERLOSS)
	@SFS_SOAK=1 BUILD=$(BUILD) SFS_BIN=$(abspath $(BIN)) JOBS=$(JOBS) TEST_TIMEOUT=1800 ./scripts/run-tests.sh

clean:
	rm -rf build build-asan bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
