#!/bin/sh
# llm_check.sh - cdcgemm-llm against its own reference (ctest llm_check).
#
# usage: llm_check.sh CDCGEMM_LLM
#
# A small Llama model (dim 64, 2 layers, 4 heads over 2 kv heads, an
# unshared classifier) written with seeded weights, then generated from:
#   1. in this process (CDCGEMM_IN_PROCESS=1), --check: every step's logits
#      within 1e-4 of the reference's, the same tokens;
#   2. on 5 local worker processes (r = 1), worker 2 crashing at its 60th
#      task: --check still passes, the death counted, nothing computed here;
#   3. the same tokens in both runs (greedy decoding is deterministic);
#   4. bad input refused with the reason: a prompt and tokens past seq_len
#      (exit 2), a truncated checkpoint (exit 1, both sizes named), an
#      unknown option (exit 2).
# Exit 0: passed; 1: failed.
set -u
llm=${1:?usage: llm_check.sh CDCGEMM_LLM}
for var in $(env | sed -n 's/^\(CDCGEMM_[A-Z_]*\)=.*/\1/p'); do unset "$var"; done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cdcgemm-llm.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
field() { sed -n "s/.*\"$1\": \([0-9.e+-]*\).*/\1/p" "$2"; }

"$llm" write "$tmp/model.bin" --dim 64 --hidden 176 --layers 2 --heads 4 --kv-heads 2 \
  --vocab 300 --seq 64 --unshared --seed 7 >"$tmp/write.log" 2>&1 ||
  { cat "$tmp/write.log"; echo "FAIL: write"; exit 1; }

# 1. In process.
if CDCGEMM_IN_PROCESS=1 timeout 120 "$llm" run "$tmp/model.bin" --prompt-tokens 8 --tokens 24 \
    --check --json "$tmp/in.json" >"$tmp/in.log" 2>&1 &&
  grep -q "0 mismatches: ok" "$tmp/in.log"; then
  pass "in process: $(grep '^check' "$tmp/in.log")"
else
  fail "in process"
  cat "$tmp/in.log"
fi

# 2. Worker processes, one crashing.
if CDCGEMM_LOCAL_WORKERS=5 CDCGEMM_PARITY=1 CDCGEMM_FAULTS='crash@w2:after=60' \
    timeout 120 "$llm" run "$tmp/model.bin" --prompt-tokens 8 --tokens 24 --check \
    --json "$tmp/workers.json" >"$tmp/workers.log" 2>&1 &&
  grep -q "0 mismatches: ok" "$tmp/workers.log" &&
  [ "$(field worker_deaths "$tmp/workers.json")" -ge 1 ] &&
  [ "$(field fallbacks "$tmp/workers.json")" = 0 ]; then
  pass "5 workers, w2 crashed: $(grep '^check' "$tmp/workers.log")"
else
  fail "5 workers, one crashing"
  cat "$tmp/workers.log"
fi

# 3. The same tokens.
if [ -n "$(grep '^tokens:' "$tmp/in.log")" ] &&
  [ "$(grep '^tokens:' "$tmp/in.log")" = "$(grep '^tokens:' "$tmp/workers.log")" ]; then
  pass "the same tokens in process and on the workers"
else
  fail "the tokens differ: $(grep '^tokens:' "$tmp/in.log") / $(grep '^tokens:' "$tmp/workers.log")"
fi

# 4. Bad input.
expect() { # STATUS TEXT DESCRIPTION COMMAND...
  status=$1 text=$2 what=$3
  shift 3
  "$@" >"$tmp/bad.log" 2>&1
  got=$?
  if [ "$got" = "$status" ] && grep -q "$text" "$tmp/bad.log"; then
    pass "$what: $(head -n 1 "$tmp/bad.log")"
  else
    fail "$what: exit $got (wanted $status), output: $(cat "$tmp/bad.log")"
  fi
}
expect 2 "fit the model's seq_len 64" "prompt and tokens past seq_len" \
  env CDCGEMM_IN_PROCESS=1 "$llm" run "$tmp/model.bin" --prompt-tokens 40 --tokens 30
head -c 100000 "$tmp/model.bin" >"$tmp/short.bin"
expect 1 "100000 bytes, the header implies" "a truncated checkpoint" \
  env CDCGEMM_IN_PROCESS=1 "$llm" run "$tmp/short.bin"
expect 2 "unknown option '--bogus'" "an unknown option" "$llm" run "$tmp/model.bin" --bogus 1

[ $failures = 0 ] && echo "PASS" || echo "FAILED: $failures"
[ $failures = 0 ]
