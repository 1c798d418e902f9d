#!/usr/bin/env bash
# The four performance floors, measured in one run on one machine, each
# against its hand-written baseline in the same run:
#   1. a co_retry asleep in its backoff holds at most 512 B more than a
#      coroutine asleep on a plain timer (malloc statistics);
#   2. co_retry(op, std::cref(policy)) at most 1.05x a hand-written retry
#      loop (callgrind instructions, which machine noise does not move);
#   3. http::client at most 1.05x a raw Beast exchange per keep-alive GET
#      (callgrind);
#   4. the fleet limiter at most one Redis round trip per admitted call
#      under saturation, the quota kept within 5% (samples/fleet, which runs
#      a redis-server of its own).
# Prints a table; exits 1 if a floor is not met.
#   tests/bench/floors.sh [build-dir]   (a release build with benchmarks and samples)
set -euo pipefail
build=${1:-build/release}
here=$(dirname "$0")
fail=0
row() {  # name measured goal verdict
  printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4"
  [[ $4 == met ]] || fail=1
}

memory=$("$build/tests/bench/resilience_memory_bench")
asleep=$(awk '/co_retry asleep in backoff/ { for (i = 1; i <= NF; ++i) if ($i ~ /^[+][0-9]+$/) { print substr($i, 2); exit } }' \
  <<<"$memory")

counts=$(CALLGRIND_FUNCTIONS="measure_hand_written measure_co_retry_cref measured_http_raw measured_http_client_ref
  measured_http_client" "$here/callgrind.sh" "$build" 20000)
per_call() { awk -v f="$1" '$1 == f { print $2 }' <<<"$counts"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
at_most() { awk -v x="$1" -v bound="$2" 'BEGIN { print (x <= bound) ? "met" : "NOT met" }'; }

fleet=$("$build/samples/fleet" --seconds 20 2>&1 || true)
trips=$(sed -n 's/.*(\([0-9.]*\) per admitted call).*/\1/p' <<<"$fleet" | head -1)
quota=$(sed -n 's/.*admitted [0-9]* in [0-9]* s, expected [0-9]*: [-+0-9]* (\([-+0-9.]*\)%).*/\1/p' <<<"$fleet" | head -1)

hand=$(per_call measure_hand_written) cref=$(per_call measure_co_retry_cref)
raw=$(per_call measured_http_raw) by_ref=$(per_call measured_http_client_ref) copy=$(per_call measured_http_client)
echo "| floor | measured | goal | |"
echo "|---|---|---|---|"
row "co_retry asleep, bytes over a plain-timer sleeper" "+${asleep:-?} B" "<= +512 B" "$(at_most "${asleep:-1e9}" 512)"
row "co_retry std::cref / hand loop, instructions" "$cref / $hand = $(ratio "$cref" "$hand")x" "<= 1.05x" \
  "$(at_most "$(ratio "$cref" "$hand")" 1.05)"
row "http::client std::ref(req) / raw Beast, instructions per GET" "$by_ref / $raw = $(ratio "$by_ref" "$raw")x" \
  "<= 1.05x" "$(at_most "$(ratio "$by_ref" "$raw")" 1.05)"
row "http::client, request copied / raw Beast" "$copy / $raw = $(ratio "$copy" "$raw")x" "<= 1.05x" \
  "$(at_most "$(ratio "$copy" "$raw")" 1.05)"
row "fleet limiter, Redis round trips per admitted call (saturated)" "${trips:-?}" "<= 1" \
  "$(at_most "${trips:-1e9}" 1)"
quota_met=$(awk -v q="${quota:-1e9}" 'BEGIN { print (q <= 5 && q >= -5) ? "met" : "NOT met" }')
row "fleet limiter, admitted vs quota over the run" "${quota:-?}%" "within 5%" "$quota_met"
exit $fail
