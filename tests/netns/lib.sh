# lib.sh - what the netns suites share, sourced by cluster.sh and discovery.sh:
# cleanup on every exit path, leftovers of aborted runs, and hosts on a bridge.
#
# Sourced first thing. The sourcing script then sets, before calling these:
# prefix (names of its runs), run ($prefix$$: every name of this run carries
# its pid), net (its /24), coordinator_ip, and host_ns/host_ip (host I's
# namespace and address). Each host is a namespace with one veth (eth0) whose
# peer is a port of a bridge that lives in a namespace of its own; no default
# route, nothing in the root namespace.

# The suites test the workers (kills, partitions, restarts, replayed beacons):
# the equal plan sends every call to them, where the adaptive default would
# compute these small calls on this host and the workers would see none.
export CDCGEMM_PLAN=equal

skip() { echo "SKIP: $*"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
created=() # the namespaces to delete
tmp=""     # the run's directory, once made

# What every suite needs, or skip (77): root, ip, timeout, bash 5.
netns_require() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
  command -v ip >/dev/null 2>&1 || skip "no ip (iproute2)"
  command -v timeout >/dev/null 2>&1 || skip "no timeout (coreutils)"
  [ -n "${EPOCHREALTIME:-}" ] || skip "bash without EPOCHREALTIME (bash >= 5)"
}

# Kill what runs in this run's namespaces, delete them and the directory
# (kept with CDC_NETNS_KEEP=1). The EXIT trap.
netns_cleanup() {
  trap - EXIT INT TERM
  exec 3>&2 2>/dev/null # not bash's "Killed" notices of the workers
  local ns
  for ns in "${created[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
  done
  wait 2>/dev/null
  for ns in "${created[@]}"; do
    ip netns del "$ns" 2>/dev/null
  done
  if [ -n "${CDC_NETNS_KEEP:-}" ]; then
    echo "kept: $tmp" >&3
  elif [ -n "$tmp" ]; then
    rm -rf "$tmp"
  fi
}

# Traps for every exit path, then the leftovers of an aborted run of the same
# script (its pid no longer exists): namespaces and directories.
netns_start() {
  trap netns_cleanup EXIT
  trap 'echo "interrupted"; exit 130' INT
  trap 'echo "terminated"; exit 143' TERM
  local ns pid dir
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${prefix}[0-9][0-9]*-"); do
    pid=${ns#"$prefix"}
    pid=${pid%%-*}
    if ! kill -0 "$pid" 2>/dev/null; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
      ip netns del "$ns" 2>/dev/null && echo "removed leftover namespace $ns"
    fi
  done
  for dir in "${TMPDIR:-/tmp}/$prefix"[0-9]*-??????; do
    [ -d "$dir" ] || continue
    pid=${dir##*/"$prefix"}
    pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null || rm -rf "$dir"
  done
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$run-XXXXXX") || exit 1
}

ns_add() {
  ip netns add "$1" 2>"$tmp/netns.err" || return 1
  created+=("$1")
  ip -n "$1" link set lo up
}

# Host k gets eth0 in its namespace, peer vK on the bridge.
attach() { # k namespace address
  ip -n "$bridge_ns" link add "v$1" type veth peer name eth0 netns "$2" &&
    ip -n "$bridge_ns" link set "v$1" master br0 &&
    ip -n "$bridge_ns" link set "v$1" up &&
    ip -n "$2" addr add "$3/24" dev eth0 &&
    ip -n "$2" link set eth0 up
}

# The bridge's namespace ($run-br, in bridge_ns) with br0 up; skips (77) where
# namespaces or bridges cannot be made.
netns_bridge() {
  bridge_ns=$run-br
  ns_add "$bridge_ns" || skip "cannot create a network namespace: $(cat "$tmp/netns.err")"
  ip -n "$bridge_ns" link add br0 type bridge 2>"$tmp/netns.err" ||
    skip "cannot create a bridge: $(cat "$tmp/netns.err")"
  ip -n "$bridge_ns" link set br0 up
}

# The bridge, the coordinator ($run-co, host 0, in coordinator_ns) and hosts
# 1..count on it; exits 1 naming what could not be set up.
netns_hosts() { # count
  netns_bridge
  coordinator_ns=$run-co
  ns_add "$coordinator_ns" && attach 0 "$coordinator_ns" "$coordinator_ip" ||
    { echo "FAIL: setting up the coordinator's namespace"; exit 1; }
  local i
  for ((i = 1; i <= $1; i++)); do
    ns_add "$(host_ns $i)" && attach "$i" "$(host_ns $i)" "$(host_ip $i)" ||
      { echo "FAIL: setting up host $i"; exit 1; }
  done
}

# No namespace of the run has a default route: no packet can leave.
netns_no_route_out() {
  local ns
  for ns in "${created[@]}"; do
    [ -z "$(ip -n "$ns" route show default)" ] || { echo "FAIL: $ns has a default route"; exit 1; }
  done
  pass "${#created[@]} namespaces on bridge $bridge_ns, $net.0/24, no default route"
}
