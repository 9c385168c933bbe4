#!/usr/bin/env python3
"""ab_summary.py - bench/ab.sh's output: per scenario the median over runs of
the p50 latency for A and B, B/A, the larger run-to-run spread ((max - min) /
median) of the two, and lost/wrong summed over runs."""
import glob, json, os, statistics, sys
root = sys.argv[1] if len(sys.argv) > 1 else '/tmp/ab'
rows = {}
for ver in ('a', 'b'):
    for run in sorted(glob.glob(f'{root}/{ver}[0-9]')):
        for f in sorted(glob.glob(f'{run}/*.json')):
            data = json.load(open(f))
            name = os.path.basename(f)[:-5]
            # A run with --baseline writes a list (the coded run, then the
            # baseline's): a row each. A `plan` run's JSON has no request figures.
            runs = data if isinstance(data, list) else [data]
            for d in runs:
                if 'latency_ms' not in d:
                    continue
                row = name if len(runs) == 1 else f"{name}:{d.get('label', '?')}"
                rows.setdefault(row, {}).setdefault(ver, []).append(
                    (d['latency_ms']['p50'], d['latency_ms']['p99'], d['lost'], d['wrong'],
                     d['fallbacks']))
print(f"{'scenario':34s} {'A p50 (runs)':>26s} {'B p50 (runs)':>26s} {'B/A':>8s} {'spread':>7s}"
      f" {'p99 B/A':>8s}  lost/wrong")
for name, v in rows.items():
    o, n = v.get('a', []), v.get('b', [])
    if not o or not n:
        continue
    mo = statistics.median(x[0] for x in o); mn = statistics.median(x[0] for x in n)
    spread = max((max(x[0] for x in s) - min(x[0] for x in s)) / statistics.median(x[0] for x in s)
                 for s in (o, n))
    fmt = lambda s: ' '.join(f'{x[0]:.1f}' for x in s)
    lw = f"{sum(x[2] for x in o)}/{sum(x[3] for x in o)} -> {sum(x[2] for x in n)}/{sum(x[3] for x in n)}"
    p99 = statistics.median(x[1] for x in n) / statistics.median(x[1] for x in o)
    print(f"{name:34s} {mo:7.1f} ({fmt(o):>17s}) {mn:7.1f} ({fmt(n):>17s}) {mn/mo:8.3f} {spread:7.3f}"
          f" {p99:8.3f}  {lw}")
