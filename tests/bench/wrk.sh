#!/usr/bin/env bash
# The HTTP server under wrk, over real sockets (http_load serve):
#   1. requests/s of the bare handler, the same session loop through
#      http::guarded_handler, and http::server, ROUNDS times in turn;
#      medians and the ratios guarded / bare and server / bare;
#   2. http::server with --max-concurrent LIMIT against 10 x LIMIT
#      connections, a handler that holds each request DELAY_MS: every request
#      must be answered, 200 or 503 (no socket error or timeout in wrk, the
#      server's count of answers matching wrk's), with 503s seen, and the
#      server's RSS after a second round no larger than after the first
#      beyond max(5%, 1 MiB).
# Exits non-zero when a check fails.
#
#   tests/bench/wrk.sh [build-dir]        # build/release by default
#   ROUNDS=5 DURATION=10s CONNECTIONS=64 WRK_THREADS=1 LIMIT=16 DELAY_MS=5 CHECK_HANDLER=server tests/bench/wrk.sh
#   (CHECK_HANDLER: the handler of the shedding check, server or guarded)
#
# wrk (Debian package `wrk`) is installed when missing, as root, as
# scripts/bootstrap installs the build's packages.
set -euo pipefail
build=${1:-build/release}
load="$build/tests/bench/http_load"
rounds=${ROUNDS:-3}
duration=${DURATION:-10s}
connections=${CONNECTIONS:-64}
wrk_threads=${WRK_THREADS:-1}  # on 2 cores: one for wrk, one for the server's thread
limit=${LIMIT:-16}
delay_ms=${DELAY_MS:-5}
check_handler=${CHECK_HANDLER:-server}

[ -x "$load" ] || { echo "wrk.sh: no $load (cmake --build --preset release --target http_load)" >&2; exit 2; }
if ! command -v wrk >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "wrk.sh: wrk is missing: run as root, or apt-get install wrk" >&2
    exit 2
  fi
  echo "wrk.sh: installing wrk"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends wrk >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends wrk >/dev/null; }
fi

out=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT

# start_server ARGS...: sets server_pid and port.
start_server() {
  "$load" serve --port 0 "$@" >"$out/server.log" 2>&1 &
  server_pid=$!
  port=
  for _ in $(seq 100); do
    port=$(awk '$1 == "port" { print $2; exit }' "$out/server.log")
    [ -n "$port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "wrk.sh: the server did not start:" >&2
  cat "$out/server.log" >&2
  exit 1
}
# stop_server: sets served, shed, peak_rss_kib, cpu_s from the server's last line.
stop_server() {
  kill -TERM "$server_pid"
  local status=0
  wait "$server_pid" || status=$?
  server_pid=
  if [ "$status" -ne 0 ] ||
    ! read -r served shed peak_rss_kib cpu_s < <(awk '$1 == "served" { print $2, $4, $6, $8 }' "$out/server.log"); then
    echo "wrk.sh: the server failed (exit status $status):" >&2
    cat "$out/server.log" >&2
    exit 1
  fi
}
rss_kib() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$server_pid/status"; }

# run_wrk NAME CONNECTIONS: wrk's output in $out/NAME.
run_wrk() {
  wrk -t"$wrk_threads" -c"$2" -d"$duration" "http://127.0.0.1:$port/" >"$out/$1" 2>&1
}
wrk_rate() { awk '$1 == "Requests/sec:" { print $2 }' "$out/$1"; }
wrk_requests() { awk '$2 == "requests" && $3 == "in" { print $1 }' "$out/$1"; }
wrk_non_2xx() { awk '/Non-2xx or 3xx responses:/ { print $NF; found = 1 } END { if (!found) print 0 }' "$out/$1"; }
wrk_socket_errors() { grep -E 'Socket errors' "$out/$1" || true; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

echo "== overhead: wrk -t$wrk_threads -c$connections -d$duration, $rounds round(s), handlers in turn"
declare -A rates per_cpu_rates
for round in $(seq "$rounds"); do
  for handler in bare guarded server; do
    start_server --handler "$handler"
    run_wrk "$handler.$round" "$connections"
    stop_server
    rate=$(wrk_rate "$handler.$round")
    per_cpu=$(awk -v n="$served" -v c="$cpu_s" 'BEGIN { printf "%.0f", (c > 0 ? n / c : 0) }')
    errors=$(wrk_socket_errors "$handler.$round")
    printf 'round %d  %-8s %10.0f req/s %10s req/cpu-s  %s\n' "$round" "$handler" "$rate" "$per_cpu" \
      "${errors:-no socket errors}"
    [ -z "$errors" ] || fail "$handler: $errors"
    rates[$handler]+="$rate "
    per_cpu_rates[$handler]+="$per_cpu "
  done
done
for handler in bare guarded server; do
  rates[$handler.median]=$(printf '%s\n' ${rates[$handler]} | median)
  per_cpu_rates[$handler.median]=$(printf '%s\n' ${per_cpu_rates[$handler]} | median)
  printf 'median   %-8s %10.0f req/s %10.0f req/cpu-s\n' "$handler" "${rates[$handler.median]}" \
    "${per_cpu_rates[$handler.median]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
echo "guarded / bare: req/cpu-s $(ratio "${per_cpu_rates[guarded.median]}" "${per_cpu_rates[bare.median]}")," \
  "req/s $(ratio "${rates[guarded.median]}" "${rates[bare.median]}")"
echo "server / bare:  req/cpu-s $(ratio "${per_cpu_rates[server.median]}" "${per_cpu_rates[bare.median]}")," \
  "req/s $(ratio "${rates[server.median]}" "${rates[bare.median]}")"

check_connections=$((10 * limit))
echo "== shedding: $check_handler, max-concurrent $limit, handler delay $delay_ms ms, wrk -c$check_connections, 2 rounds"
start_server --handler "$check_handler" --max-concurrent "$limit" --handler-delay-ms "$delay_ms"
run_wrk check.1 "$check_connections"
rss1=$(rss_kib)
run_wrk check.2 "$check_connections"
rss2=$(rss_kib)
stop_server
total=0
non_2xx=0
for r in 1 2; do
  n=$(wrk_requests "check.$r")
  s=$(wrk_non_2xx "check.$r")
  errors=$(wrk_socket_errors "check.$r")
  printf 'round %d  %9d responses, %9d of them 503, RSS %d KiB  %s\n' "$r" "$n" "$s" "$([ "$r" = 1 ] && echo "$rss1" || echo "$rss2")" \
    "${errors:-no socket errors or timeouts}"
  [ -z "$errors" ] || fail "round $r: $errors"
  total=$((total + n))
  non_2xx=$((non_2xx + s))
done
echo "server: answered $((served + shed)) ($served 200, $shed 503), peak RSS $peak_rss_kib KiB; wrk counted $total ($non_2xx 503)"
# The server may answer a request whose response wrk no longer reads when its
# duration ends: at most one per connection per round more than wrk counts.
slack=$((2 * check_connections))
[ "$((served + shed))" -ge "$total" ] || fail "wrk counted $total responses, the server answered only $((served + shed))"
[ "$((served + shed))" -le "$((total + slack))" ] ||
  fail "the server answered $((served + shed)), wrk counted only $total: requests were dropped"
[ "$shed" -ge "$non_2xx" ] || fail "wrk saw $non_2xx non-2xx responses, the server shed only $shed"
[ "$non_2xx" -gt 0 ] || fail "nothing was shed: the check did not reach the limit"
tolerance=$((rss1 / 20 > 1024 ? rss1 / 20 : 1024))
[ "$rss2" -le "$((rss1 + tolerance))" ] || fail "RSS grew from $rss1 KiB to $rss2 KiB after the second round"
[ "$failed" = 0 ] && echo "shedding check passed: every request answered 200 or 503, RSS $rss1 -> $rss2 KiB"
exit "$failed"
