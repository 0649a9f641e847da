#!/usr/bin/env python3
"""Tables and charts from bench/flink/nexmark.sh's JSON lines.

    summarize.py OUT_PREFIX RUNS.jsonl...

Prints markdown to stdout:
- per query and backend, the median over repetitions of events per CPU-second (and the number
  of runs), then sfs's ratio against each other backend, the ratios of medians; the geomean of
  each ratio over the stateful queries (every query but q0) present for both;
- per query and backend, the median checkpoint duration, its maximum, the median bytes a
  checkpoint uploaded, the last checkpoint's state size, the peak bytes of the backend's local
  files and of sfs's shared memory, and the peak RSS of the JVM;
- whether every digest agreed with the C runtime's and across backends.
Writes OUT_PREFIX-throughput.png (events per CPU-second by query and backend) and
OUT_PREFIX-checkpoints.png (each checkpoint's end-to-end duration against the state it refers
to, by backend) with gnuplot, and the data files beside them.
A run that failed (ok false) is listed, never counted.
"""
import collections
import json
import math
import os
import statistics
import subprocess
import sys

ORDER = ["sfs", "rocksdb", "hashmap", "forst"]


def qkey(q):
    return int(q[1:]) if q[1:].isdigit() else 999


def main():
    prefix, files = sys.argv[1], sys.argv[2:]
    runs, failed = [], []
    for f in files:
        for line in open(f):
            line = line.strip()
            if not line.startswith("{"):
                continue
            j = json.loads(line)
            (runs if j.get("ok") else failed).append(j)
    by = collections.defaultdict(list)
    for j in runs:
        by[(j["query"], j["backend"])].append(j)
    queries = sorted({q for q, _ in by}, key=qkey)
    backends = [b for b in ORDER if any(k[1] == b for k in by)]
    backends += sorted({b for _, b in by} - set(backends))
    events = sorted({j["events"] for j in runs})
    ckpt = sorted({j.get("ckpt_ms") for j in runs})

    def med(q, b, f):
        v = [f(j) for j in by.get((q, b), []) if f(j) is not None]
        return statistics.median(v) if v else None

    eps = lambda j: j.get("events_per_cpu_s")
    print("Events: %s; checkpoint interval: %s ms; runs: %d (%d failed)\n"
          % (", ".join(map(str, events)), ", ".join(map(str, ckpt)), len(runs), len(failed)))
    print("**Events per CPU-second** (median of the runs; runs in brackets):\n")
    others = [b for b in backends if b != "sfs"]
    print("| query | " + " | ".join(backends) + "".join(" | sfs / %s" % b for b in others) + " |")
    print("|---" * (1 + len(backends) + len(others)) + "|")
    ratios = collections.defaultdict(list)
    for q in queries:
        cells = []
        for b in backends:
            m = med(q, b, eps)
            cells.append("%.1fK (%d)" % (m / 1000, len(by[(q, b)])) if m else "—")
        s = med(q, "sfs", eps)
        for b in others:
            o = med(q, b, eps)
            if s and o:
                cells.append("%.2f×" % (s / o))
                if q != "q0":
                    ratios[b].append(s / o)
            else:
                cells.append("—")
        print("| %s | %s |" % (q, " | ".join(cells)))
    for b in others:
        if ratios[b]:
            g = math.exp(sum(map(math.log, ratios[b])) / len(ratios[b]))
            print("\nsfs / %s, geomean over %d stateful queries: %.2f× (lowest %.2f×)"
                  % (b, len(ratios[b]), g, min(ratios[b])))

    print("\n**Checkpoints and memory** (medians of the runs):\n")
    print("| query | backend | ckpt ms median | ckpt ms max | sync / async ms median | bytes uploaded median"
          " | state referred to (last) | local files peak | shm peak | JVM peak RSS | CPU s: JVM / sfs processes |")
    print("|---" * 11 + "|")
    mb = lambda v: "—" if v is None else "%.0f MB" % (v / 1e6)
    for q in queries:
        for b in backends:
            if (q, b) not in by:
                continue
            sfs_cpu = med(q, b, lambda j: sum(v for k, v in j["cpu_s_by_process"].items()
                                               if k.startswith("sfs")))
            sync = med(q, b, lambda j: j.get("ckpt_sync_ms_median"))
            asyn = med(q, b, lambda j: j.get("ckpt_async_ms_median"))
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f / %.1f |" % (
                q, b, "%.0f" % med(q, b, lambda j: j.get("ckpt_ms_median")),
                "%.0f" % med(q, b, lambda j: j.get("ckpt_ms_max")),
                "—" if sync is None else "%.0f / %.0f" % (sync, asyn),
                mb(med(q, b, lambda j: j.get("ckpt_bytes_median"))),
                mb(med(q, b, lambda j: j.get("ckpt_state_bytes_last"))),
                mb(med(q, b, lambda j: j.get("state_bytes_on_disk", {}).get("peak"))),
                mb(med(q, b, lambda j: j.get("shm_bytes"))),
                mb(med(q, b, lambda j: j.get("peak_rss_bytes", {}).get("jvm"))),
                med(q, b, lambda j: j["cpu_s_by_process"]["jvm"]), sfs_cpu or 0))

    bad = [j for j in runs if not j.get("digest_ok")]
    digests = collections.defaultdict(set)
    for j in runs:
        digests[(j["query"], j["events"])].add(j["result_digest"])
    split = [k for k, v in digests.items() if len(v) > 1]
    print("\nDigests: %s" % ("every run's equals the C runtime's and every other backend's"
                             if not bad and not split else
                             "DIFFER: %s %s" % ([(j["query"], j["backend"]) for j in bad], split)))
    for j in failed:
        print("FAILED: %s %s (exit %s, %s)" % (j["query"], j["backend"], j.get("exit"), j.get("log")))

    # charts
    with open(prefix + "-throughput.dat", "w") as f:
        f.write("query " + " ".join(backends) + "\n")
        for q in queries:
            f.write(q + " " + " ".join("%.0f" % (med(q, b, eps) or 0) for b in backends) + "\n")
    with open(prefix + "-checkpoints.dat", "w") as f:
        for i, b in enumerate(backends):
            f.write("# %s\n" % b)
            for j in runs:
                if j["backend"] == b:
                    for c in j.get("ckpts", []):
                        f.write("%.1f %d\n" % (c[3] / 1e6, c[1]))
            f.write("\n\n")
    plot = """
set terminal pngcairo size 1000,520 font ",10"
set output '{p}-throughput.png'
set title 'Nexmark on Flink: events per CPU-second (JVM + sfs processes), median of runs'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'events per CPU-second'
set yrange [0:*]
set key top left
plot for [i=2:{n}] '{p}-throughput.dat' using i:xtic(1) title columnheader(i)
set output '{p}-checkpoints.png'
set title 'Checkpoint duration against the state it refers to, every checkpoint of every run'
set style data points
set xlabel 'state size (MB)'
set ylabel 'end-to-end duration (ms)'
set logscale y
set yrange [10:*]
plot {plots}
""".format(p=prefix, n=len(backends) + 1,
           plots=", ".join("'{p}-checkpoints.dat' index {i} using 1:2 title '{b}' pt 7 ps 0.6"
                           .format(p=prefix, i=i, b=b) for i, b in enumerate(backends)))
    try:
        subprocess.run(["gnuplot"], input=plot, text=True, check=True)
        print("\nCharts: %s-throughput.png, %s-checkpoints.png"
              % (os.path.basename(prefix), os.path.basename(prefix)))
    except (OSError, subprocess.CalledProcessError) as e:
        print("\n(no charts: gnuplot: %s)" % e)


if __name__ == "__main__":
    main()
