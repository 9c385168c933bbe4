#!/usr/bin/env bash
# service_check.sh - the installed cdcgemm-worker@.service serves a CURVE coordinator.
#
# usage: service_check.sh BUILD_DIR [CMAKE]
#
# CI has no running systemd, so this does what the unit would (docs/deploy.md,
# "Run the worker as a service"), with only the files that page says to create:
#   1. cmake --install BUILD_DIR into a temporary prefix; the unit's MemoryMax=
#      is the example environment file's --max-memory + 512M;
#   2. keys and /etc/cdcgemm laid out under a temporary directory: the
#      coordinator's key pair; for instance "t1" worker-t1 + worker-t1_secret
#      (cdcgemm-keygen --endpoint), coordinators/ with the coordinator's public
#      certificate, worker-t1.env from the installed worker.env.example;
#   3. the installed unit's ExecStart= run by unit_exec.sh (EnvironmentFile=,
#      LoadCredential= into a credentials directory, CREDENTIALS_DIRECTORY);
#   4. a short cdcgemm-bench run against it over tcp + CURVE: 0 lost, 0 wrong,
#      0 fallbacks, every shard sent to it;
#   5. SIGTERM (systemctl stop) ends it with status 0 within TimeoutStopSec;
#   6. systemd-analyze verify on the installed unit, where that tool exists:
#      no complaint at all.
# Exit 0: passed; 1: failed; 77: bash < 5 (no $EPOCHREALTIME) or no cmake.
set -u
build=${1:?usage: service_check.sh BUILD_DIR [CMAKE]}
cmake=${2:-cmake}
here=$(cd "$(dirname "$0")" && pwd)
command -v "$cmake" >/dev/null 2>&1 || { echo "SKIP: no $cmake"; exit 77; }
[ -n "${EPOCHREALTIME:-}" ] || { echo "SKIP: bash without EPOCHREALTIME (bash >= 5)"; exit 77; }
for var in $(env | sed -n 's/^\(CDCGEMM_[A-Z_]*\)=.*/\1/p'); do unset "$var"; done
# The equal plan: the checks below count calls served by the workers, and the
# adaptive default computes these small calls here, on this host faster.
export CDCGEMM_PLAN=equal

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cdcgemm-service.XXXXXX") || exit 1
worker_pid=""
cleanup() {
  [ -n "$worker_pid" ] && kill -9 "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null
  chmod -R u+w "$tmp" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# 1. Install.
prefix=$tmp/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; echo "FAIL: cmake --install"; exit 1; }
unit=$prefix/lib/systemd/system/cdcgemm-worker@.service
example=$prefix/share/doc/cdcgemm/worker.env.example
for f in "$unit" "$example" "$prefix/share/doc/cdcgemm/deploy.md"; do
  [ -f "$f" ] || { echo "FAIL: not installed: ${f#"$prefix"/}"; exit 1; }
done
grep -q "^ExecStart=$prefix/bin/cdcgemm-worker " "$unit" ||
  fail "the installed unit does not run $prefix/bin/cdcgemm-worker"
pass "installed the unit, worker.env.example and deploy.md"
# MemoryMax = the example's --max-memory + 512M (the unit's comment says why).
to_mib() { # 1G, 1536M, 1048576K -> MiB
  case $1 in *G) echo $((${1%G} * 1024)) ;; *M) echo "${1%M}" ;; *K) echo $((${1%K} / 1024)) ;;
    *) echo $(($1 / 1048576)) ;; esac
}
cache=$(sed -n 's/^CDC_WORKER_FLAGS=.*--max-memory \([0-9]*[KMG]\?\).*/\1/p' "$example")
limit=$(sed -n 's/^MemoryMax=\([0-9]*[KMG]\?\)$/\1/p' "$unit")
if [ -n "$cache" ] && [ -n "$limit" ] &&
  [ "$(to_mib "$limit")" = $(($(to_mib "$cache") + 512)) ]; then
  pass "MemoryMax=$limit is the example's --max-memory $cache + 512M"
else
  fail "MemoryMax=$limit and the example's --max-memory $cache are not cache + 512M"
fi

# 2. Keys and /etc/cdcgemm (docs/deploy.md, "Keys" and "Run the worker as a service").
port=$((20000 + $$ % 12000)) # below the ephemeral ports (32768-)
endpoint=tcp://127.0.0.1:$port
etc=$tmp/etc/cdcgemm
mkdir -p "$tmp/coordinator" "$etc/coordinators"
"$prefix/bin/cdcgemm-keygen" "$tmp/coordinator/coordinator" >/dev/null &&
  "$prefix/bin/cdcgemm-keygen" --endpoint "$endpoint" "$etc/worker-t1" >/dev/null ||
  { echo "FAIL: cdcgemm-keygen"; exit 1; }
cp "$tmp/coordinator/coordinator" "$etc/coordinators/"
sed -e "s|^CDC_WORKER_BIND=.*|CDC_WORKER_BIND=$endpoint|" \
  -e "s|^CDC_WORKER_FLAGS=.*|CDC_WORKER_FLAGS=--max-memory 256M --threads 1 --log info|" \
  "$example" >"$etc/worker-t1.env"
[ "$(stat -c %a "$etc/worker-t1_secret")" = 600 ] || fail "worker-t1_secret is not 0600"

# 3. Start it as the unit would.
t_start=$EPOCHREALTIME
bash "$here/unit_exec.sh" "$unit" t1 "$etc" "$tmp/credentials" >"$tmp/worker.log" 2>&1 &
worker_pid=$!
bound=0
for _ in $(seq 50); do # up to about 5 s
  if timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; then bound=1; break; fi
  kill -0 "$worker_pid" 2>/dev/null || break
  sleep 0.1
done
if [ $bound = 0 ]; then
  echo "FAIL: the worker did not bind $endpoint; its output:"
  cat "$tmp/worker.log"
  exit 1
fi
args=$(tr '\0' ' ' <"/proc/$worker_pid/cmdline")
echo "  running: $args"
case $args in
  *"--curve-secret $tmp/credentials/worker_secret --curve-allow $etc/coordinators --max-memory 256M"*) ;;
  *) fail "the worker's command line is not the unit's" ;;
esac
pass "the unit's ExecStart= serves $endpoint"

# 4. A coordinator with CURVE.
CDCGEMM_WORKERS=$endpoint CDCGEMM_CURVE_SECRET=$tmp/coordinator/coordinator_secret \
  CDCGEMM_CURVE_SERVER=$etc/worker-t1 timeout 60 "$prefix/bin/cdcgemm-bench" \
  --layer fc:512x512 --parity 0 --requests 20 --warmup 1 --json "$tmp/run.json" \
  >"$tmp/bench.log" 2>&1
status=$?
field() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" "$tmp/run.json" | head -n 1; }
if [ $status != 0 ] || [ ! -s "$tmp/run.json" ]; then
  fail "cdcgemm-bench exit status $status"
  cat "$tmp/bench.log"
else
  echo "  bench: ok $(field ok), wrong $(field wrong), lost $(field lost), fallbacks $(field fallbacks), shards sent $(field shards_sent)"
  [ "$(field ok)" = 20 ] && [ "$(field wrong)" = 0 ] && [ "$(field lost)" = 0 ] &&
    [ "$(field fallbacks)" = 0 ] && [ "$(field shards_sent)" -ge 21 ] ||
    fail "the coordinator was not served by the worker"
fi

# 5. systemctl stop: SIGTERM, then SIGKILL after TimeoutStopSec.
stop_s=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$unit")
kill -TERM "$worker_pid"
stopped=0
for _ in $(seq $((${stop_s:-10} * 10))); do
  kill -0 "$worker_pid" 2>/dev/null || { stopped=1; break; }
  sleep 0.1
done
if [ $stopped = 1 ]; then
  wait "$worker_pid"
  status=$?
  worker_pid=""
  [ $status = 0 ] && pass "SIGTERM: the worker exited with status 0" ||
    fail "SIGTERM: exit status $status"
else
  fail "SIGTERM: still running after TimeoutStopSec=${stop_s:-10}"
fi

# 6. systemd-analyze verify, on an instance of the template.
if command -v systemd-analyze >/dev/null 2>&1; then
  mkdir -p "$tmp/units"
  cp "$unit" "$tmp/units/"
  ln -s "cdcgemm-worker@.service" "$tmp/units/cdcgemm-worker@t1.service"
  if systemd-analyze verify "$tmp/units/cdcgemm-worker@t1.service" >"$tmp/verify.log" 2>&1 &&
    [ ! -s "$tmp/verify.log" ]; then
    pass "systemd-analyze verify: no complaint"
  else
    fail "systemd-analyze verify:"
    cat "$tmp/verify.log"
  fi
else
  echo "skipped: systemd-analyze verify (no systemd-analyze)"
fi

elapsed=$(awk -v a="$EPOCHREALTIME" -v b="$t_start" 'BEGIN { printf "%.1f", a - b }')
[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "passed ($elapsed s after the start of the worker)"
