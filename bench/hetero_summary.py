#!/usr/bin/env python3
"""hetero_summary.py - what the heterogeneous-device runs of bench/scenarios.sh say
(issue 12): a worker killed mid-run under each plan, and a device that becomes slower.

usage: bench/hetero_summary.py kill EQUAL.csv PROFILED.csv
       bench/hetero_summary.py shift SHIFT.csv SHIFT.log OPTIMUM.csv

kill: each CSV beside its JSON (same stem); the kill's request comes from the JSON's
chaos events. Per plan: lost and wrong requests, p50 before the kill and after it
(the calls until a re-plan: the killed worker stays dead), and profiled / equal after.

shift: SHIFT.log is the run's stderr at CDCGEMM_LOG=info, each line prefixed with the
UNIX time it was read (bench/scenarios.sh does it). The worker says when its slow
fault took over, the bench when the timed requests began, the profiled plan when it
changed. Prints when the device became slower, how long until the plan's first change
after that (its share taken away) and until the new blocks were in use (staged in the
background), the slowest request from the onset on, and the p50 of the requests from
10 s after it on against the p50 of the plan made for the new mix from the start
(OPTIMUM.csv).
"""
import csv
import json
import statistics
import sys

def rows_of(path):
    with open(path) as f:
        return [r for r in csv.DictReader(f) if r["run"] == "coded"]


def p50(rows):
    return statistics.median(float(r["latency_ms"]) for r in rows) if rows else float("nan")


def bad(rows):
    return sum(r["outcome"] == "lost" for r in rows), sum(r["outcome"] == "wrong" for r in rows)


def kill_request(csv_path):
    with open(csv_path[:-4] + ".json") as f:
        run = json.load(f)
    run = run[0] if isinstance(run, list) else run
    kills = [e["request"] for e in run.get("chaos", []) if e["action"] == "kill"]
    return kills[0] if kills else None


def kill(equal_csv, profiled_csv):
    after_p50 = {}
    for name, path in (("equal", equal_csv), ("profiled", profiled_csv)):
        rows, at = rows_of(path), kill_request(path)
        if at is None:
            print(f"{name}: no kill event in {path[:-4]}.json")
            return 1
        lost, wrong = bad(rows)
        before = [r for r in rows if int(r["request"]) < at]
        after = [r for r in rows if int(r["request"]) > at]
        after_p50[name] = p50(after)
        print(f"{name:8s} kill at request {at}: lost {lost}, wrong {wrong}, "
              f"p50 before {p50(before):.2f} ms, after {after_p50[name]:.2f} ms "
              f"({len(after)} requests)")
    print(f"profiled / equal after the kill: {after_p50['profiled'] / after_p50['equal']:.3f}")
    return 0


def log_times(log_path):
    """From a log whose lines start with a UNIX time: when the timed requests began,
    when the worker's slow fault took over, and the plan's changes after it."""
    begin = onset = None
    changes = []
    with open(log_path) as f:
        for line in f:
            t, _, text = line.partition(" ")
            if "coded: timed requests begin" in text:
                begin = float(t)
            elif "slow fault of task" in text and onset is None:
                onset = float(t)
            elif onset is not None and "profiled plan:" in text:
                changes.append((float(t), text.strip()))
    return begin, onset, changes


def shift(shift_csv, shift_log, optimum_csv):
    rows = rows_of(shift_csv)
    lost, wrong = bad(rows)
    begin, onset, changes = log_times(shift_log)
    if begin is None or onset is None:
        print(f"{shift_log}: no timed-requests mark or no slow fault onset")
        return 1
    onset_ms = (onset - begin) * 1000.0
    before = [r for r in rows if float(r["start_ms"]) < onset_ms]
    settled = [r for r in rows if float(r["start_ms"]) >= onset_ms + 10000.0]
    optimum = p50(rows_of(optimum_csv))
    print(f"lost {lost}, wrong {wrong}; the device became slower {onset_ms / 1000.0:.2f} s "
          f"into the timed requests (request {len(before)}); p50 before {p50(before):.2f} ms")
    if changes:
        t, text = changes[0]
        print(f"first plan change {t - onset:.2f} s after it: {text}")
        # Re-sized blocks of cached weights are staged: in use once the workers hold them.
        in_use = [(t, text) for t, text in changes if "in use" in text]
        if in_use:
            t, text = in_use[0]
            print(f"new blocks in use {t - onset:.2f} s after it: {text}")
        requests = [r for r in rows if float(r["start_ms"]) >= onset_ms]
        if requests:
            worst = max(float(r["latency_ms"]) for r in requests)
            print(f"slowest request from the onset on: {worst:.2f} ms")
    else:
        print("no plan change after it")
    print(f"p50 from 10 s after it: {p50(settled):.2f} ms ({len(settled)} requests); "
          f"new optimum {optimum:.2f} ms; ratio {p50(settled) / optimum:.3f}")
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "kill":
        return kill(argv[2], argv[3])
    if len(argv) == 5 and argv[1] == "shift":
        return shift(argv[2], argv[3], argv[4])
    print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
