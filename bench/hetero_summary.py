#!/usr/bin/env python3
"""hetero_summary.py - what the heterogeneous-device runs of bench/scenarios.sh say
(issue 12): a worker killed mid-run under each plan, and a device that becomes slower.

usage: bench/hetero_summary.py kill EQUAL.csv PROFILED.csv
       bench/hetero_summary.py shift SHIFT.csv OPTIMUM.csv ONSET_REQUEST

kill: each CSV beside its JSON (same stem); the kill's request comes from the JSON's
chaos events. Per plan: lost and wrong requests, p50 before the kill and after it
(the calls until a re-plan: the killed worker stays dead), and profiled / equal after.

shift: the device's slow rule takes over at about ONSET_REQUEST (its after= count of
calls less the warm-up; a call or two of slack). Its calls then straggle and are
decoded from parity until the profiled plan takes its share away. Prints when the
decodes began (the onset seen) and when they stopped being the rule (no more than a
quarter of the next 20 requests decoded): the time the device kept its share; and
the p50 of the requests from 10 s after the onset on against the p50 of the plan made
for the new mix from the start (OPTIMUM.csv).
"""
import csv
import json
import statistics
import sys

WINDOW = 20


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


def decoded_share(rows, i):
    window = rows[i:i + WINDOW]
    return sum(int(r["decoded"]) > 0 for r in window) / max(len(window), 1)


def shift(shift_csv, optimum_csv, onset_request):
    rows = rows_of(shift_csv)
    lost, wrong = bad(rows)
    start = max(onset_request - WINDOW, 0)
    seen = next((i for i in range(start, len(rows)) if decoded_share(rows, i) > 0.5), None)
    if seen is None:
        print("no run of decoded calls after the onset: the slower device never straggled")
        return 1
    end = next((i for i in range(seen, len(rows)) if decoded_share(rows, i) <= 0.25), None)
    t0 = float(rows[seen]["start_ms"])
    settled = [r for r in rows if float(r["start_ms"]) >= t0 + 10000.0]
    optimum = p50(rows_of(optimum_csv))
    print(f"lost {lost}, wrong {wrong}; p50 before the onset "
          f"{p50(rows[:seen]):.2f} ms")
    if end is None:
        print(f"onset seen at request {seen}; its calls were still decoded at the end")
    else:
        print(f"onset seen at request {seen}; share lost by request {end}: "
              f"{(float(rows[end]['start_ms']) - t0) / 1000.0:.2f} s")
    print(f"p50 from 10 s after the onset: {p50(settled):.2f} ms ({len(settled)} requests); "
          f"new optimum {optimum:.2f} ms; ratio {p50(settled) / optimum:.3f}")
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "kill":
        return kill(argv[2], argv[3])
    if len(argv) == 5 and argv[1] == "shift":
        return shift(argv[2], argv[3], int(argv[4]))
    print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
