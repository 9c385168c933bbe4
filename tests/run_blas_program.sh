#!/bin/sh
# run_blas_program.sh - run a BLAS program with CDCGEMM_STATS set and check its counters.
#
# usage: run_blas_program.sh STATS_FILE EXPECTATION... -- PROGRAM [ARGS...]
# The program must exit 0 (77: skipped, passed on). Each EXPECTATION is one of
#   absent          no stats file was written (no context was ever created)
#   FIELD=VALUE     the JSON counter FIELD equals VALUE
#   FIELD>=VALUE    the JSON counter FIELD is at least VALUE
# where VALUE is a number or @KEY, the KEY=NUMBER the program printed.
set -u
stats=$1
shift
expectations=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  expectations="$expectations $1"
  shift
done
[ $# -gt 1 ] || { echo "usage: $0 STATS EXPECT... -- PROGRAM [ARGS]" >&2; exit 2; }
shift
rm -f "$stats" "$stats".*
output=$(CDCGEMM_STATS="$stats" "$@")
rc=$?
printf '%s\n' "$output"
if [ "$rc" -eq 77 ]; then
  echo "SKIPPED: $1 says it cannot run here"
  exit 77
fi
if [ "$rc" -ne 0 ]; then
  echo "FAIL: $1 exited with status $rc"
  exit 1
fi
[ -f "$stats" ] && echo "stats: $(cat "$stats")"

status=0
for expectation in $expectations; do
  if [ "$expectation" = absent ]; then
    if [ -e "$stats" ]; then
      echo "FAIL: $stats exists: a context was created"
      status=1
    else
      echo "ok: no context was created"
    fi
    continue
  fi
  case "$expectation" in
    *">="*) field=${expectation%%>=*}; want=${expectation#*>=}; op=ge ;;
    *"="*) field=${expectation%%=*}; want=${expectation#*=}; op=eq ;;
    *) echo "bad expectation '$expectation'"; exit 2 ;;
  esac
  case "$want" in
    @*) key=${want#@}
        want=$(printf '%s\n' "$output" | tr ' ' '\n' |
               sed -n "s/^$key=\([0-9][0-9]*\)$/\1/p" | tail -n 1) ;;
  esac
  got=$(sed -n "s/.*\"$field\": \([0-9][0-9]*\).*/\1/p" "$stats" 2>/dev/null)
  if [ -z "$want" ] || [ -z "$got" ]; then
    echo "FAIL: $expectation: counter '$field' = '${got}', expected '${want}'"
    status=1
  elif [ "$got" -"$op" "$want" ]; then
    echo "ok: $field = $got ($op $want)"
  else
    echo "FAIL: $field = $got, expected $op $want"
    status=1
  fi
done
exit $status
