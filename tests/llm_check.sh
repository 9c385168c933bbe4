#!/bin/sh
# llm_check.sh - cdcgemm-llm against its reference (ctest llm_check).
#
# usage: llm_check.sh CDCGEMM_LLM
#
# Small Llama models (dim 64, 2 layers, 4 heads over 2 kv heads, one with an
# unshared classifier) written by --random, then generated from; every run's
# logits are checked by the tool's own teacher-forced reference (a process of
# its own), and the JSON of the contract (docs/llm.md) is read back:
#   1. in this process (CDCGEMM_IN_PROCESS=1): the check holds, every field;
#   2. on 5 worker processes (r = 1), worker 2 crashing at its 60th task:
#      the check holds, the death counted, nothing computed here, and the
#      same tokens as in process (greedy decoding is deterministic);
#   3. churn: 6 workers, one SIGKILLed every 0.8 s and one SIGSTOPped for
#      150 ms every 0.5 s (--chaos), with --baseline uncoded: a list of two
#      runs, the coded one losing no token, both checked, the chaos in the
#      JSON, every step in the CSV, the latency plot a PNG;
#   4. the check can fail: with the library's verification off, a worker
#      corrupting every result makes the reference see wrong logits (exit 1);
#      with it on (the default), the same run is right;
#   5. a text prompt: a llama2.c tokenizer.bin written here (the 259
#      reserved ids, then pieces whose merges spell "hello"), --prompt
#      encoded by it (BOS, " hello", the bytes of "!" and of "é"), the run
#      checked, its prompt printed back as the text and its tokens as text;
#   6. bad input refused with the reason: a prompt and tokens past seq_len,
#      a truncated checkpoint, an unknown option, a --random spec missing a
#      key, an unknown --baseline and a bad --chaos; --prompt without a
#      tokenizer, or too long for seq_len; a tokenizer of another vocab;
#   7. PyTorch takes the same greedy tokens as the runs of 1 and 3, from the
#      checkpoint alone (tests/llm_torch_check.py): the tool's own reference
#      shares its decoder, this one shares nothing (skipped, and said so,
#      where PyTorch is not installed: the README's set-up does not install
#      it, .ci/run does).
# Exit 0: passed; 1: failed.
set -u
llm=${1:?usage: llm_check.sh CDCGEMM_LLM}
for var in $(env | sed -n 's/^\(CDCGEMM_[A-Z_]*\)=.*/\1/p'); do unset "$var"; done
# The equal plan: the checks below count calls served by the workers, and the
# adaptive default computes these small calls here, on this host faster.
export CDCGEMM_PLAN=equal
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cdcgemm-llm.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# A field of the first run ("label": FIRST) or the second (SECOND) in a JSON file.
field() { # NAME FILE [RUN]
  python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[2]))
runs = d if isinstance(d, list) else [d]
run = runs[int(sys.argv[3]) if len(sys.argv) > 3 else 0]
v = run.get(sys.argv[1], run.get("counters", {}).get(sys.argv[1]))
print(json.dumps(v) if isinstance(v, (dict, list, bool)) else v)
EOF
}
tokens_of() { sed -n 's/^  tokens://p' "$1" | head -n 1; }
# The fields a checked, complete run has: N tokens, none lost, the check held.
checked() { # FILE RUN TOKENS
  [ "$(field tokens "$1" "$2")" = "$3" ] && [ "$(field lost_tokens "$1" "$2")" = 0 ] &&
    [ "$(field tokens_match "$1" "$2")" = true ] && [ "$(field checked "$1" "$2")" = true ] &&
    python3 -c "import sys; sys.exit(not float(sys.argv[1]) <= 1e-4)" \
      "$(field max_rel_logit_error "$1" "$2")"
}

"$llm" --random dim=64,hidden=176,layers=2,heads=4,kv_heads=2,vocab=300,seq=64,shared=0 \
  --save "$tmp/model.bin" --seed 7 >"$tmp/write.log" 2>&1 &&
  "$llm" --random dim=64,hidden=176,layers=2,heads=4,kv_heads=2,vocab=300,seq=512 \
    --save "$tmp/long.bin" --seed 8 >>"$tmp/write.log" 2>&1 ||
  { cat "$tmp/write.log"; echo "FAIL: --random"; exit 1; }

# 1. In process.
if CDCGEMM_IN_PROCESS=1 timeout 120 "$llm" --model "$tmp/model.bin" --prompt-tokens 8 \
    --tokens 24 --json "$tmp/in.json" >"$tmp/in.log" 2>&1 && checked "$tmp/in.json" 0 24 &&
  [ "$(field label "$tmp/in.json")" = coded ] &&
  [ "$(field weight_bytes "$tmp/in.json")" = 445440 ] &&
  [ "$(field coordinator_rss_kib "$tmp/in.json")" -gt 0 ] &&
  [ "$(field near_ties "$tmp/in.json")" -ge 0 ]; then
  pass "in process: $(grep 'check:' "$tmp/in.log")"
else
  fail "in process"
  cat "$tmp/in.log" "$tmp/in.json"
fi

# 2. Worker processes, one crashing.
if timeout 120 "$llm" --model "$tmp/model.bin" --prompt-tokens 8 --tokens 24 --workers 5 \
    --parity 1 --faults 'crash@w2:after=60' --json "$tmp/workers.json" >"$tmp/workers.log" 2>&1 &&
  checked "$tmp/workers.json" 0 24 && [ "$(field worker_deaths "$tmp/workers.json")" -ge 1 ] &&
  [ "$(field fallbacks "$tmp/workers.json")" = 0 ] &&
  [ "$(field parity "$tmp/workers.json")" = 1 ]; then
  pass "5 workers, w2 crashed: $(grep 'check:' "$tmp/workers.log")"
else
  fail "5 workers, one crashing"
  cat "$tmp/workers.log"
fi
if [ -n "$(tokens_of "$tmp/in.log")" ] &&
  [ "$(tokens_of "$tmp/in.log")" = "$(tokens_of "$tmp/workers.log")" ]; then
  pass "the same tokens in process and on the workers"
else
  fail "the tokens differ: $(tokens_of "$tmp/in.log") / $(tokens_of "$tmp/workers.log")"
fi

# 3. Churn, beside the uncoded baseline.
if timeout 240 "$llm" --model "$tmp/long.bin" --prompt-tokens 8 --tokens 400 --workers 6 \
    --parity 1 --faults 'slow@*:gflops=1' \
    --chaos 'kill@random:every=800ms;stop@random:every=500ms,for=150ms;seed=3' \
    --baseline uncoded --json "$tmp/churn.json" --csv "$tmp/churn.csv" --plot "$tmp/churn.png" \
    >"$tmp/churn.log" 2>&1 &&
  checked "$tmp/churn.json" 0 400 && [ "$(field label "$tmp/churn.json" 1)" = uncoded ] &&
  [ "$(field parity "$tmp/churn.json" 1)" = 0 ] &&
  [ "$(field tokens_match "$tmp/churn.json" 1)" = true ] &&
  [ "$(field chaos_events "$tmp/churn.json")" -ge 2 ] &&
  [ "$(field worker_deaths "$tmp/churn.json")" -ge 1 ] &&
  [ "$(grep -c '^coded,' "$tmp/churn.csv")" = 400 ] &&
  [ "$(grep -c '^uncoded,' "$tmp/churn.csv")" = "$(field tokens "$tmp/churn.json" 1)" ] &&
  [ "$(head -c 4 "$tmp/churn.png" | od -An -c | tr -d ' ')" = "211PNG" ]; then
  pass "churn, coded: $(sed -n 's/^coded //p' "$tmp/churn.log")"
  pass "churn, uncoded: $(sed -n 's/^uncoded //p' "$tmp/churn.log")"
else
  fail "churn"
  grep -v "^cdcgemm warn" "$tmp/churn.log"
fi


# 4. The check sees corruption the library was told not to look for.
CDCGEMM_VERIFY=0 timeout 120 "$llm" --model "$tmp/model.bin" --prompt-tokens 8 --tokens 24 \
  --workers 5 --faults 'corrupt@w1:p=1' --json "$tmp/corrupt.json" >"$tmp/corrupt.log" 2>&1
status=$?
if [ $status = 1 ] && grep -q "mismatches: FAIL" "$tmp/corrupt.log" &&
  [ "$(field tokens_match "$tmp/corrupt.json")" = false ]; then
  pass "verification off, a corrupting worker: exit 1, $(grep 'check:' "$tmp/corrupt.log")"
else
  fail "verification off, a corrupting worker: exit $status"
  cat "$tmp/corrupt.log"
fi
if timeout 120 "$llm" --model "$tmp/model.bin" --prompt-tokens 8 --tokens 24 --workers 5 \
    --faults 'corrupt@w1:p=1' --json "$tmp/verified.json" >"$tmp/verified.log" 2>&1 &&
  checked "$tmp/verified.json" 0 24 &&
  [ "$(field corrupt_detected "$tmp/verified.json")" -ge 1 ]; then
  pass "verification on (the default), a corrupting worker: $(grep 'check:' "$tmp/verified.log")"
else
  fail "verification on, a corrupting worker"
  grep -v "^cdcgemm warn" "$tmp/verified.log"
fi

# 5. A text prompt through a tokenizer.bin (llama2.c's format) of the
#    model's 300 tokens.
tokenizer() { # PATH TOKENS
  python3 - "$1" "$2" <<'EOF'
import struct, sys
pieces = [("<unk>", 0), ("\n<s>\n", 0), ("\n</s>\n", 0)]
pieces += [("<0x%02X>" % b, 0) for b in range(256)]
pieces += [(" ", 0), ("h", 0), ("e", 0), ("l", 0), ("o", 0), ("he", 10), ("ll", 9),
           ("llo", 8), (" he", 7), (" hello", 5)]
pieces += [("w%d" % i, -1) for i in range(int(sys.argv[2]) - len(pieces))]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<i", 8))
    for piece, score in pieces:
        data = piece.encode()
        f.write(struct.pack("<fi", score, len(data)) + data)
EOF
}
tokenizer "$tmp/tokenizer.bin" 300 && tokenizer "$tmp/tokenizer-299.bin" 299
if CDCGEMM_IN_PROCESS=1 timeout 120 "$llm" --model "$tmp/model.bin" --tokenizer \
    "$tmp/tokenizer.bin" --prompt "hello!é" --tokens 8 --json "$tmp/text.json" \
    >"$tmp/text.log" 2>&1 && checked "$tmp/text.json" 0 8 &&
  [ "$(field prompt_tokens "$tmp/text.json")" = 5 ] &&
  grep -qx '  prompt: "hello!\\xc3\\xa9"' "$tmp/text.log" && grep -q '^  text:   "' "$tmp/text.log"
then
  pass "a text prompt: $(grep 'prompt:' "$tmp/text.log")"
else
  fail "a text prompt"
  cat "$tmp/text.log"
fi

# 6. Bad input.
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
  env CDCGEMM_IN_PROCESS=1 "$llm" --model "$tmp/model.bin" --prompt-tokens 40 --tokens 30
head -c 100000 "$tmp/model.bin" >"$tmp/short.bin"
expect 1 "100000 bytes, the header implies" "a truncated checkpoint" \
  env CDCGEMM_IN_PROCESS=1 "$llm" --model "$tmp/short.bin"
expect 2 "needs --tokenizer" "--prompt without a tokenizer" \
  env CDCGEMM_IN_PROCESS=1 "$llm" --model "$tmp/model.bin" --prompt "hello"
expect 2 "more than the 2 that fit with --tokens 62" "a text prompt past seq_len" \
  env CDCGEMM_IN_PROCESS=1 "$llm" --model "$tmp/model.bin" --tokenizer "$tmp/tokenizer.bin" \
  --prompt "hello hello" --tokens 62
expect 1 "fewer tokens than the model's vocab" "a tokenizer of 299 tokens for 300" \
  env CDCGEMM_IN_PROCESS=1 "$llm" --model "$tmp/model.bin" --tokenizer "$tmp/tokenizer-299.bin"
expect 2 "unknown option '--bogus'" "an unknown option" "$llm" --model "$tmp/model.bin" --bogus 1
expect 2 "seq= missing" "a --random spec without seq" \
  "$llm" --random dim=64,hidden=176,layers=2,heads=4,vocab=300 --save "$tmp/x.bin"
expect 2 "expected uncoded" "an unknown baseline" \
  "$llm" --model "$tmp/model.bin" --baseline replicate
expect 2 "chaos" "a bad --chaos" "$llm" --model "$tmp/model.bin" --chaos 'kill@w1:every=fast'

# 7. PyTorch agrees (tests/llm_torch_check.py: the checkpoint run in float64
#    by PyTorch, teacher-forced): the in-process run (GQA, an unshared
#    classifier) and the churn run's 400 tokens (a shared one, attention over
#    up to 407 positions).
torch_check=$(dirname "$0")/llm_torch_check.py
for run in in churn; do
  model=$tmp/model.bin
  [ $run = churn ] && model=$tmp/long.bin
  /usr/bin/python3 "$torch_check" "$model" "$tmp/$run.json" >"$tmp/torch-$run.log" 2>&1
  case $? in
    0) pass "PyTorch, $run: $(cat "$tmp/torch-$run.log")" ;;
    77) echo "skip: PyTorch, $run: $(cat "$tmp/torch-$run.log")" ;;
    *) fail "PyTorch, $run: $(cat "$tmp/torch-$run.log")" ;;
  esac
done

[ $failures = 0 ] && echo "PASS" || echo "FAILED: $failures"
[ $failures = 0 ]
