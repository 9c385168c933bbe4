#!/usr/bin/env bash
# interop.sh - ARM devices against an x86-64 coordinator (issue 28; ctest cross_interop,
# label cross). Builds everything (the library, cdcgemm-worker, cdcgemm-keygen,
# cdcgemm-bench) with cmake/toolchain-arm64.cmake and toolchain-armhf.cmake into
# BUILD/cross-ARCH and its Debian packages (cpack; their architecture, ARM code,
# lintian), then on tcp loopback only (127.0.0.1), CURVE on everywhere:
#   - four ARM workers under qemu-user (two arm64, two armhf), each with a key made by
#     its own architecture's keygen;
#   - this build's cdcgemm-bench as the coordinator, plan pinned to equal blocks, over
#     an FC and a conv layer, r = 1 and r = 2, rotated and dedicated parity layouts,
#     and one run with the spatial split: every run 0 wrong, 0 lost, no local
#     fallback, max_rel_error <= 1e-5 against the coordinator's x86 reference, and
#     every ARM worker computed tasks in it (its PONG status, before and after);
#   - one armhf worker SIGKILLed mid-run: 0 lost, 0 wrong, the death counted;
#   - a BLAS program that knows nothing of cdcgemm (blas_client, LD_PRELOAD) on the
#     ARM workers: its own double-precision check passes, its calls were coded;
#   - cross_probe against a 32-bit and a 64-bit worker: a header declaring 4 TiB
#     operands and one needing 1 GiB get an ERROR naming the limit, the worker lives;
#   - the coordinator built for arm64, under qemu, once against three x86 workers.
#
# usage: interop.sh SOURCE BUILD BENCH WORKER KEYGEN PROBE BLAS_CLIENT LIBCDCGEMM
# The target's OpenBLAS, libzmq and CZMQ come from the multiarch packages
# (libopenblas-dev:ARCH libzmq3-dev:ARCH libczmq4:ARCH) or, where those cannot be
# installed, from a sysroot of them extracted into BUILD/cross-ARCH-sysroot
# (tests/cross/sysroot.sh, once). Exit 77 (skipped) when a cross compiler or
# qemu-user-static is missing, or neither kind of libraries can be had: .ci/run
# installs them. CDC_CROSS_ARCHES (default
# "arm64 armhf") picks the architectures; CDC_CROSS_JOBS the build's -j (1).
# Every wait is bounded in time, every process started here is killed on exit.
set -u
src=${1:?source dir} build=${2:?build dir} bench=${3:?} worker=${4:?} keygen=${5:?}
probe=${6:?} blas_client=${7:?} library=${8:?}
arches=${CDC_CROSS_ARCHES:-arm64 armhf}
# On tmpfs where there is one: a 32-bit program under qemu-user on a 64-bit
# kernel cannot list an ext4 directory through a readdir built without large
# file support (the 64-bit directory offsets overflow it: EOVERFLOW, no entry),
# and CZMQ's zauth reads an armhf worker's --curve-allow directory that way. On
# an ARM kernel the offsets fit. tmpfs's are small.
shm=/dev/shm
[ -d "$shm" ] && [ -w "$shm" ] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d "$shm/cdc-cross-XXXXXX")
pids=()
# Every process started here: SIGTERM first (timeout passes it on to the bench it
# runs), SIGKILL what is left after 5 s.
cleanup() {
  local p t alive
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for t in 1 2 3 4 5 6 7 8 9 10; do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.5
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok: $*"; }
started=$(date +%s)

triplet() { case $1 in arm64) echo aarch64-linux-gnu ;; armhf) echo arm-linux-gnueabihf ;; esac; }
qemu_of() { case $1 in arm64) echo qemu-aarch64-static ;; armhf) echo qemu-arm-static ;; esac; }
declare -A prefix sysroot
# run_arm ARCH PROGRAM ARGS...: a program of build-cross-ARCH under qemu-user, with
# the loader and libraries of the multiarch tree or of the sysroot it was built with.
run_arm() {
  local arch=$1
  shift
  "$(qemu_of "$arch")" -L "${prefix[$arch]}" "$@"
}

# ---- what the suite needs, else skipped -----------------------------------------
# multiarch_ready ARCH: the target's OpenBLAS, libzmq and CZMQ installed (multiarch).
multiarch_ready() {
  local t pc
  t=$(triplet "$1")
  for pc in openblas libzmq; do
    PKG_CONFIG_LIBDIR=/usr/lib/$t/pkgconfig pkg-config --exists "$pc" || return 1
  done
  [ -e "/usr/lib/$t/libczmq.so.4" ]
}
command -v python3 >/dev/null || skip "no python3 (free ports, JSON)"
for arch in $arches; do
  t=$(triplet "$arch")
  [ -n "$t" ] || fail "CDC_CROSS_ARCHES: unknown architecture '$arch' (arm64, armhf)"
  command -v "$t-gcc" >/dev/null || skip "no $t-gcc (apt-get install crossbuild-essential-$arch)"
  command -v "$(qemu_of "$arch")" >/dev/null || skip "no $(qemu_of "$arch") (qemu-user-static)"
  if multiarch_ready "$arch"; then
    prefix[$arch]=/usr/$t sysroot[$arch]=""
    continue
  fi
  # Not installable here (docs/install.md): the same packages extracted, once.
  dir=$build/cross-$arch-sysroot
  if [ ! -e "$dir/.complete" ]; then
    rm -rf "$dir"
    bash "$src/tests/cross/sysroot.sh" "$arch" "$dir" >"$tmp/sysroot-$arch.log" 2>&1 ||
      skip "no $arch libraries: neither libopenblas-dev:$arch, libzmq3-dev:$arch and" \
        "libczmq4:$arch installed nor a sysroot of them ($(tail -n 1 "$tmp/sysroot-$arch.log"))"
    touch "$dir/.complete"
  fi
  echo "ok: $arch against the sysroot $dir ($(tail -n 1 "$tmp/sysroot-$arch.log" 2>/dev/null ||
    echo made before))"
  prefix[$arch]=$dir sysroot[$arch]=$dir
done

# ---- the cross builds ------------------------------------------------------------
# Everything a package holds: the library, the worker, the keygen, the bench.
build_arch() {
  local arch=$1 dir=$build/cross-$1 targets=(all)
  if ! cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchain-$arch.cmake" \
      -DCDC_CROSS_SYSROOT="${sysroot[$arch]}" >"$tmp/cmake-$arch.log" 2>&1 ||
     ! cmake --build "$dir" -j "${CDC_CROSS_JOBS:-1}" --target "${targets[@]}" \
      >>"$tmp/cmake-$arch.log" 2>&1; then
    tail -n 30 "$tmp/cmake-$arch.log"
    fail "the $arch cross build failed (log above)"
  fi
  file -L "$dir/cdcgemm-worker" | grep -q "ARM" || fail "$dir/cdcgemm-worker is not an ARM program"
}
for arch in $arches; do
  t0=$(date +%s)
  build_arch "$arch"
  pass "$arch cross build in $(( $(date +%s) - t0 )) s ($build/cross-$arch)"
done

# ---- the Debian packages of each architecture (cmake/packaging.cmake) ------------
# cpack in the cross build: four packages of that architecture, whose programs and
# library are ARM code, and (where lintian is installed) no E: line.
package_arch() {
  local arch=$1 dir=$build/cross-$1 p deb
  rm -rf "$dir/packages"
  (cd "$dir" && cpack -G DEB -B "$dir/packages") >"$tmp/cpack-$arch.log" 2>&1 ||
    { tail -n 20 "$tmp/cpack-$arch.log"; fail "cpack in the $arch cross build"; }
  for p in libcdcgemm0 libcdcgemm-dev cdcgemm-worker cdcgemm-tools; do
    deb=$(ls "$dir/packages/${p}_"*"_$arch.deb" 2>/dev/null)
    [ -n "$deb" ] || fail "no ${p}_*_$arch.deb ($(ls "$dir/packages"))"
    [ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "$deb: not Architecture $arch"
  done
  rm -rf "$tmp/deb-$arch"
  for p in libcdcgemm0 cdcgemm-worker cdcgemm-tools; do
    dpkg-deb -x "$dir/packages/${p}_"*"_$arch.deb" "$tmp/deb-$arch"
  done
  for f in usr/bin/cdcgemm-worker usr/bin/cdcgemm-keygen usr/bin/cdcgemm-bench \
      usr/bin/cdcgemm-llm usr/lib/libcdcgemm.so.0; do
    file -L "$tmp/deb-$arch/$f" | grep -q "ELF .* ARM" || fail "$arch package: $f is not ARM code"
  done
  if command -v lintian >/dev/null; then
    lintian --tag-display-limit 0 "$dir/packages/"*.deb >"$tmp/lintian-$arch.log" 2>&1
    ! grep '^E:' "$tmp/lintian-$arch.log" || fail "lintian: errors in the $arch packages"
  fi
}
if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null; then
  for arch in $arches; do
    package_arch "$arch"
    pass "$arch Debian packages: the four, ARM code, lintian $(command -v lintian >/dev/null &&
      echo "without errors" || echo "not installed")"
  done
else
  echo "  (no cpack or dpkg-deb: the packages are not built)"
fi

# ---- ports, keys, workers ---------------------------------------------------------
free_ports() {
  python3 -c 'import socket,sys
s=[socket.socket() for _ in range(int(sys.argv[1]))]
[x.bind(("127.0.0.1", 0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))' "$1"
}
mkdir -p "$tmp/allow" "$tmp/workers" "$tmp/x86workers"
"$keygen" "$tmp/co" >/dev/null || fail "keygen (coordinator)"
cp "$tmp/co" "$tmp/allow/co"

names=() archs=() ports=() endpoints=() wpid=()
# start_worker I: worker I (names/archs/ports set) started, bound within 90 s.
start_worker() {
  local i=$1 name=${names[$1]} arch=${archs[$1]} ep="tcp://127.0.0.1:${ports[$1]}"
  local args=(--bind "$ep" --curve-secret "$tmp/${name}_secret" --curve-allow "$tmp/allow"
              --log info)
  # Simple commands, so that $! is the worker (or its qemu) itself.
  if [ "$arch" = x86 ]; then
    "$worker" "${args[@]}" >"$tmp/$name.log" 2>&1 &
  else
    "$(qemu_of "$arch")" -L "${prefix[$arch]}" "$build/cross-$arch/cdcgemm-worker" \
      "${args[@]}" >"$tmp/$name.log" 2>&1 &
  fi
  wpid[i]=$!
  pids+=("$!")
  local deadline=$(( $(date +%s) + 90 ))
  until grep -q "serving on" "$tmp/$name.log" 2>/dev/null; do
    kill -0 "${wpid[i]}" 2>/dev/null || fail "$name ($arch) exited: $(tail -n 3 "$tmp/$name.log")"
    [ "$(date +%s)" -lt "$deadline" ] || fail "$name ($arch) not bound within 90 s"
    sleep 0.2
  done
}
# add_worker NAME ARCH PORT DIR: its key (made by its own architecture's keygen),
# its public certificate into DIR, then started.
add_worker() {
  local i=${#names[@]} name=$1 arch=$2 ep="tcp://127.0.0.1:$3"
  names[i]=$name archs[i]=$arch ports[i]=$3 endpoints[i]=$ep
  if [ "$arch" = x86 ]; then
    "$keygen" --endpoint "$ep" "$tmp/$name" >/dev/null
  else
    run_arm "$arch" "$build/cross-$arch/cdcgemm-keygen" --endpoint "$ep" "$tmp/$name" >/dev/null
  fi || fail "keygen of $name ($arch)"
  cp "$tmp/$name" "$4/$name"
  start_worker "$i"
}
# Four ARM workers: two of each architecture (four of one when only one is asked).
read -r -a arch_list <<<"$arches"
per_arch=$(( 4 / ${#arch_list[@]} ))
read -r -a free <<<"$(free_ports 4)"
arm=()
n=0
for arch in "${arch_list[@]}"; do
  for k in $(seq 1 "$per_arch"); do
    add_worker "$arch-$k" "$arch" "${free[n]}" "$tmp/workers"
    arm+=("$n")
    n=$((n + 1))
  done
done
arm_endpoints=$(IFS=,; echo "${endpoints[*]}")
pass "${#arm[@]} ARM workers under qemu, CURVE, on $arm_endpoints"

# ---- runs -------------------------------------------------------------------------
coordinator_env=(CDCGEMM_CURVE_SECRET="$tmp/co_secret" CDCGEMM_CURVE_SERVER="$tmp/workers"
                 CDCGEMM_WORKERS="$arm_endpoints" CDCGEMM_PLAN=equal CDCGEMM_TIMEOUT_MS=60000
                 CDCGEMM_LOG=info)
LAYERS=(--layer fc:256x256:4 --layer conv:8x16x16:16:3:1:1)

# tasks_of I: the tasks worker I reports computed (cdcgemm-bench status, its PONG).
tasks_of() {
  env "${coordinator_env[@]}" CDCGEMM_LOG=error timeout 60 "$bench" status 2>/dev/null |
    awk -v ep="${endpoints[$1]}" '$2 == ep && $3 == "yes" { print $9 }'
}
# json FILE KEY: the first number after "KEY": in FILE.
json() { sed -n "s/.*\"$2\": \([-0-9.e+]*\).*/\1/p" "$1" | head -n 1; }

# check_run NAME STATUS WORKERS MAX_FALLBACKS: the bench's exit status and JSON.
check_run() {
  local name=$1 f="$tmp/$1.json"
  [ "$2" = 0 ] || fail "$name: bench exit status $2: $(tail -n 5 "$tmp/$name.err")"
  [ -s "$f" ] || fail "$name: no JSON"
  local wrong lost fallbacks err workers
  wrong=$(json "$f" wrong) lost=$(json "$f" lost) fallbacks=$(json "$f" fallbacks)
  err=$(json "$f" max_rel_error) workers=$(json "$f" workers)
  echo "  $name: workers $workers, requests $(json "$f" requests), wrong $wrong, lost $lost," \
    "fallbacks $fallbacks, recovered $(json "$f" recovered), max_rel_error $err," \
    "p50 $(json "$f" p50) ms"
  [ "$workers" = "$3" ] || fail "$name: $workers workers in the JSON, expected $3"
  [ "$wrong" = 0 ] && [ "$lost" = 0 ] || fail "$name: $wrong wrong, $lost lost"
  [ "$fallbacks" -le "$4" ] || fail "$name: $fallbacks calls computed locally (at most $4)"
  python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 1e-5 else 1)' "$err" ||
    fail "$name: max_rel_error $err > 1e-5 against the x86 reference"
}

# coded_run NAME PARITY LAYOUT [bench flags]: every ARM worker computes some.
coded_run() {
  local name=$1 r=$2 layout=$3 i
  shift 3
  local -a before=()
  for i in "${arm[@]}"; do before[i]=$(tasks_of "$i"); done
  env "${coordinator_env[@]}" CDCGEMM_PARITY="$r" CDCGEMM_PARITY_LAYOUT="$layout" \
    timeout 300 "$bench" --plan equal --warmup 1 "$@" --json "$tmp/$name.json" \
    >"$tmp/$name.out" 2>"$tmp/$name.err"
  check_run "$name" $? "${#arm[@]}" 0
  for i in "${arm[@]}"; do
    local after
    after=$(tasks_of "$i")
    [ -n "${before[i]}" ] && [ -n "$after" ] || fail "$name: no status from ${names[i]}"
    [ "$after" -gt "${before[i]}" ] ||
      fail "$name: ${names[i]} (${archs[i]}) computed nothing (tasks ${before[i]} -> $after)"
  done
  pass "$name (r = $r, $layout): x86 coordinator, every ARM worker computed some"
}

coded_run r1-rotated 1 rotated "${LAYERS[@]}" --requests 4
coded_run r1-dedicated 1 dedicated "${LAYERS[@]}" --requests 4
coded_run r2-rotated 2 rotated "${LAYERS[@]}" --requests 4
coded_run r2-dedicated 2 dedicated "${LAYERS[@]}" --requests 4
coded_run r1-spatial 1 rotated --layer conv:8x16x16:16:3:1:1 --split spatial --requests 4

# ---- an armhf (else the last) worker SIGKILLed mid-run -------------------------------
victim=${arm[${#arm[@]}-1]}
before=$(tasks_of "$victim")
env "${coordinator_env[@]}" CDCGEMM_PARITY=1 CDCGEMM_PARITY_LAYOUT=rotated \
  timeout 300 "$bench" --plan equal --warmup 1 "${LAYERS[@]}" --requests 300 \
  --json "$tmp/kill.json" >"$tmp/kill.out" 2>"$tmp/kill.err" &
bench_pid=$!
pids+=("$bench_pid")
deadline=$(( $(date +%s) + 120 ))
until [ "$(tasks_of "$victim")" -ge $(( before + 6 )) ] 2>/dev/null; do
  kill -0 "$bench_pid" 2>/dev/null || fail "kill: the run ended before ${names[victim]} computed 6 tasks"
  [ "$(date +%s)" -lt "$deadline" ] || fail "kill: ${names[victim]} computed < 6 tasks in 120 s"
  sleep 0.5
done
kill -KILL "${wpid[victim]}"
kill -0 "$bench_pid" 2>/dev/null || fail "kill: the run ended before the kill (too fast to test)"
wait "$bench_pid"
check_run kill $? "${#arm[@]}" 0
deaths=$(json "$tmp/kill.json" worker_deaths)
[ "$deaths" -ge 1 ] || fail "kill: worker_deaths $deaths, the SIGKILL went unseen"
pass "kill: ${names[victim]} (${archs[victim]}) SIGKILLed mid-run, deaths $deaths, nothing lost"
start_worker "$victim"

# ---- the BLAS drop-in on the ARM workers ----------------------------------------------
out=$(env "${coordinator_env[@]}" CDCGEMM_LOG=warn CDCGEMM_PARITY=1 CDCGEMM_MIN_FLOPS=0 \
  CDCGEMM_STATS="$tmp/blas.json" LD_PRELOAD="$library" timeout 300 "$blas_client" 2>"$tmp/blas.err")
status=$?
echo "  $out"
[ "$status" = 0 ] || fail "blas_client: exit status $status: $(tail -n 3 "$tmp/blas.err")"
case $out in *result=PASS*) ;; *) fail "blas_client: $out" ;; esac
coded=$(json "$tmp/blas.json" coded_calls)
[ -n "$coded" ] && [ "$coded" -ge 1 ] || fail "blas_client: no coded call ($(cat "$tmp/blas.json"))"
pass "BLAS drop-in: cblas_sgemm/sgemm_ on the ARM workers, $coded coded calls, checked in double"

# ---- requests a 32-bit worker cannot hold -----------------------------------------------
for i in "${arm[@]}"; do
  timeout 200 "$probe" "${endpoints[i]}" "$tmp/co_secret" "$tmp/${names[i]}" >"$tmp/probe.out" 2>&1 ||
    fail "probe of ${names[i]}: $(cat "$tmp/probe.out")"
  sed 's/^/  /' "$tmp/probe.out"
  grep -q "^ERROR -10 .*TASK_GEMM: a = 1048576 x 1048576 floats exceeds 268435456" "$tmp/probe.out" ||
    fail "probe of ${names[i]}: 4 TiB operands not refused naming the limit"
  grep -q "^ERROR -[0-9]* TASK_GEMM refused: it needs 1073741824 bytes.*--max-task-memory" \
    "$tmp/probe.out" || fail "probe of ${names[i]}: a 1 GiB result not refused naming the limit"
  bits32=$(grep -c "a 32-bit worker" "$tmp/probe.out")
  [ "${archs[i]}" = armhf ] && [ "$bits32" = 0 ] && fail "probe: ${names[i]} does not say it is 32-bit"
  [ "${archs[i]}" != armhf ] && [ "$bits32" != 0 ] && fail "probe: ${names[i]} says it is 32-bit"
  [ "$(grep -c "^PONG" "$tmp/probe.out")" = 2 ] || fail "probe of ${names[i]}: no PONG after"
done
pass "oversized requests refused with the limit named by every ARM worker, 32-bit ones saying so"

# ---- the arm64 coordinator, once, against x86 workers ------------------------------
case " $arches " in *" arm64 "*)
  read -r -a xfree <<<"$(free_ports 3)"
  first=${#names[@]}
  for k in 0 1 2; do add_worker "x86-$k" x86 "${xfree[k]}" "$tmp/x86workers"; done
  x86_endpoints=$(IFS=,; echo "${endpoints[*]:first:3}")
  env CDCGEMM_CURVE_SECRET="$tmp/co_secret" CDCGEMM_CURVE_SERVER="$tmp/x86workers" \
    CDCGEMM_WORKERS="$x86_endpoints" CDCGEMM_PLAN=equal CDCGEMM_PARITY=1 CDCGEMM_LOG=info \
    CDCGEMM_TIMEOUT_MS=60000 timeout 300 \
    "$(qemu_of arm64)" -L "${prefix[arm64]}" "$build/cross-arm64/cdcgemm-bench" \
    --plan equal --warmup 1 "${LAYERS[@]}" --requests 3 --json "$tmp/arm64-coordinator.json" \
    >"$tmp/arm64-coordinator.out" 2>"$tmp/arm64-coordinator.err"
  check_run arm64-coordinator $? 3 0
  pass "arm64 coordinator under qemu against 3 x86 workers"
  ;;
esac
echo "cross_interop: passed in $(( $(date +%s) - started )) s"
