#!/bin/sh
# bench_chaos.sh - cdcgemm-bench --chaos against real worker processes: SIGKILLs
# and SIGSTOPs of embedded workers (the library respawns them), then restarts of
# workers the bench started itself (--external). Each run must lose nothing and
# be right (the bench's exit status 0), and its JSON must hold the events and the
# samples of the bench process.
#
# usage: bench_chaos.sh CDCGEMM_BENCH
set -eu
bench=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-chaos-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "bench_chaos: $*" >&2; exit 1; }

# count FILE ACTION: events of that action in a run's JSON.
count() { grep -c "\"action\": \"$2\"" "$1" || true; }

# The equal plan: every call on the workers (the adaptive default computes
# these small layers here, where they are faster, and would see no chaos).
"$bench" --layer fc:512x512:4 --requests 2500 --workers 4 --plan equal \
  --chaos 'kill@random:every=250ms;stop@w2:every=400ms,for=100ms;seed=3' --crash-at 100 \
  --json "$tmp/embedded.json" >"$tmp/embedded.out" 2>"$tmp/embedded.err" ||
  fail "embedded run: exit status $? ($(tail -n 3 "$tmp/embedded.err"))"
cat "$tmp/embedded.out"
[ "$(count "$tmp/embedded.json" kill)" -ge 1 ] || fail "embedded run: no kill in the JSON"
[ "$(count "$tmp/embedded.json" stop)" -ge 1 ] || fail "embedded run: no stop in the JSON"
[ "$(count "$tmp/embedded.json" crash)" = 1 ] || fail "embedded run: the --crash-at fault is not an event"
grep -q '"samples": \[' "$tmp/embedded.json" || fail "embedded run: no samples"
[ "$(grep -c '"rss_kib": ' "$tmp/embedded.json")" = 4 ] ||
  fail "embedded run: expected 4 samples (start, 1,000, 2,000, end)"

"$bench" --layer fc:512x512:4 --requests 1500 --external 4 --plan equal \
  --chaos 'restart@random:every=300ms;seed=5' \
  --json "$tmp/external.json" >"$tmp/external.out" 2>"$tmp/external.err" ||
  fail "external run: exit status $? ($(tail -n 3 "$tmp/external.err"))"
cat "$tmp/external.out"
[ "$(count "$tmp/external.json" restart)" -ge 1 ] || fail "external run: no restart in the JSON"

# Refused before any worker starts: restart of embedded workers, a bad time.
if "$bench" --layer fc:64x64 --requests 1 --chaos 'restart@w1:at=1s' 2>"$tmp/refused.err"; then
  fail "restart of an embedded worker was accepted"
fi
grep -q "supervisor" "$tmp/refused.err" || fail "refusal does not say why: $(cat "$tmp/refused.err")"
if "$bench" --layer fc:64x64 --requests 1 --chaos 'kill@w1:every=2' 2>"$tmp/bad.err"; then
  fail "'kill@w1:every=2' was accepted"
fi
grep -q "'2' is not a time" "$tmp/bad.err" || fail "bad time not named: $(cat "$tmp/bad.err")"
echo "bench_chaos: ok"
