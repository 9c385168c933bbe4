#!/usr/bin/env bash
# cluster.sh - cdcgemm on six "hosts" over real network interfaces (issue 10).
#
# usage: tests/netns/cluster.sh WORKER_BIN BENCH_BIN KEYGEN_BIN UNIT_FILE
#
# Each host is a network namespace with one veth (eth0) whose peer is a port of
# a bridge that lives in a namespace of its own. Addresses (10.77.0.0/24) exist
# only inside these namespaces, there is no default route, and nothing is added
# to the root namespace: no packet can leave. Five hosts run cdcgemm-worker on
# tcp://10.77.0.1I:7001 with CURVE, started through cdcgemm-worker@.service;
# the coordinator (cdcgemm-bench, the library linked in) runs in a sixth. Keys,
# files and commands are those of docs/deploy.md, step by step: each section
# of this script names the section of that page it follows.
#
# Scenarios, each one bench run over all five workers (n = 4, r = 1), every one
# asserted from the bench JSON (0 wrong, 0 lost) and the coordinator's counters:
#   1. fault-free: fc:2048x2048 and AlexNet's five conv layers;
#   2. host 2's worker SIGKILLed mid-run (a death counted), then restarted on
#      its endpoint; requests of fc:2048x2048 and conv1-5 here and in 3;
#   3. host 3 partitioned ("ip link set eth0 down" in its namespace) for 3.5 s
#      (at least the issue's 3 s; why 3.5 below) and restored: it rejoins by
#      itself (worker_rejoins >= 1) within 2 s of its link coming up;
#   4. host 4's worker slowed by the `link` fault (a slow WiFi-class link).
#
# "Back within 2 s" is measured from the coordinator's own log: with
# CDCGEMM_LOG=info it prints "worker I live (answered a PING)" when a dead
# worker answers a heartbeat again (that is what worker_rejoins counts, and the
# next call plans over the worker). This script stamps each stderr line with
# bash's $EPOCHREALTIME as it arrives and compares it with the time it brought
# the link up.
#
# CDC_NETNS_KEEP=1 keeps the run's directory (logs, JSON, per-request CSV).
# Exit status: 0 passed, 1 failed, 77 skipped (not root, no ip, no netns).
# Every loop is bounded in count; each bench run is under `timeout`. Runtime:
# 35-45 s on a 2-core VM.
set -u
. "$(dirname "$0")/lib.sh"

worker=${1:?usage: cluster.sh WORKER_BIN BENCH_BIN KEYGEN_BIN UNIT_FILE}
bench=${2:?}
keygen=${3:?}
unit=${4:?}                   # cdcgemm-worker@.service (the build tree's copy)
unit_exec=$(cd "$(dirname "$0")/../service" && pwd)/unit_exec.sh

netns_require

prefix=cdcnt
run=$prefix$$                 # every name of this run carries its pid
port=7001
net=10.77.0
coordinator_ip=$net.1
host_ip() { echo "$net.$((10 + $1))"; }

# The partition's length (s): 3.5, not 3. TCP retransmits a lost segment
# 0.2, 0.6, 1.4, 3.0, 6.2 s after the first loss, and a 3 s cut ends just
# before the 3.0 s one: a coordinator without its reconnect settings
# (transport/client.c: ZMQ_TCP_MAXRT, ZMQ_CONNECT_TIMEOUT, ZMQ_RECONNECT_IVL)
# came back 0.17-0.21 s after a 3 s cut but 3.0-3.1 s after a 3.5 s one (with
# them: 0.04-0.44 s over a dozen runs). CDC_NETNS_PARTITION_S overrides it.
partition_s=${CDC_NETNS_PARTITION_S:-3.5}

# ---- cleanup on every path (lib.sh) ---------------------------------------------
netns_start

# ---- the network ---------------------------------------------------------------
host_ns() { echo "$run-h$1"; }
netns_hosts 6 # host 6 joins later, found by discovery (scenario 6)
netns_no_route_out

# ---- install (docs/deploy.md, "Install") -------------------------------------------
# The build tree stands for the installed files: its binaries, and its copy of
# cdcgemm-worker@.service (the installed one differs only in the paths it
# names; tests/service/service_check.sh runs the installed one).

# ---- keys (docs/deploy.md, "Keys") ------------------------------------------------
# Each machine's /etc/cdcgemm is a directory of its own: $tmp/co/etc/cdcgemm on
# the coordinator's, $tmp/hI/etc/cdcgemm on worker host I (instance hI).
co_etc=$tmp/co/etc/cdcgemm
mkdir -p "$co_etc/workers"
"$keygen" "$co_etc/coordinator" >/dev/null || { echo "FAIL: keygen"; exit 1; }
endpoints=""
for i in 1 2 3 4 5 6; do
  endpoint=tcp://$(host_ip $i):$port
  etc=$tmp/h$i/etc/cdcgemm
  mkdir -p "$etc/coordinators"
  "$keygen" --endpoint "$endpoint" "$etc/worker-h$i" >/dev/null || { echo "FAIL: keygen"; exit 1; }
  cp "$co_etc/coordinator" "$etc/coordinators/coordinator" # public files only
  cp "$etc/worker-h$i" "$co_etc/workers/"
  [ "$i" -le 5 ] && endpoints=$endpoints${endpoints:+,}$endpoint
done

# ---- workers (docs/deploy.md, "Run the worker as a service") ---------------------
# Worker host I runs instance hI of cdcgemm-worker@.service: its flags in
# /etc/cdcgemm/worker-hI.env, started by the unit's own ExecStart= line
# (tests/service/unit_exec.sh does what systemd would: EnvironmentFile=,
# LoadCredential=, CREDENTIALS_DIRECTORY), with the build tree's worker.
declare -a worker_pid
start_worker() { # i [extra worker flags]: write worker-hI.env, "systemctl start"
  local i=$1
  shift
  local etc=$tmp/h$i/etc/cdcgemm
  printf 'CDC_WORKER_BIND=tcp://%s:%s\nCDC_WORKER_FLAGS=%s\n' "$(host_ip "$i")" "$port" \
    "--threads 1 --log warn --index $((i - 1)) $*" >"$etc/worker-h$i.env"
  rm -rf "$tmp/h$i/credentials"
  ip netns exec "$(host_ns "$i")" bash "$unit_exec" "$unit" "h$i" "$etc" \
    "$tmp/h$i/credentials" "$worker" >>"$tmp/worker$i.log" 2>&1 &
  worker_pid[i]=$!
  local _
  for _ in $(seq 50); do # up to about 5 s: bound, and reachable from the coordinator
    ip netns exec "$coordinator_ns" timeout 1 bash -c \
      "exec 3<>/dev/tcp/$(host_ip "$i")/$port" 2>/dev/null && return 0
    kill -0 "${worker_pid[$i]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "FAIL: worker $i did not bind; its log:"
  cat "$tmp/worker$i.log"
  exit 1
}
stop_worker() { # i
  kill "${worker_pid[$1]}" 2>/dev/null
  wait "${worker_pid[$1]}" 2>/dev/null
}

# ---- the coordinator (docs/deploy.md, "The coordinator") -------------------------
stamp() { # each line prefixed with the time it arrived
  local line
  while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done
}
# run_bench NAME [bench flags]: runs in the coordinator's namespace, writes
# $tmp/NAME.json, NAME.out (stdout) and NAME.log (stderr, time-stamped).
run_bench() {
  local name=$1
  shift
  ip netns exec "$coordinator_ns" env CDCGEMM_WORKERS="$endpoints" \
    CDCGEMM_CURVE_SECRET="$co_etc/coordinator_secret" \
    CDCGEMM_CURVE_SERVER="$co_etc/workers" CDCGEMM_PARITY=1 CDCGEMM_LOG=info \
    timeout 60 "$bench" --warmup 3 "$@" --json "$tmp/$name.json" --csv "$tmp/$name.csv" \
    2>&1 >"$tmp/$name.out" | stamp >"$tmp/$name.log"
  return "${PIPESTATUS[0]}"
}
# field NAME KEY: the first number after "KEY": in NAME.json.
field() { sed -n "s/.*\"$2\": \([-0-9.e+]*\).*/\1/p" "$tmp/$1.json" | head -n 1; }
counter() { sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p" "$tmp/$1.json" | tail -n 1; }

CONVS="--layer conv:3x224x224:64:11:4:2 --layer conv:64x27x27:192:5:1:2
  --layer conv:192x13x13:384:3:1:1 --layer conv:384x13x13:256:3:1:1
  --layer conv:256x13x13:256:3:1:1"

# check NAME STATUS WHAT MAX_FALLBACKS: the run's exit status, 5 workers, 0 wrong
# ("wrong": an output off the uncoded reference by more than 1e-4, relative),
# 0 lost ("lost": a call that returned an error), and at most MAX_FALLBACKS
# requests with a shard computed on the coordinator ("fallbacks": right, but
# slow). Fallbacks are allowed a few: on a loaded 2-core machine a live worker
# can miss 300 ms of heartbeats (docs/workers.md), and two such at once, or
# one while r = 0 (during the partition), make a fallback. Every run here had
# none (the numbers are printed).
check() {
  local name=$1 status=$2 what=$3 max_fallbacks=$4
  if [ ! -s "$tmp/$name.json" ]; then
    fail "$what: no JSON (exit status $status)"
    sed 's/^/  /' "$tmp/$name.log" | tail -n 20
    return
  fi
  local workers wrong lost fallbacks requests ok
  workers=$(field "$name" workers) wrong=$(field "$name" wrong) lost=$(field "$name" lost)
  fallbacks=$(field "$name" fallbacks) requests=$(field "$name" requests) ok=$(field "$name" ok)
  echo "  $what: requests $requests, ok $ok, wrong $wrong, lost $lost," \
    "recovered $(field "$name" recovered), fallbacks $fallbacks," \
    "p50 $(sed -n 's/.*"p50": \([0-9.]*\).*/\1/p' "$tmp/$name.json" | head -n 1) ms," \
    "deaths $(counter "$name" worker_deaths), rejoins $(counter "$name" worker_rejoins)"
  [ "$status" = 0 ] || fail "$what: bench exit status $status"
  [ "$workers" = 5 ] || fail "$what: JSON workers = $workers, expected 5"
  [ "$wrong" = 0 ] && [ "$lost" = 0 ] || fail "$what: $wrong wrong, $lost lost"
  [ -n "$fallbacks" ] && [ "$fallbacks" -le "$max_fallbacks" ] ||
    fail "$what: $fallbacks fallbacks (at most $max_fallbacks)"
}

# ---- scenarios (docs/deploy.md, "The coordinator": the first check, then
# "When a device misbehaves": killed, cut off, slow) -----------------------------
t0=$EPOCHREALTIME
for i in 1 2 3 4 5; do start_worker "$i"; done
pass "5 CURVE workers bound on $endpoints"

# 1. Fault-free.
run_bench fc --layer fc:2048x2048 --requests 200; check fc $? "fault-free fc:2048x2048" 2
# shellcheck disable=SC2086
run_bench conv $CONVS --requests 5; check conv $? "fault-free AlexNet conv1-5" 1

# Scenarios 2 and 3 need calls still running seconds after they start, on any
# machine: every worker delays its replies by 10 ms (an emulated device), so
# N requests take at least N x 10 ms.
for i in 1 2 3 4 5; do stop_worker "$i"; start_worker "$i" --faults 'delay@*:ms=10'; done

# 2. Host 2's worker SIGKILLed mid-run, each request fc:2048x2048 and conv1-5:
#    at least 60 x 6 x 10 ms = 3.6 s of calls, the kill 1.5 s in.
# shellcheck disable=SC2086
run_bench kill --layer fc:2048x2048 $CONVS --requests 60 &
bench_pid=$!
sleep 1.5
kill -9 "${worker_pid[2]}"
wait "${worker_pid[2]}" 2>/dev/null
kill -0 $bench_pid 2>/dev/null || fail "kill: the run ended before the kill (too fast to test)"
wait $bench_pid
check kill $? "host 2 SIGKILLed mid-run" 2
[ "$(counter kill worker_deaths)" -ge 1 ] 2>/dev/null || fail "kill: no death counted"
start_worker 2 --faults 'delay@*:ms=10'

# 3. Host 3 partitioned for 3.5 s, the same workload: 140 x 6 x 10 ms = 8.4 s
#    of calls at least; link down 1.5 s in, up at 5 s, and the run goes on for
#    3.4 s more.
# shellcheck disable=SC2086
run_bench partition --layer fc:2048x2048 $CONVS --requests 140 &
bench_pid=$!
sleep 1.5
ip -n "$(host_ns 3)" link set eth0 down
link_down=$EPOCHREALTIME
sleep "$partition_s"
ip -n "$(host_ns 3)" link set eth0 up
link_up=$EPOCHREALTIME
kill -0 $bench_pid 2>/dev/null || fail "partition: the run ended before the link came up"
wait $bench_pid
check partition $? "host 3 partitioned for $partition_s s" 10
[ "$(counter partition worker_rejoins)" -ge 1 ] 2>/dev/null || fail "partition: no rejoin counted"
# The first "worker 2 live" (host 3 is index 2) after the link came up.
live_at=$(awk -v up="$link_up" '$0 ~ /worker 2 live/ && $1 >= up { print $1; exit }' \
  "$tmp/partition.log")
dead_at=$(awk -v down="$link_down" '$0 ~ /worker 2 dead/ && $1 >= down { print $1; exit }' \
  "$tmp/partition.log")
if [ -z "$live_at" ]; then
  fail "partition: host 3 never came back (coordinator log below)"
  sed 's/^/  /' "$tmp/partition.log" | tail -n 20
else
  back=$(awk -v a="$live_at" -v b="$link_up" 'BEGIN { printf "%.3f", a - b }')
  seen=$(awk -v a="${dead_at:-$link_down}" -v b="$link_down" 'BEGIN { printf "%.3f", a - b }')
  echo "  host 3 declared dead ${seen} s after its link went down, live again ${back} s after it came up"
  awk -v s="$back" 'BEGIN { exit !(s <= 2.0) }' || fail "partition: back after $back s (> 2 s)"
fi
[ -n "$dead_at" ] || fail "partition: host 3 was never declared dead (was the link really cut?)"

# 4. Host 4's worker on a slow link (5 Mbit/s, 2 ms each way: the link fault),
#    the others as in scenario 1.
for i in 1 2 3 4 5; do stop_worker "$i"; done
for i in 1 2 3 5; do start_worker "$i"; done
start_worker 4 --faults 'link@w3:mbit=5,lat=2'
run_bench slowfc --layer fc:2048x2048 --requests 100; check slowfc $? "host 4 on a slow link, fc" 2
# shellcheck disable=SC2086
run_bench slowconv $CONVS --requests 5; check slowconv $? "host 4 on a slow link, conv1-5" 1

# 5. A rolling restart (docs/deploy.md, "Upgrading"): each worker in turn
#    stopped with SIGTERM (it says goodbye), started again and back in the plan
#    before the next, while calls run: no death, no fallback, nothing lost.
for i in 1 2 3 4 5; do stop_worker "$i"; start_worker "$i" --faults 'delay@*:ms=10'; done
# shellcheck disable=SC2086
run_bench rolling --layer fc:2048x2048 $CONVS --requests 150 &
bench_pid=$!
sleep 1
for i in 1 2 3 4 5; do
  stop_worker "$i"
  start_worker "$i" --faults 'delay@*:ms=10'
  sleep 0.6 # its PONGs: back in the plan (a rejoin) before the next goes
done
kill -0 $bench_pid 2>/dev/null || fail "rolling: the run ended before the last restart"
wait $bench_pid
check rolling $? "rolling restart of all five workers" 0
[ "$(counter rolling worker_deaths)" = 0 ] || fail "rolling: $(counter rolling worker_deaths) deaths"
[ "$(counter rolling worker_goodbyes)" = 5 ] ||
  fail "rolling: $(counter rolling worker_goodbyes) goodbyes, expected 5"

# 6. Discovery (docs/deploy.md, "Adding a device"): five workers started with
#    --announce on their eth0, the coordinator with CDCGEMM_WORKERS=discover
#    finds them within 3 s; a sixth started 2 s into the run is used within 3 s
#    of starting (its "worker 5 live" in the coordinator's log; the JSON's
#    workers is the widest call: 6).
# Calls of 10 ms at least (delay), 600 of them: the run outlasts the sixth's arrival.
announce="--announce --announce-interface eth0 --faults delay@*:ms=10"
# shellcheck disable=SC2086
for i in 1 2 3 4 5; do stop_worker "$i"; start_worker "$i" $announce; done
discover_bench() {
  ip netns exec "$coordinator_ns" env CDCGEMM_WORKERS=discover CDCGEMM_DISCOVER_INTERFACE=eth0 \
    CDCGEMM_CURVE_SECRET="$co_etc/coordinator_secret" \
    CDCGEMM_CURVE_SERVER="$co_etc/workers" CDCGEMM_PARITY=1 CDCGEMM_LOG=info \
    timeout 60 "$bench" --warmup 0 --layer fc:2048x2048 --requests 600 \
    --json "$tmp/discover.json" 2>&1 >"$tmp/discover.out" | stamp >"$tmp/discover.log"
}
started=$EPOCHREALTIME
discover_bench &
bench_pid=$!
sleep 2
sixth_at=$EPOCHREALTIME
# shellcheck disable=SC2086
start_worker 6 $announce
kill -0 $bench_pid 2>/dev/null || fail "discovery: the run ended before the sixth started"
wait $bench_pid
status=$?
found=$(grep -c "discovery: worker [0-9]* is" "$tmp/discover.log")
fifth=$(awk '/discovery: worker 4 is/ { print $1; exit }' "$tmp/discover.log")
sixth=$(awk '/worker 5 live/ { print $1; exit }' "$tmp/discover.log")
echo "  discovery: $found workers found; the fifth $(awk -v a="${fifth:-0}" -v b="$started" \
  'BEGIN { printf "%.2f", a - b }') s after the start, the sixth live $(awk \
  -v a="${sixth:-0}" -v b="$sixth_at" 'BEGIN { printf "%.2f", a - b }') s after it started;" \
  "JSON workers $(field discover workers), wrong $(field discover wrong), lost $(field discover lost)"
[ "$status" = 0 ] || fail "discovery: bench exit status $status"
[ "$found" = 6 ] || fail "discovery: $found workers found, expected 6"
[ -n "$fifth" ] && awk -v a="$fifth" -v b="$started" 'BEGIN { exit !(a - b <= 3.0) }' ||
  fail "discovery: the first five not found within 3 s"
[ -n "$sixth" ] && awk -v a="$sixth" -v b="$sixth_at" 'BEGIN { exit !(a - b <= 3.0) }' ||
  fail "discovery: the sixth not live within 3 s of starting"
[ "$(field discover workers)" = 6 ] || fail "discovery: JSON workers $(field discover workers)"
[ "$(field discover wrong)" = 0 ] && [ "$(field discover lost)" = 0 ] ||
  fail "discovery: results wrong or lost"

elapsed=$(awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN { printf "%.1f", a - b }')
if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed ($elapsed s); logs in $tmp (removed at exit):"
  for f in "$tmp"/worker*.log; do echo "--- $f"; tail -n 5 "$f"; done
  exit 1
fi
echo "all scenarios passed in $elapsed s"
exit 0
