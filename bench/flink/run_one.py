#!/usr/bin/env python3
"""One Nexmark-on-Flink run (bench/flink/nexmark.sh calls it once per query, backend and
repetition): starts the job's JVM, watches it, and prints the run's JSON line.

    run_one.py RUN_DIR QUERY BACKEND C_DIGEST CLASSPATH ROOT EVENTS CKPT_MS

What it counts, and how:
- cpu_s: getrusage(RUSAGE_CHILDREN) after the JVM exits — the JVM and every process it reaped
  (sfs's supervisor, compactor and checkpointer), exact. This script's own sampling is not in
  it.
- cpu_s_by_process: jvm is the JVM's own count, read by itself just before it exits; the sfs
  processes' are their utime + stime from /proc as last sampled (once a second, so up to a
  second short); unattributed is the rest of cpu_s (the sfs processes' last second, the JVM's
  exit).
- peak_rss_bytes: VmHWM of each process of the run by name (jvm, sfs, sfs-compactor,
  sfs-checkpointe — the kernel's 15-character name), as last sampled.
- ckpts: every completed checkpoint as [id, end-to-end ms, checkpointed bytes, state bytes]
  (NexmarkJob's CheckpointStats), beside their medians and maxima.
- shm_bytes: peak of the bytes allocated to the run's sfs segments (/dev/shm/sfs.flink-<JVM
  pid>-*), sampled.
- state_bytes_on_disk: peak and last sampled bytes of the backend's local files (RUN_DIR/local:
  RocksDB's and ForSt's instances; RUN_DIR/sfs: sfs's data directory); ckpt_dir_bytes_peak:
  of RUN_DIR/checkpoints.
Sampling costs this script's CPU, not the run's. JVM_OPTS in the environment adds JVM flags.

RUN_TIMEOUT_S in the environment bounds the run (unset: no bound; the digest test sets one): past
it, the JVM's threads (jstack) and each sfs process's (gdb, when installed) go to RUN_DIR/stacks.txt,
their first lines to stderr, the JVM and its descendants are killed, and the line says
"timeout": true. A hung run then says where it hung instead of using up the caller's budget.
"""
import json
import os
import resource
import subprocess
import sys
import threading
import time


def tree_bytes(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass  # a file removed while we walk
    return total


def children_of(root):
    """root and every live descendant: {pid: comm}."""
    parent, comm = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        r = s.rindex(")")
        comm[int(d)] = s[s.index("(") + 1:r]
        parent[int(d)] = int(s[r + 2:].split()[1])
    out = {}
    for pid in comm:
        p = pid
        while p in parent and p != root and p > 1:
            p = parent[p]
        if p == root:
            out[pid] = comm[pid]
    return out


def proc_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    v = s[s.rindex(")") + 2:].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def proc_hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class Sampler(threading.Thread):
    def __init__(self, pid, run):
        super().__init__(daemon=True)
        self.pid, self.dir = pid, run
        self.cpu, self.hwm = {}, {}  # pid -> (name, value)
        self.shm = self.disk = self.disk_last = self.ckpt = 0
        self.stop = threading.Event()

    def sample(self):
        for pid, comm in children_of(self.pid).items():
            name = "jvm" if pid == self.pid else comm
            try:  # a zombie shows neither: keep the last value seen (both only grow)
                self.hwm[pid] = (name, max(self.hwm.get(pid, ("", 0))[1], proc_hwm(pid)))
                self.cpu[pid] = (name, max(self.cpu.get(pid, ("", 0))[1], proc_cpu_s(pid)))
            except (OSError, IndexError):
                pass  # it exited
        prefix = "sfs.flink-%d-" % self.pid
        shm = 0
        for f in os.listdir("/dev/shm"):
            if f.startswith(prefix):
                try:
                    shm += os.lstat("/dev/shm/" + f).st_blocks * 512
                except OSError:
                    pass
        self.shm = max(self.shm, shm)
        self.disk_last = tree_bytes(self.dir + "/local") + tree_bytes(self.dir + "/sfs")
        self.disk = max(self.disk, self.disk_last)
        self.ckpt = max(self.ckpt, tree_bytes(self.dir + "/checkpoints"))

    def run(self):
        while not self.stop.wait(1.0):
            self.sample()

    def by_name(self, d, combine):
        out = {}
        for name, v in d.values():
            out[name] = combine(out.get(name, 0), v)
        return out


def dump_stacks(pid, path):
    """The JVM's threads and each sfs process's, to path; returns the summary lines."""
    out = []
    with open(path, "w") as f:
        for p, comm in sorted(children_of(pid).items()):
            if p == pid:
                cmd = ["jstack", str(p)]
            elif comm.startswith("sfs"):
                cmd = ["gdb", "-p", str(p), "-batch", "-ex", "thread apply all bt"]
            else:
                continue
            f.write("=== %d %s\n" % (p, comm))
            f.flush()
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, text=True, timeout=60)
                f.write(r.stdout)
                # a frame of an sfs process, or a Flink task thread's top frames
                top = [l.strip() for l in r.stdout.splitlines()
                       if l.startswith("#") or l.strip().startswith("at io.sfs")][:6]
                out.append("%d %s: %s" % (p, comm, " | ".join(top)))
            except (OSError, subprocess.TimeoutExpired) as e:
                f.write("(%s)\n" % e)
    return out


def kill_tree(pid):
    for p in sorted(children_of(pid), reverse=True):
        try:
            os.kill(p, 9)
        except OSError:
            pass


def main():
    run, q, b, cdig, cp, root, events, ckpt = sys.argv[1:]
    # JVM_OPTS: extra JVM flags, e.g. a flight recording (-XX:StartFlightRecording=...)
    cmd = ["java", "-Xmx4g"] + os.environ.get("JVM_OPTS", "").split() + [
           "-Djava.library.path=%s/build/jni" % root, "-cp", cp,
           "io.sfs.nexmark.flink.NexmarkJob", "--query", q, "--backend", b, "--events", events,
           "--ckpt-ms", ckpt, "--work", run, "--sfs-bin", root + "/bin"]
    with open(run + "/job.log", "w") as log:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        s = Sampler(p.pid, run)
        s.start()
        limit = float(os.environ.get("RUN_TIMEOUT_S", "0")) or None
        try:
            out, _ = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            lines = dump_stacks(p.pid, run + "/stacks.txt")
            kill_tree(p.pid)
            p.communicate()
            for f in os.listdir("/dev/shm"):  # no process is left to remove the run's segments
                if f.startswith("sfs.flink-%d-" % p.pid):
                    os.unlink("/dev/shm/" + f)
            s.stop.set()
            s.join()
            for l in lines:
                print("run_one.py: %s %s hung: %s" % (q, b, l), file=sys.stderr)
            print(json.dumps({"query": q, "backend": b, "events": int(events), "ok": False,
                              "timeout": True, "log": run + "/job.log",
                              "stacks": run + "/stacks.txt"}))
            return
        s.stop.set()
        s.join()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru.ru_utime + ru.ru_stime
    line = [l for l in out.splitlines() if l.startswith("NEXMARK ")]
    if p.returncode != 0 or not line:
        print(json.dumps({"query": q, "backend": b, "events": int(events), "ok": False,
                          "exit": p.returncode, "log": run + "/job.log"}))
        return
    j = json.loads(line[-1][len("NEXMARK "):])
    j["cpu_s"] = round(cpu, 3)
    j["events_per_cpu_s"] = round(j["events"] / cpu) if cpu > 0 else None
    jvm = j.pop("jvm_cpu_s")
    by = {"jvm": jvm}
    for name, v in s.by_name(s.cpu, lambda a, c: a + c).items():
        if name != "jvm":
            by[name] = round(v, 3)
    by["unattributed"] = round(cpu - sum(by.values()), 3)
    j["cpu_s_by_process"] = by
    j["peak_rss_bytes"] = s.by_name(s.hwm, max)
    j["shm_bytes"] = s.shm
    j["state_bytes_on_disk"] = {"peak": s.disk, "last": s.disk_last}
    j["ckpt_dir_bytes_peak"] = s.ckpt
    j["c_digest"] = cdig
    j["digest_ok"] = (cdig == "" or cdig == j["result_digest"])
    j["ok"] = True
    print(json.dumps(j))


if __name__ == "__main__":
    main()
