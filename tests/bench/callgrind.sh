#!/usr/bin/env bash
# Instruction counts per call, which do not drift with machine noise.
#   tests/bench/callgrind.sh [build-dir] [calls]
set -euo pipefail
build=${1:-build/release}
calls=${2:-20000}
bench="$build/tests/bench/resilience_bench"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

declare -A per_call
fns=${CALLGRIND_FUNCTIONS:-measure_bare measure_co_retry measure_co_retry_cref measure_hand_written measure_timeout measure_pipeline
  measure_pipeline_referenced measure_or_idiom
  measure_breaker measure_breaker_mixed measure_mutex_breaker measure_mutex_breaker_mixed
  measured_http_raw measured_http_client measured_http_client_ref}
for fn in $fns; do
  valgrind --tool=callgrind --callgrind-out-file="$out/$fn" --toggle-collect="$fn" \
    "$bench" --instructions "$calls" >/dev/null 2>&1
  total=$(callgrind_annotate "$out/$fn" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  per_call[$fn]=$((total / calls))
  printf '%-22s %8d instructions per call\n' "$fn" "${per_call[$fn]}"
done
ratio() {
  [[ -n ${per_call[$2]:-} && -n ${per_call[$3]:-} ]] || return 0
  awk -v a="${per_call[$2]}" -v b="${per_call[$3]}" -v n="$1" 'BEGIN { printf "%-40s = %.2fx\n", n, a / b }'
}
ratio "co_retry / bare co_await" measure_co_retry measure_bare
ratio "co_retry / hand-written loop" measure_co_retry measure_hand_written
ratio "co_retry std::cref / hand-written loop" measure_co_retry_cref measure_hand_written
ratio "|| idiom / timeout stage" measure_or_idiom measure_timeout
ratio "pipeline copied / referred to" measure_pipeline measure_pipeline_referenced
ratio "mutex breaker / breaker, all successes" measure_mutex_breaker measure_breaker
ratio "mutex breaker / breaker, 10% failures" measure_mutex_breaker_mixed measure_breaker_mixed
ratio "HTTP client / raw Beast exchange" measured_http_client measured_http_raw
ratio "HTTP client std::ref / raw Beast exchange" measured_http_client_ref measured_http_raw
