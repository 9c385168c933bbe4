#!/bin/sh
# run_reference_blas.sh - the reference BLAS tests (Debian libblas-test) of SGEMM
# (level 3) or SGEMV (level 2) only, with libcdcgemm LD_PRELOADed and every call
# on the coded path.
#
# usage: run_reference_blas.sh LIB fortran|cblas|alternative [sgemm|sgemv]
#   fortran:     xblat3s < sblat3.in (xblat2s < sblat2.in) with LIB (libcdcgemm.so)
#                preloaded (sgemm_, sgemv_; error exits reach the program's XERBLA)
#   cblas:       xscblat3 < sin3 (xscblat2 < sin2) with LIB preloaded (cblas_sgemm,
#                cblas_sgemv, row- and column-major; error exits reach the
#                program's cblas_xerbla with reference CBLAS numbering)
#   alternative: xblat3s < sblat3.in, nothing preloaded, LIB = the directory of
#                the libblas.so.3 that stands in for the system BLAS (sgemm)
# Exit 0 when the routine passed the computational and the error-exit tests and
# the coded path ran; 77 (skipped) when libblas-test is not installed.
set -u
lib=$1
mode=$2
routine=${3:-sgemm}
dir=/usr/lib/x86_64-linux-gnu/blas
case "$mode/$routine" in
  fortran/sgemm|alternative/sgemm)
    prog=$dir/xblat3s; input=$dir/sblat3.in; name=SGEMM; summary_file=sblat3.out; passes=1 ;;
  fortran/sgemv)
    prog=$dir/xblat2s; input=$dir/sblat2.in; name=SGEMV; summary_file=sblat2.out; passes=1 ;;
  cblas/sgemm) prog=$dir/xscblat3; input=$dir/sin3; name=cblas_sgemm; passes=2 ;;
  cblas/sgemv) prog=$dir/xscblat2; input=$dir/sin2; name=cblas_sgemv; passes=2 ;;
  *) echo "usage: $0 LIB fortran|cblas|alternative [sgemm|sgemv]" >&2; exit 2 ;;
esac
if [ ! -x "$prog" ] || [ ! -f "$input" ]; then
  echo "SKIPPED: $prog or $input is absent (apt-get install libblas-test)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/cdc_xblat3s.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2

# Keep only the routine's line set to T (the name is a fixed-width field: A6
# for the Fortran tests, A12 for the CBLAS tests; the flag follows it).
if [ "$mode" != cblas ]; then
  sed -e "/^S[A-Z0-9 ]\\{5\\} T/{/^$name /!s/^\\(......\\) T/\\1 F/;}" "$input" > test.in
else
  sed -e "/^cblas_/{/^$name /!s/^\\(............\\) T/\\1 F/;}" "$input" > test.in
fi

# xscblat3 and xscblat2 need the reference CBLAS's RowMajorStrg: run it on the netlib
# libblas.so.3 of the same package (OpenBLAS lacks that symbol).
libpath=${LD_LIBRARY_PATH:-}
preload=$lib
[ "$mode" = cblas ] && libpath=$dir${libpath:+:$libpath}
if [ "$mode" = alternative ]; then
  libpath=$lib${libpath:+:$libpath}
  preload=
fi
# Shards run in process (CDCGEMM_IN_PROCESS=1, 5 virtual workers): every shard
# arrives, nothing is decoded. With worker processes a late data shard is
# rebuilt from parity, whose float rounding is relative to the sum of all
# blocks, not to the lost block: see docs/drop-in.md ("Accuracy").
# CDCGEMM_IN_PROCESS=0 with CDCGEMM_FAULTS from the caller runs the same test on
# real worker processes with faults (a late or crashed worker's shard rebuilt
# from parity where accurate enough, else computed locally).
env -u CDCGEMM_WORKERS LD_LIBRARY_PATH="$libpath" LD_PRELOAD="$preload" CDCGEMM_MIN_FLOPS=0 \
  CDCGEMM_PARITY=1 CDCGEMM_LOCAL_WORKERS=5 CDCGEMM_IN_PROCESS="${CDCGEMM_IN_PROCESS:-1}" \
  CDCGEMM_FAULTS="${CDCGEMM_FAULTS:-}" CDCGEMM_STATS="$work/stats.json" \
  "$prog" < test.in > stdout.txt 2> stderr.txt
rc=$?
summary=stdout.txt
[ "$mode" != cblas ] && summary=$summary_file
cat "$summary"
[ -s stderr.txt ] && { echo "--- stderr:"; cat stderr.txt; }
echo "--- exit status $rc; stats: $(cat stats.json 2>/dev/null)"

status=0
# Fortran: one computational pass; CBLAS: one column-major, one row-major.
computational=$(grep -c "$name *PASSED THE .*COMPUTATIONAL TESTS" "$summary")
[ "$computational" -eq "$passes" ] ||
  { echo "FAIL: $name passed $computational of $passes computational tests"; status=1; }
grep -q "$name *PASSED THE TESTS OF ERROR-EXITS" "$summary" ||
  { echo "FAIL: $name did not pass the error-exit tests"; status=1; }
if grep -qi "FAIL\|\*\*\*\*\*" "$summary"; then
  echo "FAIL: the summary reports a failure"
  status=1
fi
coded=$(sed -n 's/.*"coded_calls": \([0-9][0-9]*\).*/\1/p' stats.json 2>/dev/null)
if [ -z "$coded" ] || [ "$coded" -lt 1 ]; then
  echo "FAIL: no call went through the coded path (coded_calls = '${coded}')"
  status=1
fi
# With a fault schedule the faults must have bitten: shard results went missing.
erased=$(sed -n 's/.*"shards_erased": \([0-9][0-9]*\).*/\1/p' stats.json 2>/dev/null)
if [ -n "${CDCGEMM_FAULTS:-}" ] && { [ -z "$erased" ] || [ "$erased" -lt 1 ]; }; then
  echo "FAIL: CDCGEMM_FAULTS='$CDCGEMM_FAULTS' but no shard result went missing"
  status=1
fi
[ "$status" -eq 0 ] && echo "PASS: $name (coded_calls = $coded, shards_erased = ${erased:-0})"
exit $status
