#!/usr/bin/env python3
"""Warp stall reasons per kernel from `ncu --csv --page raw --metrics gpu__time_duration.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio`:
for each kernel name (the step's largest first), its total time and the stall reasons' average warps a issued
instruction, weighted by each launch's time; the largest reasons first, and the whole range's weighted average. The
question it answers (thirty-fifth session): are batch 1's short kernels waiting for instructions (no_instruction: code
fetched cold at each launch) or for memory (long_scoreboard)? Usage: ncu_stalls.py FILE.csv [KERNELS [REASONS]]"""
import csv, sys, re, collections
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 5]
nk = int(sys.argv[2]) if len(sys.argv) > 2 else 14
nr = int(sys.argv[3]) if len(sys.argv) > 3 else 5
hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[hdr]; kn = h.index("Kernel Name"); tc = h.index("gpu__time_duration.sum")
pat = re.compile(r"smsp__average_warps_issue_stalled_(.+)_per_issue_active\.ratio")
rc = {m.group(1): i for i, c in enumerate(h) for m in [pat.fullmatch(c)] if m}
if not rc: sys.exit("no stall columns in " + sys.argv[1])
tot = collections.Counter(); cnt = collections.Counter()
acc = collections.defaultdict(collections.Counter); whole = collections.Counter()
def num(s):
    try: return float(s.replace(",", ""))
    except ValueError: return None
for r in rows[hdr + 1:]:
    t = num(r[tc])
    if t is None: continue
    name = r[kn].split("(")[0][:60]
    tot[name] += t; cnt[name] += 1
    for k, i in rc.items():
        v = num(r[i])
        if v is not None:
            acc[name][k] += v * t; whole[k] += v * t
T = sum(tot.values())
def line(c, t): return "  ".join(f"{k} {v / t:.2f}" for k, v in c.most_common(nr))
print(f"all {len(rc)} reasons, {sum(cnt.values())} launches; weighted by time: {line(whole, T)}")
for name, t in tot.most_common(nk):
    print(f"{100 * t / T:5.1f}% {cnt[name]:4d}x {name}\n        {line(acc[name], t)}")
