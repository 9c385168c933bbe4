#!/usr/bin/env bash
# deb_check.sh - the Debian packages install, work and purge without a trace.
#
# usage: deb_check.sh SOURCE_DIR BUILD_DIR CPACK [CC]
#
#   1. cpack -G DEB from BUILD_DIR's CPackConfig.cmake (cmake/packaging.cmake):
#      libcdcgemm0, libcdcgemm-dev, cdcgemm-worker and cdcgemm-tools for this
#      architecture; lintian, where installed, reports no E: line;
#   2. dpkg -i of the four, after a list of every file name under /usr, /etc,
#      /lib and /var/lib (dpkg's and apt's own records aside) and of the users
#      and groups;
#   3. what a user does next: the installed keygen makes CURVE keys, two
#      installed workers serve tcp loopback with them, and tests/install/consumer.c,
#      built with the installed cdcgemm.pc and linked against /usr's library,
#      computes through them; then with no settings at all (the library spawns
#      /usr/bin/cdcgemm-worker itself); the installed bench runs a short layer;
#   4. dpkg -P of the four: every file name and user as before, nothing left.
# The packages are purged on every exit path. Root only (dpkg installs into
# /usr); exit 77 otherwise, without dpkg, or when a cdcgemm package is already
# installed (this test does not replace what a user installed).
set -u
src=${1:?usage: deb_check.sh SOURCE_DIR BUILD_DIR CPACK [CC]}
build=${2:?} cpack=${3:?} cc=${4:-cc}
packages=(libcdcgemm0 libcdcgemm-dev cdcgemm-worker cdcgemm-tools)
[ "$(id -u)" = 0 ] || { echo "SKIP: not root (dpkg -i installs into /usr)"; exit 77; }
# file: CPack's DEB generator needs it to find the shared library (shlibs).
for tool in dpkg dpkg-deb "$cpack" "$cc" pkg-config file; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIP: no $tool"; exit 77; }
done
for p in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed"; then
    echo "SKIP: $p is installed on this machine; not replacing it"
    exit 77
  fi
done
for var in $(env | sed -n 's/^\(CDCGEMM_[A-Z_]*\)=.*/\1/p'); do unset "$var"; done
# The equal plan: the checks below count calls served by the workers, and the
# adaptive default computes these small calls here, on this host faster.
export CDCGEMM_PLAN=equal
unset LD_PRELOAD LD_LIBRARY_PATH PKG_CONFIG_PATH

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cdcgemm-deb.XXXXXX") || exit 1
installed=0 worker_pids=()
purge() { dpkg -P "${packages[@]}" >"$tmp/purge.log" 2>&1; }
cleanup() {
  for pid in "${worker_pids[@]}"; do kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  [ $installed = 1 ] && purge
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# Every file name a package could leave behind; dpkg's and apt's records and
# logs change with any install and are dpkg's to keep.
snapshot() {
  find /usr /etc /lib /var/lib -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt \
    -o -path /var/lib/systemd/deb-systemd-helper-enabled \) -prune -o -print 2>/dev/null |
    LC_ALL=C sort
  getent passwd | cut -d: -f1 | sed 's/^/user /'
  getent group | cut -d: -f1 | sed 's/^/group /'
}

# 1. Build the packages.
arch=$(dpkg --print-architecture)
version=$(sed -n 's/^#define CDC_VERSION_STRING "\(.*\)"$/\1/p' "$build/include/cdcgemm_version.h")
(cd "$tmp" && "$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/debs") \
  >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log"; echo "FAIL: cpack"; exit 1; }
debs=()
for p in "${packages[@]}"; do
  deb=$tmp/debs/${p}_${version}_$arch.deb
  [ -f "$deb" ] || { ls "$tmp/debs"; echo "FAIL: cpack wrote no $(basename "$deb")"; exit 1; }
  debs+=("$deb")
done
pass "cpack wrote ${packages[*]} ($version, $arch)"
dpkg-deb -c "$tmp/debs/cdcgemm-worker_${version}_$arch.deb" |
  grep -q '/lib/systemd/system/cdcgemm-worker@.service$' ||
  fail "cdcgemm-worker holds no cdcgemm-worker@.service"
for deb in "${debs[@]}"; do
  for script in preinst postinst prerm postrm; do
    dpkg-deb -I "$deb" "$script" >/dev/null 2>&1 || continue
    # The library's ldconfig calls are CPack's; nothing else may run at install.
    if dpkg-deb -I "$deb" "$script" | grep -v -e '^#!' -e '^set -e$' -e '^$' -e '^if \[ "$1" = "\(configure\|remove\)" \]; then$' \
        -e '^	ldconfig$' -e '^fi$' | grep -q .; then
      fail "$(basename "$deb") has a $script that does more than ldconfig"
    fi
  done
done
if command -v lintian >/dev/null 2>&1; then
  lintian --tag-display-limit 0 "${debs[@]}" >"$tmp/lintian.log" 2>&1
  sed 's/^/    /' "$tmp/lintian.log" | grep -v "running with root privileges"
  if grep -q '^E:' "$tmp/lintian.log"; then fail "lintian reports errors"
  else pass "lintian: no E: line"; fi
else
  echo "  (lintian not installed: not run)"
fi

# 2. Install.
snapshot >"$tmp/before"
installed=1
if ! dpkg -i "${debs[@]}" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  echo "FAIL: dpkg -i"
  exit 1
fi
pass "dpkg -i installed the four"
/usr/bin/cdcgemm-worker --version | grep -q "^cdcgemm-worker $version (library $version, " ||
  fail "/usr/bin/cdcgemm-worker --version: $(/usr/bin/cdcgemm-worker --version 2>&1)"
[ -d /etc/cdcgemm ] && fail "installing created /etc/cdcgemm"

# 3. Use it: keys, two CURVE workers on tcp loopback, a program built against /usr.
keys=$tmp/keys
mkdir -p "$keys/coordinators" "$keys/servers"
port=$((20000 + $$ % 12000))
/usr/bin/cdcgemm-keygen "$keys/coordinator" >/dev/null || fail "cdcgemm-keygen"
cp "$keys/coordinator" "$keys/coordinators/"
endpoints=""
for i in 0 1; do
  endpoint=tcp://127.0.0.1:$((port + i))
  /usr/bin/cdcgemm-keygen --endpoint "$endpoint" "$keys/worker$i" >/dev/null || fail "keygen worker$i"
  /usr/bin/cdcgemm-worker --bind "$endpoint" --curve-secret "$keys/worker${i}_secret" \
    --curve-allow "$keys/coordinators" --threads 1 >"$tmp/worker$i.log" 2>&1 &
  worker_pids+=($!)
  endpoints=${endpoints:+$endpoints,}$endpoint
  cp "$keys/worker$i" "$keys/servers/"
done
[ "$(pkg-config --variable=prefix cdcgemm)" = /usr ] ||
  fail "pkg-config finds cdcgemm at $(pkg-config --variable=prefix cdcgemm), not /usr"
# shellcheck disable=SC2046
if "$cc" -std=c11 -Wall -Wextra -Werror $(pkg-config --cflags cdcgemm) \
    "$src/tests/install/consumer.c" -o "$tmp/consumer" $(pkg-config --libs cdcgemm) -lm \
    >"$tmp/cc.log" 2>&1; then
  lib=$(ldd "$tmp/consumer" | sed -n 's/.*libcdcgemm.so.0 => \([^ ]*\).*/\1/p')
  lib=$(readlink -f "$lib") # /lib is /usr/lib on a merged /usr
  case $lib in
    /usr/lib/*) pass "consumer built with the installed cdcgemm.pc, loads $lib" ;;
    *) fail "consumer loads libcdcgemm.so.0 from '$lib'" ;;
  esac
else
  cat "$tmp/cc.log"
  fail "consumer does not build against the installed headers and library"
fi
timeout=$(command -v timeout)
run_consumer() { # WHAT ENV...: run the consumer, expect result=PASS and coded calls
  local what=$1
  shift
  if env "$@" "$timeout" 60 "$tmp/consumer" >"$tmp/consumer.log" 2>&1 &&
    grep -q 'result=PASS' "$tmp/consumer.log" &&
    ! grep -q 'coded_calls=0 ' "$tmp/consumer.log"; then
    pass "$what: $(grep -o 'coded_calls=[0-9]* .*' "$tmp/consumer.log")"
  else
    fail "$what"
    sed 's/^/    /' "$tmp/consumer.log"
  fi
}
[ -x "$tmp/consumer" ] && run_consumer "two installed CURVE workers on tcp" \
  CDCGEMM_WORKERS="$endpoints" CDCGEMM_CURVE_SECRET="$keys/coordinator_secret" \
  CDCGEMM_CURVE_SERVER="$keys/servers" CDCGEMM_PARITY=1
# PATH holds only a decoy worker that fails: the library must find its own.
mkdir "$tmp/decoy"
printf '#!/bin/sh\necho "decoy cdcgemm-worker: found on PATH" >&2\nexit 3\n' >"$tmp/decoy/cdcgemm-worker"
chmod +x "$tmp/decoy/cdcgemm-worker"
[ -x "$tmp/consumer" ] && run_consumer "no settings (the library spawns /usr/bin's workers)" \
  PATH="$tmp/decoy"
if timeout 120 /usr/bin/cdcgemm-bench --layer fc:256x256 --workers 3 --parity 1 \
    --requests 5 --warmup 1 >"$tmp/bench.log" 2>&1 && grep -q ' lost=0 wrong=0' "$tmp/bench.log"; then
  pass "installed cdcgemm-bench: $(grep -m1 -o 'requests=.*wrong=0' "$tmp/bench.log")"
else
  fail "installed cdcgemm-bench"
  sed 's/^/    /' "$tmp/bench.log"
fi
for pid in "${worker_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
worker_pids=()

# 4. Purge: nothing left.
installed=0
purge || { cat "$tmp/purge.log"; fail "dpkg -P"; }
snapshot >"$tmp/after"
if cmp -s "$tmp/before" "$tmp/after"; then
  pass "dpkg -P left every file name, user and group as before"
else
  fail "dpkg -P left a trace:"
  diff "$tmp/before" "$tmp/after" | sed 's/^/    /' | head -40
fi
[ $failures = 0 ] && echo "PASS" || echo "FAILED: $failures"
[ $failures = 0 ]
