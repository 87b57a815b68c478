#!/usr/bin/env python3
"""Sums `ncu --csv --page raw --metrics gpu__time_duration.sum[,dram__bytes_read.sum]` rows per kernel name:
total us, count, share of the profiled range, and with the DRAM metric the bytes read and their rate
(GB/s over the kernel's own time). Usage: ncu_sum.py FILE.csv"""
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 5]
hdr = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[hdr]; kn = h.index("Kernel Name"); tc = h.index("gpu__time_duration.sum")
dc = h.index("dram__bytes_read.sum") if "dram__bytes_read.sum" in h else -1
unit = rows[hdr + 1][tc] if hdr + 1 < len(rows) else ""
dunit = rows[hdr + 1][dc] if dc >= 0 and hdr + 1 < len(rows) else ""
tot = collections.OrderedDict(); cnt = collections.Counter(); byt = collections.Counter()
for r in rows[hdr + 1:]:
    try: v = float(r[tc].replace(",", ""))
    except ValueError: continue
    name = r[kn].split("(")[0][:70]
    tot[name] = tot.get(name, 0.0) + v; cnt[name] += 1
    if dc >= 0:
        try: byt[name] += float(r[dc].replace(",", ""))
        except ValueError: pass
scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(unit, 1e-3)
bscale = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(dunit, 1.0)
all_ = sum(tot.values()) * scale
print(f"total {all_:.1f} us over {sum(cnt.values())} kernels (unit {unit})")
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    us = v * scale
    extra = ""
    if dc >= 0 and us > 0:
        gb = byt[k] * bscale / 1e9
        extra = f"  {gb:8.3f} GB read {gb / (us * 1e-6):7.0f} GB/s"
    print(f"{us:10.1f} us {100*us/all_:5.1f}% {cnt[k]:5d}x{extra}  {k}")
