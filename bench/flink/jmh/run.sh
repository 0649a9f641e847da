#!/usr/bin/env bash
# The cost of one keyed-state operation on sfs, Flink's RocksDB backend and the HashMap backend
# (JMH, StateOpBenchmark.java).  Builds the JNI library and installs sfs-flink into ~/.m2 first.
#   bench/flink/jmh/run.sh [JMH args...]     e.g. -p backend=sfs,rocksdb 'valueGet|valueUpdate'
# Output: JMH's table, and bench/flink/jmh/target/jmh.json.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
make -C "$root" -s all jni
(cd "$root/flink" && mvn -B -q -DskipTests install)
cd "$here"
mvn -B -q -DskipTests package dependency:build-classpath -Dmdep.outputFile=target/cp.txt
java -Djava.library.path="$root/build/jni" -Dsfs.bin="$root/bin" \
	-cp "target/classes:$(cat target/cp.txt)" org.openjdk.jmh.Main \
	-jvmArgsAppend "-Djava.library.path=$root/build/jni -Dsfs.bin=$root/bin" \
	-rf json -rff target/jmh.json "$@"
