#!/bin/sh
# scenarios.sh - the fault-injection scenarios of docs/benchmarks.md, one JSON each.
# usage: bench/scenarios.sh [BUILD_DIR] [OUT_DIR] [SCENARIO...]
#   scenarios: crash stragglers scaling speedup chaos repair hetero hetero-crash
#   hetero-shift hetero-drift hetero-link rotated rotated-crash rotated-stragglers
#   rotated-hetero limits soak matrix (default: all but soak, which takes about 20
#   minutes, and matrix, bench/matrix.sh;
#   SOAK_REQUESTS=N shortens it). Request counts: *_REQUESTS variables below (the
#   documented figures use their defaults; bench/ab.sh runs may shorten them)
set -eu
# The plan these scenarios were measured under (docs/benchmarks.md, "Plan."):
# the equal one, the default until issue 26; most of them leave the
# coordinator as this host (about 30 GFLOP/s), where the adaptive default
# would compute their calls instead of the devices they emulate. The
# default's own figures, with a Pi-class coordinator: bench/matrix.sh.
# CDCGEMM_PLAN=auto bench/scenarios.sh ... runs them under the default.
caller_plan=${CDCGEMM_PLAN:-}
CDCGEMM_PLAN=${CDCGEMM_PLAN:-equal}
export CDCGEMM_PLAN
build=${1:-build}
out=${2:-bench-results}
shift 2 2>/dev/null || shift $#
bench=$build/cdcgemm-bench
mkdir -p "$out"
# Emulated devices: Raspberry-Pi-3-class compute (0.2 GFLOP/s; the thesis measured an
# FC-2048 layer in 50 ms on one Pi) or Pi-4-class (1 GFLOP/s) where a full model at
# Pi-3 speed would take too long here; WiFi as measured in the thesis.
PI3="slow@*:gflops=0.2"
PI4="slow@*:gflops=1"
WIFI="link@*:mbit=94,lat=0.3"
# Issue 12's mix: two Pi-4-class devices, two at a quarter of that, one at an eighth.
MIX="slow@w0:gflops=1;slow@w1:gflops=1;slow@w2:gflops=0.25;slow@w3:gflops=0.25"
MIX="$MIX;slow@w4:gflops=0.125"
# The coordinator as a Pi-4-class device too (faults.md, target c): this host's own
# 2 cores (about 30 GFLOP/s) would beat the emulated devices on every layer, and the
# profiled plan would keep everything here.
COORD="slow@c:gflops=1"
# Issue 13's devices: emulated compute several times this host's real compute.
EDGE="slow@*:gflops=0.5;$WIFI"
FC_PAIR="--layer fc:4096x9216 --layer fc:4096x4096"
all="crash stragglers scaling speedup chaos repair hetero hetero-crash hetero-shift"
scenarios=${*:-$all hetero-drift hetero-link rotated rotated-crash rotated-stragglers rotated-hetero
  limits}

for s in $scenarios; do
  case $s in
  crash)
    # AlexNet on 4 + 1 emulated devices; worker 1 crashes at request 100 of 200.
    # Respawned (the default) beside the same run uncoded, then without respawn under
    # each re-plan policy: keep-shards (the dead slot an erasure) and keep-parity
    # (n - 1 data shards, r kept). redundancy_summary.py reads the redundancy after.
    crash_requests=${CRASH_REQUESTS:-200}
    "$bench" --model alexnet --workers 5 --parity 1 --requests "$crash_requests" \
      --crash-at $((crash_requests / 2)) --faults "$PI4;$WIFI;seed=1" --baseline uncoded --json "$out/crash.json" \
      --csv "$out/crash.csv" --plot "$out/crash.png"
    for policy in keep-shards keep-parity; do
      CDCGEMM_RESPAWN=0 CDCGEMM_REPLAN=$policy "$bench" --model alexnet --workers 5 \
        --parity 1 --requests "$crash_requests" --crash-at $((crash_requests / 2)) \
        --faults "$PI4;$WIFI;seed=1" \
        --json "$out/crash_$policy.json" --csv "$out/crash_$policy.csv" \
        --plot "$out/crash_$policy.png"
    done
    for run in crash crash_keep-shards crash_keep-parity; do
      python3 "$(dirname "$0")/redundancy_summary.py" "$out/$run.json" "$out/$run.csv"
    done
    ;;
  chaos)
    # A SIGKILL of a seeded random embedded worker every 2 s from outside the
    # library (the supervisor respawns it); coded r = 1 vs uncoded on 5 workers.
    "$bench" --layer fc:1024x1024:16 --requests "${CHAOS_REQUESTS:-2000}" --workers 5 \
      --faults "$PI4;$WIFI;seed=1" --chaos 'kill@random:every=2s;seed=7' \
      --baseline uncoded --json "$out/chaos.json" --csv "$out/chaos.csv" \
      --plot "$out/chaos.png"
    ;;
  repair)
    # Staying redundant (issue 11): AlexNet on 5 embedded workers (r = 1, no spare),
    # worker 1 SIGKILLed 5 s in and worker 2 5 s later; the supervisor respawns each
    # and its slot's weights ship in the background. bench/redundancy_summary.py
    # reads the time to full redundancy, the latency of the requests that ran
    # degraded against those before, and the fallbacks (none wanted).
    "$bench" --model alexnet --workers 5 --parity 1 --requests "${REPAIR_REQUESTS:-600}" \
      --chaos 'kill@w1:at=5s;kill@w2:at=10s' --json "$out/repair.json" \
      --csv "$out/repair.csv" --plot "$out/repair.png"
    python3 "$(dirname "$0")/redundancy_summary.py" "$out/repair.json" "$out/repair.csv"
    # The same on emulated Pi-4-class devices, where the host no longer sets the
    # figure: on ipc (weights at ipc speed) and on the emulated WiFi (weights at
    # 94 Mbit/s, so the second crash waits 15 s for the first repair).
    "$bench" --model alexnet --workers 5 --parity 1 --requests "${REPAIR_DEVICE_REQUESTS:-100}" \
      --faults "$PI4;seed=1" --chaos 'kill@w1:at=5s;kill@w2:at=10s' \
      --json "$out/repair_pi4.json" --csv "$out/repair_pi4.csv" --plot "$out/repair_pi4.png"
    python3 "$(dirname "$0")/redundancy_summary.py" "$out/repair_pi4.json" "$out/repair_pi4.csv"
    "$bench" --model alexnet --workers 5 --parity 1 --requests "${REPAIR_DEVICE_REQUESTS:-100}" \
      --faults "$PI4;$WIFI;seed=1" --chaos 'kill@w1:at=5s;kill@w2:at=20s' \
      --json "$out/repair_wifi.json" --csv "$out/repair_wifi.csv" --plot "$out/repair_wifi.png"
    python3 "$(dirname "$0")/redundancy_summary.py" "$out/repair_wifi.json" "$out/repair_wifi.csv"
    ;;
  hetero)
    # Heterogeneous devices (issue 12): equal blocks against blocks and homes sized
    # by the measured profile, on the mix over WiFi and on identical Pi 4s. The
    # warm-up covers the profile's first measurements and the one-time shipping of
    # the re-sized blocks.
    for plan in equal profiled; do
      "$bench" --layer fc:4096x9216 --workers 5 --parity 1 --requests "${HETERO_REQUESTS:-200}" \
        --warmup 40 --faults "$COORD;$MIX;$WIFI;seed=1" --plan "$plan" \
        --json "$out/hetero_fc_$plan.json" --csv "$out/hetero_fc_$plan.csv"
      "$bench" --layer fc:4096x9216 --workers 5 --parity 1 --requests "${HETERO_REQUESTS:-200}" \
        --warmup 40 --faults "$COORD;$PI4;$WIFI;seed=1" --plan "$plan" \
        --json "$out/homogeneous_fc_$plan.json" --csv "$out/homogeneous_fc_$plan.csv"
      # AlexNet end to end: its conv inputs cross the emulated WiFi.
      "$bench" --model alexnet --workers 5 --parity 1 --requests "${HETERO_MODEL_REQUESTS:-100}" \
        --warmup 30 --faults "$COORD;$MIX;$WIFI;seed=1" --plan "$plan" \
        --json "$out/hetero_alexnet_$plan.json" --csv "$out/hetero_alexnet_$plan.csv"
    done
    # The same with this host as the coordinator: the planner keeps the layers here.
    "$bench" --model alexnet --workers 5 --parity 1 --requests "${HETERO_MODEL_REQUESTS:-100}" \
      --warmup 30 --faults "$MIX;$WIFI;seed=1" --plan profiled \
      --json "$out/hetero_alexnet_host.json" --csv "$out/hetero_alexnet_host.csv"
    # Each layer's plan and the model's prediction against the measured time
    # (PLAN_MODELS="" leaves them out: an A/B of latencies does not need them).
    for model in ${PLAN_MODELS-alexnet vgg16}; do
      for plan in equal profiled; do
        CDCGEMM_TIMEOUT_MS=60000 "$bench" plan --model "$model" --workers 5 --parity 1 \
          --requests "${PLAN_REQUESTS:-5}" --warmup "${PLAN_WARMUP:-8}" \
          --faults "$COORD;$MIX;$WIFI;seed=1" --plan "$plan" \
          --json "$out/plan_${model}_$plan.json"
      done
    done
    ;;
  hetero-crash)
    # One worker SIGKILLed 5 s into the timed requests and left dead (no respawn, so
    # the rest of the run is the calls "until the re-plan"): a fast device (w0), a
    # quarter-speed one (w2) and the slowest (w4), under each plan.
    for w in 0 2 4; do
      for plan in equal profiled; do
        CDCGEMM_RESPAWN=0 "$bench" --layer fc:4096x9216 --workers 5 --parity 1 \
          --requests "${HETERO_REQUESTS:-200}" --warmup 40 --faults "$COORD;$MIX;$WIFI;seed=1" \
          --plan "$plan" --chaos "kill@w$w:at=5s" \
          --json "$out/hetero_kill_w${w}_$plan.json" --csv "$out/hetero_kill_w${w}_$plan.csv"
      done
      python3 "$(dirname "$0")/hetero_summary.py" kill "$out/hetero_kill_w${w}_equal.csv" \
        "$out/hetero_kill_w${w}_profiled.csv"
    done
    ;;
  hetero-shift)
    # A fast device becomes 4x slower mid-run (at its call 200, about request 160 of
    # the timed ones), against the plan for the new mix from the start (the new optimum).
    shifted="slow@w0:gflops=0.25;slow@w1:gflops=1;slow@w2:gflops=0.25;slow@w3:gflops=0.25"
    shifted="$shifted;slow@w4:gflops=0.125"
    "$bench" --layer fc:4096x9216 --workers 5 --parity 1 --requests 300 --warmup 40 \
      --faults "$COORD;$shifted;$WIFI;seed=1" --plan profiled \
      --json "$out/hetero_shift_optimum.json" --csv "$out/hetero_shift_optimum.csv"
    # Its log, each line timestamped here, tells when the device changed (the worker
    # says so) and when the plan changed.
    CDCGEMM_LOG=info "$bench" --layer fc:4096x9216 --workers 5 --parity 1 --requests 500 \
      --warmup 40 --faults "$COORD;$MIX;slow@w0:gflops=0.25,after=200;$WIFI;seed=1" \
      --plan profiled --json "$out/hetero_shift.json" --csv "$out/hetero_shift.csv" 2>&1 |
      python3 -u -c 'import sys, time
for line in sys.stdin: sys.stdout.write("%.3f %s" % (time.time(), line))' \
      > "$out/hetero_shift.log"
    grep '^[0-9.]* coded ' "$out/hetero_shift.log" || true
    python3 "$(dirname "$0")/hetero_summary.py" shift "$out/hetero_shift.csv" \
      "$out/hetero_shift.log" "$out/hetero_shift_optimum.csv"
    ;;
  hetero-link)
    # Fewer workers: five Pi-4-class devices, one (w3) behind a 20 Mbit/s link, a
    # conv layer cut by channel (each worker is sent the whole 256 KB input: 105 ms
    # to w3). The equal plan, calls not waiting for data shards (the default: w3's
    # shard is decoded from parity every call), then the profiled plan with calls
    # that wait for every data shard (CDCGEMM_WAIT_MS, so w3 is measured): w3 gets
    # an empty block and is sent nothing.
    link="slow@c:gflops=0.05;slow@*:gflops=1;$WIFI;link@w3:mbit=20,lat=0.3;seed=1"
    "$bench" plan --layer conv:64x32x32:128:3:1:1 --split channel --workers 5 \
      --parity 1 --requests 60 --warmup 40 --plan equal --faults "$link" \
      --json "$out/hetero_link_equal.json"
    CDCGEMM_WAIT_MS=1000 "$bench" plan --layer conv:64x32x32:128:3:1:1 --split channel \
      --workers 5 --parity 1 --requests 60 --warmup 40 --plan profiled --faults "$link" \
      --json "$out/hetero_link_profiled.json"
    ;;
  hetero-drift)
    # The same device becomes 1.67x slower instead: the re-size gains about 20%, and
    # its new blocks are staged in the background (docs/workers.md, "Re-sized blocks,
    # staged") rather than sent on a call's path.
    shifted="slow@w0:gflops=0.6;slow@w1:gflops=1;slow@w2:gflops=0.25;slow@w3:gflops=0.25"
    shifted="$shifted;slow@w4:gflops=0.125"
    "$bench" --layer fc:4096x9216 --workers 5 --parity 1 --requests 300 --warmup 40 \
      --faults "$COORD;$shifted;$WIFI;seed=1" --plan profiled \
      --json "$out/hetero_drift_optimum.json" --csv "$out/hetero_drift_optimum.csv"
    CDCGEMM_LOG=info "$bench" --layer fc:4096x9216 --workers 5 --parity 1 --requests 700 \
      --warmup 40 --faults "$COORD;$MIX;slow@w0:gflops=0.6,after=200;$WIFI;seed=1" \
      --plan profiled --json "$out/hetero_drift.json" --csv "$out/hetero_drift.csv" 2>&1 |
      python3 -u -c 'import sys, time
for line in sys.stdin: sys.stdout.write("%.3f %s" % (time.time(), line))' \
      > "$out/hetero_drift.log"
    grep '^[0-9.]* coded ' "$out/hetero_drift.log" || true
    python3 "$(dirname "$0")/hetero_summary.py" shift "$out/hetero_drift.csv" \
      "$out/hetero_drift.log" "$out/hetero_drift_optimum.csv"
    ;;
  limits)
    # The widest configurations through a crash (docs/benchmarks.md, "At the
    # limits"): r, W of each row.
    for rw in "0 64" "2 64" "3 64" "2 33" "3 17"; do
      set -- $rw
      "$bench" --layer fc:8192x2048 --layer fc:4096x4096 --workers "$2" --parity "$1" \
        --requests 40 --warmup 3 --faults 'slow@*:gflops=2' --crash-at 20 \
        --json "$out/limits_r$1_w$2.json"
    done
    ;;
  soak)
    # Issue 11's soak: AlexNet on 6 embedded workers, a SIGKILL every ~2 s and a 1 s
    # SIGSTOP every ~10 s, r = 1 plus a hot spare (CDCGEMM_DATA_SHARDS=4), then r = 2.
    chaos='kill@random:every=2s~500ms;stop@random:every=10s~2s,for=1s;seed=11'
    CDCGEMM_DATA_SHARDS=4 "$bench" --model alexnet --workers 6 --parity 1 \
      --requests "${SOAK_REQUESTS:-10000}" --chaos "$chaos" --json "$out/soak_spare.json" \
      --csv "$out/soak_spare.csv" --plot "$out/soak_spare.png"
    "$bench" --model alexnet --workers 6 --parity 2 --requests "${SOAK_REQUESTS:-10000}" \
      --chaos "$chaos" --json "$out/soak_r2.json" --csv "$out/soak_r2.csv" \
      --plot "$out/soak_r2.png"
    for run in soak_spare soak_r2; do
      python3 "$(dirname "$0")/redundancy_summary.py" "$out/$run.json" "$out/$run.csv"
    done
    ;;
  rotated)
    # Rotated parity (issue 13), nothing failing: the rotated layout, the dedicated
    # one (r = 1 each) and uncoded, all on the same 5 devices. bench/rotated_summary.py
    # prints the table.
    for model in fc alexnet; do
      if [ $model = fc ]; then what=$FC_PAIR requests=${ROTATED_REQUESTS:-200}
      else what="--model alexnet" requests=${ROTATED_MODEL_REQUESTS:-60}; fi
      for layout in rotated dedicated; do
        # shellcheck disable=SC2086
        "$bench" $what --workers 5 --parity 1 --layout $layout --requests "$requests" \
          --warmup 5 --faults "$EDGE;seed=1" --json "$out/rotated_${model}_$layout.json"
      done
      # shellcheck disable=SC2086
      "$bench" $what --workers 5 --parity 0 --requests "$requests" --warmup 5 \
        --faults "$EDGE;seed=1" --json "$out/rotated_${model}_uncoded.json"
    done
    ;;
  rotated-crash)
    # Worker 1 SIGKILLed half-way and left dead (no respawn; keep-shards: its slot
    # an erasure every call after), rotated vs dedicated.
    for model in fc alexnet; do
      if [ $model = fc ]; then what=$FC_PAIR requests=${ROTATED_REQUESTS:-200}
      else what="--model alexnet" requests=${ROTATED_MODEL_REQUESTS:-60}; fi
      for layout in rotated dedicated; do
        # shellcheck disable=SC2086
        CDCGEMM_RESPAWN=0 "$bench" $what --workers 5 --parity 1 --layout $layout \
          --requests "$requests" --warmup 5 --crash-at $((requests / 2)) \
          --faults "$EDGE;seed=1" --json "$out/rotated_crash_${model}_$layout.json"
      done
    done
    ;;
  rotated-stragglers)
    # n = 4 data blocks' worth of work on 5 devices, every reply delayed by an
    # exponential draw whose mean is a dedicated data shard's emulated compute
    # (1024 x 9216 at 0.5 GFLOP/s: 37.749 ms), as in the stragglers scenario.
    faults="$EDGE;delay@*:dist=exp,mean=37.749;seed=7"
    for layout in rotated dedicated; do
      "$bench" --layer fc:4096x9216 --workers 5 --parity 1 --layout $layout \
        --requests "${ROTATED_STRAGGLER_REQUESTS:-600}" --faults "$faults" \
        --json "$out/rotated_stragglers_$layout.json"
    done
    "$bench" --layer fc:4096x9216 --workers 5 --parity 0 \
      --requests "${ROTATED_STRAGGLER_REQUESTS:-600}" --faults "$faults" \
      --json "$out/rotated_stragglers_uncoded.json"
    ;;
  rotated-hetero)
    # Issue 12's mix under equal blocks: the rotated layout gives every device the
    # same rows, so the slowest gates it; the profiled plan (dedicated) sizes them.
    for layout in rotated dedicated; do
      "$bench" --layer fc:4096x9216 --workers 5 --parity 1 --layout $layout \
        --requests "${HETERO_REQUESTS:-200}" --warmup 40 --faults "$COORD;$MIX;$WIFI;seed=1" \
        --json "$out/rotated_hetero_$layout.json"
    done
    "$bench" --layer fc:4096x9216 --workers 5 --parity 1 --plan profiled \
      --requests "${HETERO_REQUESTS:-200}" --warmup 40 --faults "$COORD;$MIX;$WIFI;seed=1" \
      --json "$out/rotated_hetero_profiled.json"
    ;;
  stragglers)
    # Every worker delays its reply by an exponential draw whose mean equals the
    # shard's emulated compute time; coded n = 4 + r vs uncoded n = 4.
    for spec in "fc:2048x2048 $PI3 10.486" "fc:4096x9216 $PI4 18.874"; do
      set -- $spec
      layer=$1 dev=$2 mean=$3
      name=$(echo "$layer" | tr ':x' '__')
      faults="$dev;delay@*:dist=exp,mean=$mean;seed=7"
      "$bench" --layer "$layer" --workers 4 --parity 0 --requests "${STRAGGLER_REQUESTS:-600}" \
        --faults "$faults" --json "$out/stragglers_${name}_r0.json"
      "$bench" --layer "$layer" --workers 5 --parity 1 --requests "${STRAGGLER_REQUESTS:-600}" \
        --faults "$faults" --json "$out/stragglers_${name}_r1.json"
      "$bench" --layer "$layer" --workers 6 --parity 2 --requests "${STRAGGLER_REQUESTS:-600}" \
        --faults "$faults" --json "$out/stragglers_${name}_r2.json"
      # Cost vs replication: the same 4 data shards, each on two of 8 workers.
      CDCGEMM_REPLICATE=1 "$bench" --layer "$layer" --workers 8 --parity 0 \
        --requests "${STRAGGLER_REQUESTS:-600}" \
        --faults "$faults" --json "$out/stragglers_${name}_2mr.json"
    done
    ;;
  scaling)
    # Straggler mitigation vs n (r = 1), FC 2048x2048 split n ways on Pi-3-class devices.
    for n in 2 4 8 12; do
      mean=$(awk "BEGIN { printf \"%.3f\", 2 * 2048 * 2048 / $n / 0.2e6 }")
      faults="$PI3;delay@*:dist=exp,mean=$mean;seed=11"
      "$bench" --layer fc:2048x2048 --workers "$n" --parity 0 --requests 300 \
        --faults "$faults" --json "$out/scaling_n${n}_r0.json"
      "$bench" --layer fc:2048x2048 --workers $((n + 1)) --parity 1 --requests 300 \
        --faults "$faults" --json "$out/scaling_n${n}_r1.json"
    done
    ;;
  speedup)
    # AlexNet's conv layers, fault-free, on 4 emulated devices vs 1.
    convs="--layer conv:3x224x224:64:11:4:2 --layer conv:64x27x27:192:5:1:2 \
      --layer conv:192x13x13:384:3:1:1 --layer conv:384x13x13:256:3:1:1 \
      --layer conv:256x13x13:256:3:1:1"
    # shellcheck disable=SC2086
    "$bench" $convs --workers 1 --parity 0 --requests 30 --faults "$PI4;$WIFI" \
      --json "$out/speedup_1.json"
    # shellcheck disable=SC2086
    "$bench" $convs --workers 4 --parity 0 --requests 30 --faults "$PI4;$WIFI" \
      --json "$out/speedup_4.json"
    ;;
  matrix)
    # Issue 26's scenario matrix: the default beside every explicit
    # configuration and uncoded, interleaved (bench/matrix.sh; MATRIX_RUNS,
    # MATRIX_WIDE). Its table: bench/matrix_summary.py "$out/matrix".
    # Its "default" configuration is the library's (or the caller's plan).
    if [ -n "$caller_plan" ]; then
      CDCGEMM_PLAN=$caller_plan sh "$(dirname "$0")/matrix.sh" "$build" "$out/matrix"
    else
      env -u CDCGEMM_PLAN sh "$(dirname "$0")/matrix.sh" "$build" "$out/matrix"
    fi
    ;;
  *) echo "unknown scenario '$s'" >&2; exit 2 ;;
  esac
done
