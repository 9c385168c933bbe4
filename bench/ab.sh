#!/bin/sh
# ab.sh - interleaved A/B of two builds over scenarios of scenarios.sh.
# usage: bench/ab.sh BUILD_A BUILD_B OUT RUNS SCENARIO...
#   runs each scenario list RUNS times, A then B each round (so slow drift of
#   the machine hits both), into OUT/a1, OUT/b1, OUT/a2, ...; then
#   bench/ab_summary.py OUT prints medians of the runs' p50s, B/A and the
#   run-to-run spread. Request counts follow scenarios.sh's variables
#   (ROTATED_REQUESTS, ...).
set -eu
a=$1 b=$2 out=$3 runs=$4
shift 4
here=$(dirname "$0")
mkdir -p "$out"
i=1
while [ "$i" -le "$runs" ]; do
  for side in a b; do
    if [ $side = a ]; then build=$a; else build=$b; fi
    sh "$here/scenarios.sh" "$build" "$out/$side$i" "$@" > "$out/$side$i.log" 2>&1
    echo "$side$i done $(date +%T)"
  done
  i=$((i + 1))
done
python3 "$here/ab_summary.py" "$out"
