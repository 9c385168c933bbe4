#!/usr/bin/env python3
"""redundancy_summary.py - what a chaos run of cdcgemm-bench says about staying
redundant (issue 11): one line per run of the JSON, with the CSV beside it.

usage: bench/redundancy_summary.py RUN.json [RUN.csv]

Prints, per run: requests, lost, wrong, fallbacks (requests with a shard
computed on the coordinator), the chaos events, degraded calls (calls with
fewer parity shards than configured) as a fraction of all calls beside the
fraction of the run the repair windows cover, the mean and longest time to
full redundancy, resident memory after warm-up (the sample at request 1,000)
and at the end, descriptors and threads over the samples; with the CSV the
median latency before the first event, of the requests that ran degraded (the
repair windows: weights shipping in the background) and of the rest after it,
and the redundancy the requests from the first event (or --crash-at) on could use.
"""
import csv
import json
import statistics
import sys


def medians(csv_path, label, first_event_request):
    before, degraded, after = [], [], []
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            if row["run"] != label:
                continue
            q, ms = int(row["request"]), float(row["latency_ms"])
            if first_event_request is not None and q < first_event_request:
                before.append(ms)
            elif int(row["redundancy"]) < int(row["r"]):
                degraded.append(ms)
            else:
                after.append(ms)
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    return med(before), len(degraded), med(degraded), med(after)


def redundancy_after(csv_path, label, first_event_request):
    """The redundancy the requests from the first event on could use: how many ran
    at each level, and from which request on every one had the configured r."""
    levels, rows = {}, []
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            if row["run"] != label or int(row["request"]) < first_event_request:
                continue
            level = int(row["redundancy"])
            levels[level] = levels.get(level, 0) + 1
            rows.append((int(row["request"]), level, int(row["r"])))
    back = None
    for q, level, r in rows:
        if level < r:
            back = None
        elif back is None:
            back = q
    summary = ", ".join(f"{count} at {level}" for level, count in sorted(levels.items()))
    full = f"full from request {back} on" if back is not None else "never full again"
    return f"redundancy from request {first_event_request}: {summary}; {full}"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    doc = json.load(open(sys.argv[1]))
    runs = doc["runs"] if isinstance(doc, dict) and "runs" in doc else doc
    for run in runs if isinstance(runs, list) else [runs]:
        c = run["counters"]
        events = run.get("chaos", [])
        kinds = {}
        for e in events:
            kinds[e["action"]] = kinds.get(e["action"], 0) + 1
        total_ms = run["latency_ms"]["mean"] * run["requests"]
        repair_ms = c["repair_ms_mean"] * c["redundancy_repairs"]
        samples = run.get("samples", [])
        warm = next((s for s in samples if s["request"] >= 1000), samples[0] if samples else None)
        end = samples[-1] if samples else None
        print(f"{run['label']}: workers={run['workers']} r={run['parity']} "
              f"requests={run['requests']} lost={run['lost']} wrong={run['wrong']} "
              f"fallback_requests={run['fallbacks']} "
              f"({100.0 * run['fallbacks'] / max(run['requests'], 1):.2f}%) events={kinds}")
        print(f"  calls={c['calls']} degraded={c['degraded_calls']} "
              f"({100.0 * c['degraded_calls'] / max(c['calls'], 1):.2f}% of calls; repair "
              f"windows cover {100.0 * repair_ms / max(total_ms, 1e-9):.2f}% of the run) "
              f"deaths={c['worker_deaths']} respawns={c['worker_respawns']} "
              f"repairs={c['redundancy_repairs']} repair_ms mean={c['repair_ms_mean']:.1f} "
              f"max={c['repair_ms_max']:.1f} background_MB={c['background_weight_bytes'] / 1e6:.1f}")
        if warm and end:
            fds = sorted({s["fds"] for s in samples})
            threads = sorted({s["threads"] for s in samples})
            print(f"  rss_kib after warm-up (request {warm['request']})={warm['rss_kib']} "
                  f"end={end['rss_kib']} ({100.0 * (end['rss_kib'] - warm['rss_kib']) / warm['rss_kib']:+.2f}%) "
                  f"fds seen={fds} threads seen={threads}")
        if len(sys.argv) > 2:
            first = events[0]["request"] if events else run.get("crash_at")
            b, n, d, a = medians(sys.argv[2], run["label"], first)
            print(f"  p50 ms: before the first event {b:.2f}; {n} degraded requests {d:.2f} "
                  f"({d / b:.3f}x); the rest after {a:.2f} ({a / b:.3f}x)")
            if first is not None:
                print("  " + redundancy_after(sys.argv[2], run["label"], first))


if __name__ == "__main__":
    main()
