#!/bin/sh
# CURVE on/off: 5 workers on tcp loopback, fc:4096x9216, r = 1 (docs/performance.md#curve).
# Run from the source tree after building into build/ (B=DIR to change).
set -e
B=${B:-build}
D=/tmp/curvebench; rm -rf $D; mkdir -p $D/allow
$B/cdcgemm-keygen $D/coord >/dev/null; cp $D/coord $D/allow/
$B/cdcgemm-keygen $D/worker >/dev/null
REQ=${REQ:-200}
run() { # mode
  pids=""; eps=""
  for i in 0 1 2 3 4; do
    port=$((47100 + i))
    if [ "$1" = curve ]; then
      $B/cdcgemm-worker --bind tcp://127.0.0.1:$port --threads 1 --log warn \
        --curve-secret $D/worker_secret --curve-allow $D/allow & 
    else
      $B/cdcgemm-worker --bind tcp://127.0.0.1:$port --threads 1 --log warn &
    fi
    pids="$pids $!"; eps="$eps${eps:+,}tcp://127.0.0.1:$port"
  done
  sleep 0.5
  if [ "$1" = curve ]; then
    CDCGEMM_CURVE_SECRET=$D/coord_secret CDCGEMM_CURVE_SERVER=$D/worker \
    CDCGEMM_WORKERS=$eps $B/cdcgemm-bench --layer fc:4096x9216 --workers 5 --parity 1 \
      --requests $REQ --warmup 10 --json $D/$1.json > $D/$1.txt 2>&1
  else
    CDCGEMM_WORKERS=$eps $B/cdcgemm-bench --layer fc:4096x9216 --workers 5 --parity 1 \
      --requests $REQ --warmup 10 --json $D/$1.json > $D/$1.txt 2>&1
  fi
  kill $pids; wait $pids 2>/dev/null || true
}
for round in 1 2; do run plain; cp $D/plain.json $D/plain$round.json; run curve; cp $D/curve.json $D/curve$round.json; done
for f in $D/plain1 $D/curve1 $D/plain2 $D/curve2; do echo "$f: $(python3 -c "import json;d=json.load(open('$f.json'));print({k:d[k] for k in ('ok','wrong','lost','fallbacks')}, d['latency_ms'])")"; done
