#!/usr/bin/env python3
# bench/pair.py — two builds (or two environments) of sfs on one Nexmark
# query, in alternating runs (A B, B A, A B, ...), each `sfs run --query Q
# --backend table --events N --workers 1 --json` in a fresh data directory
# measured (du, without checkpoints/) and removed; per run and as medians:
# events/s, the worker's stall, CPU ms by role (worker, compactor,
# checkpointer), events per CPU-second of all three, table files and keys
# asked (table_probe_keys), the key index's upkeep and the flush's waits on
# a merge's lock (ms), the map tables' key filter (entries it found new, its
# rebuilds' ms, its MiB at the end), the longest checkpoint, the live state in MiB;
# and the ratio B/A of each median.  Alternation cancels a machine's drift;
# medians its noise.
#
#   bench/pair.py Q EVENTS PAIRS A_BIN A_ENV B_BIN B_ENV [sfs run args...]
#   (ENV: K=V[,K=V...] or -), e.g.
#   bench/pair.py q20 20000000 3 /tmp/before/bin - bin - 
#   bench/pair.py q20 20000000 2 bin SFS_TABLE_MERGE_BUDGET=0 bin SFS_TABLE_MERGE_BUDGET=1
import json, os, subprocess, sys, shutil, statistics, time
q, ev, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
arms = [(sys.argv[4], sys.argv[5]), (sys.argv[6], sys.argv[7])]
extra = sys.argv[8:]
res = {0: [], 1: []}
def run(i, k):
    b, e = arms[i]
    env = dict(os.environ)
    if e != "-":
        for kv in e.split(","):
            a, v = kv.split("=", 1); env[a] = v
    d = f"/tmp/sfs-pair-{i}"
    shutil.rmtree(d, ignore_errors=True)
    t = time.time()
    p = subprocess.run([f"{b}/sfs", "run", "--job", f"pair{i}{k}", "--query", q, "--backend", "table",
        "--events", ev, "--workers", "1", "--json", "--data", d] + extra, env=env, capture_output=True, text=True)
    du = subprocess.run(["du", "-sb", "--exclude=checkpoints", d], capture_output=True, text=True).stdout.split()
    shutil.rmtree(d, ignore_errors=True)
    try:
        j = json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        print("FAILED", p.stderr[-500:]); return
    c = j.get("cpu_ms_by_role", {})
    wall = j.get("elapsed_ms") or j.get("wall_ms") or 0
    evs = j.get("events_per_sec")
    r = dict(evs=evs, stall=j.get("stall_ms", 0), w=c.get("worker", 0), c=c.get("compactor", 0), k=c.get("checkpointer", 0),
             files=j.get("table_files"), pk=j.get("table_probe_keys"), rows=j.get("table_rows_written"),
             ckmax=j.get("checkpoint_max_ms"), ckmed=j.get("checkpoint_median_ms"),
             upkeep=j.get("table_index_upkeep_ms"), fwait=j.get("table_flush_wait_ms"),
             kfrej=j.get("table_kfilter_rejects"), kfms=j.get("table_kfilter_rebuild_ms"), kfmb=(j.get("table_kfilter_bytes") or 0) >> 20, load=os.getloadavg()[0], mb=int(du[0])>>20 if du else None)
    r["ev_cpus"] = int(ev) / ((r["w"] + r["c"] + r["k"]) / 1000.0) if r["w"] else 0
    res[i].append(r)
    print(i, k, {a: (round(v, 3) if isinstance(v, float) else v) for a, v in r.items()}, flush=True)
for k in range(n):
    for i in ((0, 1) if k % 2 == 0 else (1, 0)):
        run(i, k)
def med(i, f):
    v = [r[f] for r in res[i] if r.get(f) is not None]
    return statistics.median(v) if v else None
for f in ["evs", "stall", "w", "c", "k", "ev_cpus", "files", "pk", "upkeep", "fwait", "kfms", "ckmax", "mb"]:
    a, b = med(0, f), med(1, f)
    print(f"{f:8} A {a}  B {b}  B/A {b/a:.3f}" if a and b else f"{f:8} A {a} B {b}")
