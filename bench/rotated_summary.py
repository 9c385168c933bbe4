#!/usr/bin/env python3
"""rotated_summary.py - the rotated-parity runs of bench/scenarios.sh (issue 13) as one
table: per run its p50, p95, p99 and mean latency, lost and wrong requests, results
decoded, late blocks, and its p50 against the uncoded (or dedicated) run beside it;
for the crash runs the p50 before and after the crash.

usage: bench/rotated_summary.py OUT_DIR
"""
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    return data[0] if isinstance(data, list) else data


def row(name, run, base):
    lat = run["latency_ms"]
    c = run.get("counters", {})
    ratio = lat["p50"] / base["latency_ms"]["p50"] if base else float("nan")
    crash = ""
    if "after_crash" in run:
        crash = "  before %.2f after %.2f" % (run["before_crash"]["p50"], run["after_crash"]["p50"])
    print("%-34s %9.2f %9.2f %9.2f %9.2f %4d %4d %7d %5d %7.3f%s" % (
        name, lat["p50"], lat["p95"], lat["p99"], lat["mean"], run["lost"], run["wrong"],
        c.get("results_decoded", 0), c.get("late_blocks", 0), ratio, crash))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "bench-results"
    print("%-34s %9s %9s %9s %9s %4s %4s %7s %5s %7s" % (
        "run", "p50", "p95", "p99", "mean", "lost", "bad", "decoded", "late", "/base"))
    for path in sorted(glob.glob(os.path.join(out, "rotated_*.json"))):
        name = os.path.basename(path)[:-5]
        stem, _, layout = name.rpartition("_")
        base_path = os.path.join(out, stem + ("_uncoded.json" if "crash" not in stem
                                              and "hetero" not in stem else "_dedicated.json"))
        base = load(base_path) if os.path.exists(base_path) and base_path != path else None
        row(name, load(path), base)


if __name__ == "__main__":
    main()
