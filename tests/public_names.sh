#!/bin/sh
# public_names.sh - a name says public or private: a function defined in the
# library's sources (src/, codes/, transport/) whose name is cdc_ and a letter
# must be declared in include/ (everything else is cdc__), and libcdcgemm.so
# exports exactly the public header's functions and the BLAS entry points.
#
# usage: tests/public_names.sh SOURCE_DIR LIBCDCGEMM_SO
# Exit status: 0 when both hold, 1 naming every offender.
src=${1:?usage: public_names.sh SOURCE_DIR LIBCDCGEMM_SO}
lib=${2:?}
status=0
public=$(mktemp) || exit 1
trap 'rm -f "$public"' EXIT INT TERM

grep -ohE '\bcdc_[a-z][a-z0-9_]*[[:space:]]*\(' "$src"/include/*.h |
  sed 's/[[:space:]]*($//' | sort -u >"$public"

# Definitions start at column 0 (the project's style): a return type, the
# name, "(", on one line, not static.
for name in $(find "$src"/src "$src"/codes "$src"/transport -name '*.c' -exec \
                grep -hE '^[a-z_][a-z0-9_ *]*\bcdc_[a-z][a-z0-9_]*\(' {} + |
              grep -v '^static' | grep -oE 'cdc_[a-z][a-z0-9_]*\(' | sed 's/($//' | sort -u); do
  if ! grep -qx "$name" "$public"; then
    echo "private function with a public name: $name (call it cdc__${name#cdc_})"
    status=1
  fi
done

# The exports: the header's functions and the BLAS entry points, nothing else.
blas='cblas_sgemm sgemm_ sgemm SGEMM cblas_sgemv sgemv_ sgemv SGEMV'
for sym in $(nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "W" {print $3}'); do
  case " $blas " in *" $sym "*) continue ;; esac
  if ! grep -qx "$sym" "$public"; then
    echo "exported but not in include/: $sym"
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "public names: ok"
exit "$status"
