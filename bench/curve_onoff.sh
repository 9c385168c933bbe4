#!/bin/sh
# CURVE on vs off: 5 workers on tcp loopback, r = 1, p50/p99 side by side
# (docs/performance.md#curve). Two device settings: raw loopback (the
# encryption cost per byte is the figure) and emulated Pi-4-class devices on
# WiFi (slow@*:gflops=1;link@*:mbit=94,lat=0.3: the cost a user would see).
# Two workloads: fc:4096x9216 and AlexNet end to end. Plain and CURVE runs
# alternate, ROUNDS times, so drift on a shared machine hits both alike.
#   sh bench/curve_onoff.sh                # everything
#   DEVICES=raw WORKLOADS=fc sh bench/curve_onoff.sh
# Run from the source tree after building into build/ (B=DIR to change).
set -e
B=${B:-build}
ROUNDS=${ROUNDS:-2}
DEVICES=${DEVICES:-"raw pi4"}
WORKLOADS=${WORKLOADS:-"fc alexnet"}
PI4='slow@*:gflops=1;link@*:mbit=94,lat=0.3'
D=$(mktemp -d /tmp/cdc-curvebench-XXXXXX)
pids=""
# KEEP=1 keeps the runs' JSON (and prints where).
trap 'kill $pids 2>/dev/null || true; if [ -n "${KEEP:-}" ]; then echo "kept $D"; else rm -rf "$D"; fi' EXIT INT TERM
mkdir -p "$D/allow"
"$B/cdcgemm-keygen" "$D/coord" >/dev/null; cp "$D/coord" "$D/allow/"
"$B/cdcgemm-keygen" "$D/worker" >/dev/null

requests() { # workload device
  case "$1:$2" in
    fc:raw) echo 300 ;; fc:pi4) echo 100 ;; alexnet:raw) echo 40 ;; *) echo 20 ;;
  esac
}

run() { # mode workload device out.json
  pids=""; eps=""
  for i in 0 1 2 3 4; do
    port=$((47100 + i))
    faults=""
    [ "$3" = pi4 ] && faults="--faults $PI4 --index $i"
    if [ "$1" = curve ]; then
      "$B/cdcgemm-worker" --bind tcp://127.0.0.1:$port --threads 1 --log warn $faults \
        --curve-secret "$D/worker_secret" --curve-allow "$D/allow" &
    else
      "$B/cdcgemm-worker" --bind tcp://127.0.0.1:$port --threads 1 --log warn $faults &
    fi
    pids="$pids $!"; eps="$eps${eps:+,}tcp://127.0.0.1:$port"
  done
  sleep 0.5
  what="--layer fc:4096x9216"; [ "$2" = alexnet ] && what="--model alexnet"
  secret=""; server=""
  if [ "$1" = curve ]; then secret="$D/coord_secret"; server="$D/worker"; fi
  CDCGEMM_CURVE_SECRET=$secret CDCGEMM_CURVE_SERVER=$server CDCGEMM_WORKERS=$eps \
    "$B/cdcgemm-bench" $what --workers 5 --parity 1 --requests "$(requests "$2" "$3")" \
    --warmup 5 --json "$4" > "$4.txt" 2>&1
  kill $pids; wait $pids 2>/dev/null || true; pids=""
}

summary() { # json...
  python3 - "$@" <<'EOF'
import json, statistics, sys
rows = [json.load(open(f)) for f in sys.argv[1:]]
bad = sum(r["wrong"] + r["lost"] for r in rows)
p50 = statistics.median(r["latency_ms"]["p50"] for r in rows)
p99 = statistics.median(r["latency_ms"]["p99"] for r in rows)
c = rows[0]["counters"]  # payload bytes a layer call moved (warm-up included), weights aside
mb = (c["bytes_out"] - c["weight_bytes"] + c["bytes_in"]) / c["calls"] / 1e6
print(f"{p50:9.2f} {p99:9.2f} {bad:5d} {mb:9.3f}", end="")
EOF
}

printf '%-8s %-8s %-6s %9s %9s %5s %9s\n' device workload mode p50_ms p99_ms bad MB/call
for device in $DEVICES; do
  for workload in $WORKLOADS; do
    for round in $(seq "$ROUNDS"); do
      for mode in plain curve; do
        run $mode $workload $device "$D/$device-$workload-$mode-$round.json"
      done
    done
    for mode in plain curve; do
      printf '%-8s %-8s %-6s ' $device $workload $mode
      summary "$D/$device-$workload-$mode"-*.json; echo
    done
  done
done
