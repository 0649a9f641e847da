#!/usr/bin/env bash
# standalone.sh — a real Flink 2.3 standalone cluster (a JobManager JVM and TaskManager JVMs)
# on this module's Maven classpath, with sfs as the state backend. No Flink distribution is
# needed: the JobManager and TaskManager are main classes of flink-runtime, and Flink's own
# BashJavaUtils turns the memory configuration into each JVM's flags, as bin/taskmanager.sh does.
#
#   standalone.sh start  DIR [TMS]   config, classpath, the JobManager and TMS TaskManagers (2)
#   standalone.sh add-tm DIR         one more TaskManager; prints its number
#   standalone.sh kill-tm DIR N      kill -9 TaskManager N; prints its pid
#   standalone.sh stop   DIR         every JVM of DIR: SIGTERM, then SIGKILL after a timeout
#   standalone.sh status DIR         one line per JVM: role, pid, alive or dead
#
# DIR holds everything of one cluster: conf/config.yaml, conf/log4j.properties, classpath,
# pids/{jm,tm-N}, log/{jm,tm-N}.{log,out} (and hs_err_pid*.log if a JVM crashed), rest.port,
# checkpoints/ (shared by every TaskManager: Flink's checkpoint storage), sfs-tmN/
# (TaskManager N's sfs data dir: its host group's local files), tmp/ (Flink's io.tmp.dirs).
# It is also the JVMs' working directory.
#
# TaskManager N runs with -D taskmanager.resource-id=tm-N (its id in the REST API) and
# -D state.backend.sfs.data-dir=DIR/sfs-tmN. Its sfs host group is named flink-<its pid>-<k>
# and its segments are /dev/shm/sfs.flink-<its pid>-<k>.<node>.
#
# Environment: SFS_BIN_DIR (default <repo>/bin), SFS_JNI_DIR (default <repo>/build/jni: the
# directory of libsfs_jni.so), FLINK_REST_PORT, FLINK_RPC_PORT (default: free ones), JAVA,
# FLINK_CONF_EXTRA (YAML lines for config.yaml, e.g. "state.backend.local-recovery: true"; a key
# written here replaces the line of the same key below, e.g. "taskmanager.memory.managed.size:
# 2800m"), CLASSPATH_EXTRA (put before the module's classpath on every JVM: another job's
# classes, e.g. the Nexmark harness's for bench/flink/recovery.sh).
# The module must be built first (mvn -B -q -DskipTests package in flink/): the cluster runs
# flink/target/classes and flink/target/test-classes, so test jobs need no jar shipped.
#
# JVMs are started detached from this script (it exits; they live on), so when one dies its
# parent is pid 1, which may reap nothing: a zombie counts as dead everywhere here. Every wait
# polls /proc with a timeout.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODULE=$(dirname "$HERE")
ROOT=$(dirname "$MODULE")
SFS_BIN_DIR=${SFS_BIN_DIR:-$ROOT/bin}
SFS_JNI_DIR=${SFS_JNI_DIR:-$ROOT/build/jni}
JAVA=${JAVA:-java}
START_TIMEOUT=${START_TIMEOUT:-90}   # seconds for a JVM to show up in the REST API

die() { echo "standalone.sh: $*" >&2; exit 1; }
say() { echo "standalone.sh: $*" >&2; }

# alive PID: the process exists and is not a zombie
alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z && ${stat:0:1} != X ]]
}

# wait_dead PID SECONDS: 0 once PID is gone (or a zombie), 1 on timeout
wait_dead() {
    local pid=$1 until=$((SECONDS + $2))
    while alive "$pid"; do
        ((SECONDS < until)) || return 1
        sleep 0.1
    done
}

# a TCP port nobody listens on (racy, as any free-port pick is; good enough on one machine)
free_port() {
    local p
    for _ in $(seq 200); do
        p=$((20000 + RANDOM % 20000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    die "no free port found"
}

rest() { curl -fsS --max-time 5 "http://localhost:$(cat "$DIR/rest.port")$1"; }

# the JVM flags and memory dynamic properties Flink's own scripts compute (BashJavaUtils)
resource_params() { # GET_TM_RESOURCE_PARAMS | GET_JM_RESOURCE_PARAMS -> DIR/conf/<cmd>.{jvm,dyn}
    local out
    out=$("$JAVA" -cp "$(cat "$DIR/classpath")" org.apache.flink.runtime.util.bash.BashJavaUtils \
        "$1" --configDir "$DIR/conf" 2>"$DIR/log/bash-java-utils.err" |
        sed -n 's/^BASH_JAVA_UTILS_EXEC_RESULT://p') || true
    [[ $(wc -l <<<"$out") -eq 2 ]] || die "BashJavaUtils $1 failed; see $DIR/log/bash-java-utils.err"
    sed -n 1p <<<"$out" >"$DIR/conf/$1.jvm"
    sed -n 2p <<<"$out" >"$DIR/conf/$1.dyn"
}

# Java 17 needs these for Flink (the list Flink's default config.yaml carries)
JAVA17_OPTS=(
    --add-exports=java.base/sun.net.util=ALL-UNNAMED
    --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED
    --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED
    --add-opens=java.base/java.lang=ALL-UNNAMED
    --add-opens=java.base/java.net=ALL-UNNAMED
    --add-opens=java.base/java.io=ALL-UNNAMED
    --add-opens=java.base/java.nio=ALL-UNNAMED
    --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens=java.base/java.text=ALL-UNNAMED
    --add-opens=java.base/java.time=ALL-UNNAMED
    --add-opens=java.base/java.util=ALL-UNNAMED
    --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
    --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED
    --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED
)

write_config() {
    local rest_port=$1 rpc_port=$2
    mkdir -p "$DIR/conf" "$DIR/log" "$DIR/pids" "$DIR/checkpoints" "$DIR/tmp"
    cat >"$DIR/conf/config.yaml" <<EOF
# written by flink/cluster/standalone.sh
jobmanager.rpc.address: localhost
jobmanager.rpc.port: $rpc_port
jobmanager.bind-host: localhost
jobmanager.memory.process.size: 768m
rest.address: localhost
rest.bind-address: localhost
rest.port: $rest_port
taskmanager.host: localhost
taskmanager.bind-host: localhost
taskmanager.numberOfTaskSlots: 2
taskmanager.memory.process.size: 1g
taskmanager.memory.managed.size: 64m
io.tmp.dirs: $DIR/tmp
# a TaskManager killed with kill -9 is declared lost within ~5 s
heartbeat.interval: 1000
heartbeat.timeout: 5000
# every keyed subtask's state in sfs; each TaskManager gets its own
# state.backend.sfs.data-dir on its command line
state.backend.type: io.sfs.flink.SfsStateBackendFactory
state.backend.sfs.bin-dir: $SFS_BIN_DIR
# checkpoint storage shared by every TaskManager (on real hosts: a shared file system or an
# object store), so a replacement TaskManager restores what a dead one checkpointed
execution.checkpointing.dir: file://$DIR/checkpoints
restart-strategy.type: fixed-delay
restart-strategy.fixed-delay.attempts: 10
restart-strategy.fixed-delay.delay: 1 s
EOF
    if [[ -n ${FLINK_CONF_EXTRA:-} ]]; then
        local key
        while IFS= read -r key; do # a key given twice is an error to Flink's YAML reader
            [[ -n $key ]] && sed -i "/^${key//./\\.}:/d" "$DIR/conf/config.yaml"
        done < <(sed -n 's/^\([A-Za-z0-9_.-]*\):.*/\1/p' <<<"$FLINK_CONF_EXTRA")
        printf '# from FLINK_CONF_EXTRA\n%s\n' "$FLINK_CONF_EXTRA" >>"$DIR/conf/config.yaml"
    fi
    cat >"$DIR/conf/log4j.properties" <<'EOF'
# every JVM logs to the file its -Dlog.file names
monitorInterval = 0
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = MainAppender
appender.main.name = MainAppender
appender.main.type = File
appender.main.append = true
appender.main.fileName = ${sys:log.file}
appender.main.layout.type = PatternLayout
appender.main.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
logger.pekko.name = org.apache.pekko
logger.pekko.level = INFO
logger.netty.name = org.apache.flink.shaded.netty4.io.netty
logger.netty.level = WARN
EOF
}

# the module's classes, test classes and its Maven dependencies (test scope: flink-clients and
# the rest of what a cluster needs), without slf4j-simple so that log4j2 takes the logs
build_classpath() {
    [[ -d $MODULE/target/classes/io/sfs/flink && -d $MODULE/target/test-classes ]] ||
        die "$MODULE/target/classes or test-classes missing: run 'mvn -B -q -DskipTests package' in $MODULE"
    if [[ ! -s $DIR/deps.txt ]]; then
        mvn -B -q -f "$MODULE/pom.xml" dependency:build-classpath -Dmdep.includeScope=test \
            -Dmdep.outputFile="$DIR/deps.txt" >"$DIR/log/mvn-classpath.log" 2>&1 ||
            die "mvn dependency:build-classpath failed; see $DIR/log/mvn-classpath.log"
    fi
    local deps
    deps=$(tr ':' '\n' <"$DIR/deps.txt" | grep -v '/slf4j-simple-' | paste -sd: -)
    echo "${CLASSPATH_EXTRA:+$CLASSPATH_EXTRA:}$MODULE/target/classes:$MODULE/target/test-classes:$deps" >"$DIR/classpath"
}

start_jm() {
    local jvm dyn
    jvm=$(cat "$DIR/conf/GET_JM_RESOURCE_PARAMS.jvm")
    dyn=$(cat "$DIR/conf/GET_JM_RESOURCE_PARAMS.dyn")
    # shellcheck disable=SC2086 # jvm and dyn are lists of flags
    nohup "$JAVA" $jvm "${JAVA17_OPTS[@]}" \
        -XX:ErrorFile="$DIR/log/hs_err_pid%p.log" -Dlog.file="$DIR/log/jm.log" -Dlog4j.configurationFile="file:$DIR/conf/log4j.properties" \
        -cp "$(cat "$DIR/classpath")" \
        org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint \
        --configDir "$DIR/conf" $dyn \
        </dev/null >"$DIR/log/jm.out" 2>&1 &
    echo $! >"$DIR/pids/jm"
    say "JobManager pid $! (REST port $(cat "$DIR/rest.port"))"
}

next_tm() {
    local n=1
    while [[ -e $DIR/pids/tm-$n ]]; do n=$((n + 1)); done
    echo "$n"
}

start_tm() { # N
    local n=$1 jvm dyn
    jvm=$(cat "$DIR/conf/GET_TM_RESOURCE_PARAMS.jvm")
    dyn=$(cat "$DIR/conf/GET_TM_RESOURCE_PARAMS.dyn")
    mkdir -p "$DIR/sfs-tm$n"
    # shellcheck disable=SC2086
    nohup "$JAVA" $jvm "${JAVA17_OPTS[@]}" \
        -Djava.library.path="$SFS_JNI_DIR" \
        -XX:ErrorFile="$DIR/log/hs_err_pid%p.log" -Dlog.file="$DIR/log/tm-$n.log" -Dlog4j.configurationFile="file:$DIR/conf/log4j.properties" \
        -cp "$(cat "$DIR/classpath")" \
        org.apache.flink.runtime.taskexecutor.TaskManagerRunner \
        --configDir "$DIR/conf" $dyn \
        -D "taskmanager.resource-id=tm-$n" \
        -D "state.backend.sfs.data-dir=$DIR/sfs-tm$n" \
        </dev/null >"$DIR/log/tm-$n.out" 2>&1 &
    echo $! >"$DIR/pids/tm-$n"
    say "TaskManager $n pid $!"
}

# wait_rest: the REST API answers and lists every TaskManager named in "$@" (tm-N ids)
wait_rest() {
    local until=$((SECONDS + START_TIMEOUT)) list id missing
    while :; do
        alive "$(cat "$DIR/pids/jm")" || die "the JobManager died; see $DIR/log/jm.log and jm.out"
        missing=
        if list=$(rest /taskmanagers 2>/dev/null); then
            for id in "$@"; do
                jq -e --arg id "$id" '.taskmanagers[] | select(.id == $id)' <<<"$list" >/dev/null ||
                    missing+=" $id"
            done
            [[ -z $missing ]] && return 0
        else
            missing=" (REST not up)"
        fi
        for id in "$@"; do
            alive "$(cat "$DIR/pids/$id")" || die "TaskManager $id died; see $DIR/log/$id.log and $id.out"
        done
        ((SECONDS < until)) || die "not registered within ${START_TIMEOUT}s:$missing"
        sleep 0.3
    done
}

stop_pid() { # ROLE PID: SIGTERM, 20 s, SIGKILL, 10 s
    local role=$1 pid=$2
    alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_dead "$pid" 20; then
        say "$role (pid $pid) ignored SIGTERM for 20 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        wait_dead "$pid" 10 || say "$role (pid $pid) still alive after SIGKILL"
    fi
}

cmd=${1:-}
DIR=${2:-}
[[ -n $cmd && -n $DIR ]] || die "usage: standalone.sh start|add-tm|kill-tm|stop|status DIR [N]"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
cd "$DIR" # the JVMs' working directory: what they write relative to it stays in DIR

case $cmd in
start)
    tms=${3:-2}
    if [[ -e $DIR/pids/jm ]] && alive "$(cat "$DIR/pids/jm")"; then
        die "a JobManager of $DIR runs already (pid $(cat "$DIR/pids/jm"))"
    fi
    [[ -x $SFS_BIN_DIR/sfs ]] || die "$SFS_BIN_DIR/sfs missing (SFS_BIN_DIR)"
    [[ -f $SFS_JNI_DIR/libsfs_jni.so ]] || die "$SFS_JNI_DIR/libsfs_jni.so missing (SFS_JNI_DIR)"
    rest_port=${FLINK_REST_PORT:-$(free_port)}
    rpc_port=${FLINK_RPC_PORT:-$(free_port)}
    write_config "$rest_port" "$rpc_port"
    echo "$rest_port" >"$DIR/rest.port"
    build_classpath
    resource_params GET_JM_RESOURCE_PARAMS
    resource_params GET_TM_RESOURCE_PARAMS
    start_jm
    ids=()
    for _ in $(seq "$tms"); do
        n=$(next_tm)
        start_tm "$n"
        ids+=("tm-$n")
    done
    wait_rest "${ids[@]}"
    say "up: http://localhost:$rest_port (${#ids[@]} TaskManagers)"
    ;;
add-tm)
    [[ -e $DIR/pids/jm ]] || die "no cluster in $DIR"
    n=$(next_tm)
    start_tm "$n"
    wait_rest "tm-$n"
    echo "$n"
    ;;
kill-tm)
    n=${3:?kill-tm DIR N}
    [[ -e $DIR/pids/tm-$n ]] || die "no TaskManager $n in $DIR"
    pid=$(cat "$DIR/pids/tm-$n")
    alive "$pid" || die "TaskManager $n (pid $pid) is not running"
    kill -KILL "$pid"
    wait_dead "$pid" 10 || die "TaskManager $n (pid $pid) survived kill -9 for 10 s"
    echo "$pid"
    ;;
stop)
    # TaskManagers first (a clean exit stops each one's sfs group from its shutdown hook),
    # all at once, then the JobManager
    for f in "$DIR"/pids/tm-*; do
        [[ -e $f ]] || continue
        pid=$(cat "$f")
        alive "$pid" && kill -TERM "$pid" 2>/dev/null || true
    done
    for f in "$DIR"/pids/tm-*; do
        [[ -e $f ]] && stop_pid "$(basename "$f")" "$(cat "$f")"
    done
    [[ -e $DIR/pids/jm ]] && stop_pid jm "$(cat "$DIR/pids/jm")"
    left=0
    for f in "$DIR"/pids/*; do
        [[ -e $f ]] || continue
        if alive "$(cat "$f")"; then
            say "$(basename "$f") (pid $(cat "$f")) is still alive"
            left=1
        fi
    done
    exit "$left"
    ;;
status)
    for f in "$DIR"/pids/*; do
        [[ -e $f ]] || continue
        pid=$(cat "$f")
        if alive "$pid"; then s=alive; else s=dead; fi
        echo "$(basename "$f") $pid $s"
    done
    ;;
*)
    die "unknown command $cmd (start|add-tm|kill-tm|stop|status)"
    ;;
esac
