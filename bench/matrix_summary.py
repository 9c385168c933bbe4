#!/usr/bin/env python3
"""matrix_summary.py - bench/matrix.sh's output as tables.

usage: matrix_summary.py OUT [--all]

Per row (scenario): the default configuration's median over runs of the
p50 latency, the best explicit configuration's (plan x layout x split, not
uncoded) and their ratio, uncoded's and default/uncoded; p99 likewise where
the row ran at least 300 requests (fewer say little of a tail); the larger
run-to-run spread ((max - min) / median) of the two compared; lost and
wrong summed over every run of the row. --all adds every configuration's
median p50 per row."""
import glob
import json
import os
import statistics
import sys

P99_MIN_REQUESTS = 300


def load(root):
    rows = {}  # row -> config -> [run dicts]
    for path in sorted(glob.glob(os.path.join(root, 'run*', '*', '*.json'))):
        row = os.path.basename(os.path.dirname(path))
        config = os.path.basename(path)[:-5]
        with open(path) as f:
            data = json.load(f)
        rows.setdefault(row, {}).setdefault(config, []).append(data)
    return rows


def median(runs, key):
    return statistics.median(r['latency_ms'][key] for r in runs)


def spread(runs):
    values = [r['latency_ms']['p50'] for r in runs]
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else 0.0


def summary_line(row, configs):
    default = configs.get('default')
    explicit = {c: runs for c, runs in configs.items() if c not in ('default', 'uncoded')}
    if not default or not explicit:
        return None
    best = min(explicit, key=lambda c: median(explicit[c], 'p50'))
    d50, b50 = median(default, 'p50'), median(explicit[best], 'p50')
    uncoded = configs.get('uncoded')
    u50 = median(uncoded, 'p50') if uncoded else float('nan')
    tail = ''
    if default[0]['requests'] >= P99_MIN_REQUESTS:
        tail = f"{median(default, 'p99') / median(explicit[best], 'p99'):.3f}"
    lost = sum(r['lost'] for runs in configs.values() for r in runs)
    wrong = sum(r['wrong'] for runs in configs.values() for r in runs)
    return (f"| {row} | {len(default)} | {d50:.1f} | {best} {b50:.1f} | {d50 / b50:.3f} | "
            f"{tail or '-'} | {u50:.1f} | {d50 / u50:.3f} | "
            f"{max(spread(default), spread(explicit[best])):.3f} | {lost}/{wrong} |")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    rows = load(sys.argv[1])
    print('| scenario | runs | default p50 | best explicit p50 | default/best | p99 '
          'default/best | uncoded p50 | default/uncoded | spread | lost/wrong |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for row, configs in rows.items():
        line = summary_line(row, configs)
        if line:
            print(line)
    if '--all' in sys.argv:
        for row, configs in rows.items():
            print(f'\n{row}:')
            for config, runs in sorted(configs.items(), key=lambda c: median(c[1], 'p50')):
                print(f"  {config:32s} p50 {median(runs, 'p50'):8.1f}  p99 "
                      f"{median(runs, 'p99'):8.1f}  runs {len(runs)}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
