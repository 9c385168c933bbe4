#!/bin/sh
# matrix.sh - the scenario matrix of issue 26: on each scenario (a row), the
# default configuration beside every explicit one and uncoded, interleaved.
# usage: bench/matrix.sh [BUILD_DIR] [OUT_DIR] [ROW...]
#   (bench/scenarios.sh matrix runs it). Rows: fc-identical alexnet-identical
#   fc-mix alexnet-mix fc-mix2 fc-mix-kill stragglers slow-link shift, and
#   with MATRIX_WIDE=1 (a machine with 16 cores: on 2 the host, not the
#   emulated devices, sets the figure) vgg16conv-identical alexnet-16
#   vgg16conv-16. MATRIX_RUNS rounds (default 3): in each, every row's
#   configurations one after another, so slow drift of the machine hits all.
#   Configurations: default (no --plan, --layout, --split), each --plan
#   equal|profiled x --layout rotated|dedicated, for conv rows also x
#   --split channel|spatial, and uncoded (--parity 0, the same devices).
#   Each run one JSON: OUT/runI/ROW/CONFIG.json; bench/matrix_summary.py OUT
#   prints the table. MATRIX_REQUESTS and MATRIX_WARMUP replace every row's
#   counts (a quick look at the machinery, not a figure); MATRIX_CONFIGS
#   (labels, e.g. "default equal-rotated uncoded") keeps only those.
set -eu
build=${1:-build}
out=${2:-matrix-results}
shift 2 2>/dev/null || shift $#
bench=$build/cdcgemm-bench
runs=${MATRIX_RUNS:-3}
# Emulated devices as in scenarios.sh: Pi-4-class (1 GFLOP/s) or slower over
# WiFi, a Pi-class coordinator (its own compute, where a plan gives it any).
WIFI="link@*:mbit=94,lat=0.3"
COORD="slow@c:gflops=1"
EDGE="slow@*:gflops=0.5;$WIFI"
# The heterogeneous work's mix (8x between the fastest and the slowest), the
# same four times faster for AlexNet (which would take seconds a request on
# the first), and another mix with a 4x spread.
MIX="slow@w0:gflops=1;slow@w1:gflops=1;slow@w2:gflops=0.25;slow@w3:gflops=0.25"
MIX="$MIX;slow@w4:gflops=0.125"
MIX_FAST="slow@w0:gflops=4;slow@w1:gflops=4;slow@w2:gflops=1;slow@w3:gflops=1"
MIX_FAST="$MIX_FAST;slow@w4:gflops=0.5"
MIX2="slow@w0:gflops=2;slow@w1:gflops=1;slow@w2:gflops=1;slow@w3:gflops=0.5"
MIX2="$MIX2;slow@w4:gflops=0.5"
FC_PAIR="--layer fc:4096x9216 --layer fc:4096x4096"
VGG_CONVS="--layer conv:3x224x224:64:3:1:1 --layer conv:64x224x224:64:3:1:1"
VGG_CONVS="$VGG_CONVS --layer conv:64x112x112:128:3:1:1 --layer conv:128x112x112:128:3:1:1"
VGG_CONVS="$VGG_CONVS --layer conv:128x56x56:256:3:1:1 --layer conv:256x56x56:256:3:1:1"
VGG_CONVS="$VGG_CONVS --layer conv:256x56x56:256:3:1:1 --layer conv:256x28x28:512:3:1:1"
VGG_CONVS="$VGG_CONVS --layer conv:512x28x28:512:3:1:1 --layer conv:512x28x28:512:3:1:1"
VGG_CONVS="$VGG_CONVS --layer conv:512x14x14:512:3:1:1 --layer conv:512x14x14:512:3:1:1"
VGG_CONVS="$VGG_CONVS --layer conv:512x14x14:512:3:1:1"

# row NAME: sets what, workers, faults, requests, warmup, chaos and conv
# (1: the row has conv layers, so the split is a choice) for it.
row() {
  workers=5 chaos="" conv=0 warmup=20
  case $1 in
  fc-identical) what=$FC_PAIR faults="$COORD;$EDGE;seed=1" requests=100 ;;
  alexnet-identical)
    what="--model alexnet" faults="$COORD;slow@*:gflops=2;$WIFI;seed=1" requests=30 conv=1 ;;
  fc-mix) what=$FC_PAIR faults="$COORD;$MIX;$WIFI;seed=1" requests=100 warmup=40 ;;
  alexnet-mix)
    what="--model alexnet" faults="$COORD;$MIX_FAST;$WIFI;seed=1" requests=30 warmup=30 conv=1 ;;
  fc-mix2) what=$FC_PAIR faults="$COORD;$MIX2;$WIFI;seed=1" requests=100 warmup=40 ;;
  fc-mix-kill) # w0 (a fast device) SIGKILLed 5 s into the timed requests
    what=$FC_PAIR faults="$COORD;$MIX;$WIFI;seed=1" requests=150 warmup=40
    chaos="kill@w0:at=5s" ;;
  stragglers) # exponential delays, mean the shard's emulated compute (scenarios.sh)
    what="--layer fc:4096x9216" requests=300
    faults="$COORD;slow@*:gflops=1;delay@*:dist=exp,mean=18.874;seed=7" ;;
  slow-link) # one device behind 20 Mbit/s (hetero-link)
    what="--layer conv:64x32x32:128:3:1:1" requests=60 warmup=40 conv=1
    faults="slow@c:gflops=0.05;slow@*:gflops=1;$WIFI;link@w3:mbit=20,lat=0.3;seed=1" ;;
  shift) # w0 4x slower from its call 200 on (hetero-shift)
    what="--layer fc:4096x9216" requests=300 warmup=40
    faults="$COORD;$MIX;slow@w0:gflops=0.25,after=200;$WIFI;seed=1" ;;
  vgg16conv-identical)
    what=$VGG_CONVS faults="$COORD;slow@*:gflops=2;$WIFI;seed=1" requests=10 warmup=6 conv=1 ;;
  alexnet-16)
    what="--model alexnet" faults="slow@*:gflops=4;$WIFI;seed=1" requests=30 workers=16 conv=1 ;;
  vgg16conv-16)
    what=$VGG_CONVS faults="slow@*:gflops=4;$WIFI;seed=1" requests=10 warmup=6 workers=16
    conv=1 ;;
  *) echo "matrix.sh: unknown row '$1'" >&2; exit 2 ;;
  esac
}

# configs CONV: the configurations of a row (name=flags, "_" for a space).
configs() {
  echo "default="
  for plan in equal profiled; do
    for layout in rotated dedicated; do
      echo "$plan-$layout=--plan_${plan}_--layout_${layout}"
      if [ "$1" = 1 ]; then
        for split in channel spatial; do
          echo "$plan-$layout-$split=--plan_${plan}_--layout_${layout}_--split_${split}"
        done
      fi
    done
  done
  echo "uncoded=--parity_0"
}

rows=${*:-fc-identical alexnet-identical fc-mix alexnet-mix fc-mix2 fc-mix-kill stragglers slow-link shift}
if [ "${MATRIX_WIDE:-0}" = 1 ] && [ $# = 0 ]; then
  rows="$rows vgg16conv-identical alexnet-16 vgg16conv-16"
fi
i=1
while [ "$i" -le "$runs" ]; do
  for name in $rows; do
    row "$name"
    mkdir -p "$out/run$i/$name"
    requests=${MATRIX_REQUESTS:-$requests} warmup=${MATRIX_WARMUP:-$warmup} # a quick look
    for config in $(configs "$conv"); do
      label=${config%%=*}
      case " ${MATRIX_CONFIGS:-$label} " in *" $label "*) ;; *) continue ;; esac
      flags=$(echo "${config#*=}" | tr '_' ' ')
      chaos_flag=""
      [ -n "$chaos" ] && chaos_flag="--chaos $chaos"
      # shellcheck disable=SC2086
      CDCGEMM_TIMEOUT_MS=60000 "$bench" $what --workers "$workers" --requests "$requests" \
        --warmup "$warmup" --faults "$faults" $chaos_flag $flags \
        --json "$out/run$i/$name/$label.json" > "$out/run$i/$name/$label.log" 2>&1 ||
        echo "matrix.sh: run $i $name $label failed (its log: $out/run$i/$name/$label.log)" >&2
    done
    echo "run $i $name done $(date +%T)"
  done
  i=$((i + 1))
done
python3 "$(dirname "$0")/matrix_summary.py" "$out"
