#!/bin/sh
# install_check.sh - install cdcgemm to temporary prefixes and use it from outside.
#
# usage: install_check.sh SOURCE_DIR BUILD_DIR LIBDIR BLAS_CLIENT [CMAKE] [CC]
#
# For two layouts, BUILD_DIR's own (CMAKE_INSTALL_LIBDIR = LIBDIR) and the
# other of lib and lib/<multiarch> (a second, library-only build of SOURCE_DIR
# kept under BUILD_DIR/install-check-*, so reruns are incremental):
#   - cmake --install to a fresh prefix; the files, SONAME and exports in place;
#   - tests/install/consumer.c built with pkg-config and with find_package,
#     each run in process and on the installed cdcgemm-worker found from the
#     installed library (PATH holds neither the build tree nor the prefix);
#   - BLAS_CLIENT (linked against OpenBLAS only) run with the installed library
#     LD_PRELOADed: its result and its CDCGEMM_STATS counters.
# Exit 0: all passed; 1: a check failed; 77: a needed tool is missing.
set -eu
if [ $# -lt 4 ]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR LIBDIR BLAS_CLIENT [CMAKE] [CC]" >&2
  exit 2
fi
src=$1 build=$2 libdir=$3 blas_client=$4 cmake=${5:-cmake} cc=${6:-cc}
for tool in "$cmake" "$cc" pkg-config nm objdump; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIPPED: $tool not found"; exit 77; }
done

# Nothing from the caller's environment may help: no CDCGEMM_* settings, no
# preload, and a PATH without the build tree.
for var in $(env | sed -n 's/^\(CDCGEMM_[A-Z_]*\)=.*/\1/p'); do unset "$var"; done
# The equal plan: the checks below count calls served by the workers, and the
# adaptive default computes these small calls here, on this host faster.
export CDCGEMM_PLAN=equal
unset LD_PRELOAD LD_LIBRARY_PATH
version=$(sed -n 's/^#define CDC_VERSION_STRING "\(.*\)"$/\1/p' "$build/include/cdcgemm_version.h")
[ -n "$version" ] || { echo "FAIL: no version in $build/include/cdcgemm_version.h"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/cdcgemm-install.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
# The programs run with this PATH: first a decoy cdcgemm-worker that fails at
# once, so a library that looked on PATH instead of in its own prefix fails.
mkdir "$work/decoy"
printf '#!/bin/sh\necho "decoy cdcgemm-worker: found on PATH, not in the prefix" >&2\nexit 3\n' \
  >"$work/decoy/cdcgemm-worker"
chmod +x "$work/decoy/cdcgemm-worker"
clean_path=$work/decoy:/usr/bin:/bin
failed=0
check() { # DESCRIPTION COMMAND...: run it, report, count failures
  what=$1
  shift
  if "$@" >"$work/out" 2>&1; then
    echo "ok: $what"
  else
    echo "FAIL: $what"
    sed 's/^/    /' "$work/out"
    failed=$((failed + 1))
  fi
}

# run_spawning LOG COMMAND...: run with worker processes spawned by the
# library (CDCGEMM_IN_PROCESS=0) and the decoy PATH; at --log info the workers
# say when they stop, which shows that worker processes did the work.
run_spawning() {
  log=$1
  shift
  env PATH="$clean_path" CDCGEMM_IN_PROCESS=0 CDCGEMM_LOCAL_WORKERS=5 CDCGEMM_LOG=info \
    "$@" 2>"$log" || { cat "$log"; return 1; }
  stopped=$(grep -c 'cdcgemm-worker [0-9]*: stopped' "$log" || true)
  [ "$stopped" -ge 1 ] || { echo "no worker process reported"; cat "$log"; return 1; }
  echo "$stopped worker processes served"
}

# preload_blas LIBRARY STATS: BLAS_CLIENT with LIBRARY preloaded on spawned
# workers: its own check passes, and its CDCGEMM_STATS show every call coded.
preload_blas() {
  run_spawning "$work/preload.log" env LD_PRELOAD="$1" CDCGEMM_MIN_FLOPS=0 \
    CDCGEMM_PARITY=1 "$src/tests/run_blas_program.sh" "$2" \
    "coded_calls=@calls" "coded_calls>=1" "shards_sent>=5" -- "$blas_client" \
    >"$work/preload.out" || { cat "$work/preload.out"; return 1; }
  cat "$work/preload.out"
  grep -q 'result=PASS' "$work/preload.out"
}

check_prefix() { # TAG PREFIX LIBDIR
  tag=$1 prefix=$2 ld=$3
  lib=$prefix/$ld
  echo "== $tag: $prefix (libdir $ld)"
  for f in "$lib/libcdcgemm.so" "$lib/libcdcgemm.so.${version%%.*}" "$lib/libcdcgemm.so.$version" \
           "$prefix/include/cdcgemm.h" "$prefix/include/cdcgemm_testing.h" \
           "$prefix/include/cdcgemm_version.h" "$prefix/bin/cdcgemm-worker" \
           "$prefix/bin/cdcgemm-bench" "$prefix/bin/cdcgemm-keygen" "$prefix/bin/cdcgemm-llm" \
           "$lib/pkgconfig/cdcgemm.pc" \
           "$lib/cmake/cdcgemm/cdcgemmConfig.cmake" \
           "$lib/cmake/cdcgemm/cdcgemmConfigVersion.cmake" \
           "$prefix/lib/systemd/system/cdcgemm-worker@.service" \
           "$prefix/share/doc/cdcgemm/worker.env.example" "$prefix/share/doc/cdcgemm/deploy.md"; do
    check "installed ${f#"$prefix"/}" test -e "$f"
  done
  check "cdcgemm-worker@.service runs the installed worker" \
    grep -q "^ExecStart=$prefix/bin/cdcgemm-worker " "$prefix/lib/systemd/system/cdcgemm-worker@.service"
  check "SONAME libcdcgemm.so.${version%%.*}" \
    sh -c "objdump -p '$lib/libcdcgemm.so' | grep -q 'SONAME *libcdcgemm.so.${version%%.*}\$'"
  for sym in cdc_version cdc_context_new cdc_context_erase_next cblas_sgemm sgemm_; do
    check "exports $sym" sh -c "nm -D --defined-only '$lib/libcdcgemm.so' | grep -q ' $sym\$'"
  done
  check "no internal symbols exported" \
    sh -c "! nm -D --defined-only '$lib/libcdcgemm.so' | grep -q ' cdc__'"
  check "cdcgemm-worker --version" sh -c "'$prefix/bin/cdcgemm-worker' --version |
    grep -q 'cdcgemm-worker $version (library $version, protocol [0-9]*)'"

  # pkg-config
  export PKG_CONFIG_PATH="$lib/pkgconfig"
  check "pkg-config --modversion = $version" test "$(pkg-config --modversion cdcgemm)" = "$version"
  # (Requires.private adds its packages' include directories after ours.)
  check "pkg-config --cflags: the prefix first, no source or build tree" sh -c \
    "pkg-config --cflags cdcgemm | grep -q '^-I$prefix/include' &&
     ! pkg-config --cflags cdcgemm | grep -q -e '$src' -e '$build'"
  check "pkg-config --libs" test "$(pkg-config --libs cdcgemm | sed 's/ *$//')" = "-L$lib -lcdcgemm"
  check "pkg-config --static --libs has the private dependencies" sh -c \
    "pkg-config --static --libs cdcgemm | tr ' ' '\n' | grep -qx -- -lzmq &&
     pkg-config --static --libs cdcgemm | tr ' ' '\n' | grep -qx -- -lczmq &&
     pkg-config --static --libs cdcgemm | tr ' ' '\n' | grep -qx -- -lopenblas"
  # shellcheck disable=SC2046 # word splitting of pkg-config's output is wanted
  check "consumer built with pkg-config" "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror \
    $(pkg-config --cflags cdcgemm) "$src/tests/install/consumer.c" \
    -o "$work/consumer-pc-$tag" $(pkg-config --libs cdcgemm) -lm
  unset PKG_CONFIG_PATH
  check "pkg-config consumer, in process" env PATH="$clean_path" LD_LIBRARY_PATH="$lib" \
    CDCGEMM_IN_PROCESS=1 "$work/consumer-pc-$tag"
  check "pkg-config consumer, installed workers" run_spawning "$work/pc.log" \
    env LD_LIBRARY_PATH="$lib" "$work/consumer-pc-$tag"

  # find_package(cdcgemm CONFIG)
  check "consumer configured with find_package" "$cmake" -S "$src/tests/install" \
    -B "$work/consumer-cmake-$tag" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCDCGEMM_EXPECT_PREFIX="$prefix" -DCMAKE_C_COMPILER="$cc"
  check "consumer built with find_package" "$cmake" --build "$work/consumer-cmake-$tag"
  check "find_package consumer, in process" env PATH="$clean_path" CDCGEMM_IN_PROCESS=1 \
    "$work/consumer-cmake-$tag/consumer"
  check "find_package consumer, installed workers" run_spawning \
    "$work/cmake.log" "$work/consumer-cmake-$tag/consumer"

  # An unmodified OpenBLAS program, the installed library preloaded.
  check "LD_PRELOAD BLAS program, installed workers: result and stats" \
    preload_blas "$lib/libcdcgemm.so.${version%%.*}" "$work/preload-$tag.json"
}

# 1. This build's layout.
check "cmake --install (libdir $libdir)" "$cmake" --install "$build" --prefix "$work/prefix-a"
check_prefix build "$work/prefix-a" "$libdir"

# 2. The other layout, from a second build of the library and binaries only.
if [ "$libdir" = lib ]; then
  multiarch=$("$cc" -print-multiarch 2>/dev/null || true)
  other=lib/${multiarch:-x86_64-linux-gnu}
else
  other=lib
fi
other_build=$build/install-check-$(printf '%s' "$other" | tr '/' '-')
check "configure with CMAKE_INSTALL_LIBDIR=$other" "$cmake" -S "$src" -B "$other_build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF -DCMAKE_INSTALL_LIBDIR="$other" \
  -DCMAKE_C_COMPILER="$cc"
check "build (libdir $other)" "$cmake" --build "$other_build" -j2 --target cdcgemm \
  cdcgemm-worker cdcgemm-bench cdcgemm-keygen cdcgemm-llm
check "cmake --install (libdir $other)" "$cmake" --install "$other_build" --prefix "$work/prefix-b"
check_prefix other "$work/prefix-b" "$other"

if [ "$failed" -ne 0 ]; then
  echo "$failed check(s) failed"
  exit 1
fi
echo "all install checks passed"
