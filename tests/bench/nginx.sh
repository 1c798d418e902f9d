#!/usr/bin/env bash
# The HTTP client against a real nginx (started here with a generated config
# in a temporary directory, as the current user, on free ports of 127.0.0.1):
#   A. Rate limited: limit_req at 10 r/s per server, no burst, 429 with
#      Retry-After: 1, else 200 "ok". CALLERS callers of one http::client with
#      its defaults (retry_after_load) for A_SECONDS. Per second: requests
#      nginx received, the 429 share, 200s, and the attempts the client sent.
#      Checks: the 429 share of seconds 11-20 at least 10 points below that of
#      second 1 (every caller at once), no 100 ms slot after the first 3 s holding half the
#      callers' requests (no lockstep), and no retry after a 429 sent sooner
#      than its Retry-After: on the client's side per caller
#      (retry_after_load's check), and from nginx's log per caller and call
#      (to its millisecond clock).
#   B. Failing 10%: 503 for a random 10% of requests, else 200 "ok".
#      http_load client --mode both, ROUNDS rounds of B_SECONDS; then the
#      resilient client with Polly's breaker, which opens at this rate.
#      Checks: every round finishes (a hang at 100% CPU is a fail). Prints
#      the client's CPU per 200 response, resilient next to plain Beast, and
#      in how many rounds Polly's breaker refused calls (else that run did
#      not reach the open breaker).
# Exits non-zero when a check fails.
#
#   tests/bench/nginx.sh [build-dir]      # build/release by default
#   CALLERS=20 A_SECONDS=20 ROUNDS=3 B_SECONDS=10 CONCURRENCY=16 NGINX=/usr/sbin/nginx tests/bench/nginx.sh
#   HOST_HOLD=300 tests/bench/nginx.sh    # A with client_options::max_host_hold(300s)
#   BACKOFF=10,100 tests/bench/nginx.sh   # A with the client's own schedule, exponential(10ms, 2.0, 100ms),
#                                         # no jitter named: the lockstep check holds it to full jitter
set -euo pipefail
build=${1:-build/release}
load="$build/tests/bench/http_load"
limited_load="$build/tests/bench/retry_after_load"
nginx=${NGINX:-/usr/sbin/nginx}
callers=${CALLERS:-20}
a_seconds=${A_SECONDS:-20}
rounds=${ROUNDS:-3}
b_seconds=${B_SECONDS:-10}
concurrency=${CONCURRENCY:-16}

for program in "$load" "$limited_load"; do
  [ -x "$program" ] || {
    echo "nginx.sh: no $program (cmake --build $build --target http_load retry_after_load)" >&2
    exit 2
  }
done
[ -x "$nginx" ] || { echo "nginx.sh: no nginx at $nginx (apt-get install nginx-light, or NGINX=...)" >&2; exit 2; }
[ "$a_seconds" -ge 20 ] || { echo "nginx.sh: A_SECONDS must be at least 20 (the check compares seconds 11-20)" >&2; exit 2; }

out=$(mktemp -d)
chmod 755 "$out"  # nginx's workers read the body file
nginx_pid=
cleanup() {
  if [ -n "$nginx_pid" ]; then
    kill -TERM "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
  fi
  rm -rf "$out"
}
trap cleanup EXIT

failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

# A port nothing listens on (the start below retries should one be taken meanwhile).
free_port() {
  local p
  for p in $(shuf -i 20000-60999 -n 200); do
    if [ -z "$(ss -Hltn "sport = :$p")" ]; then
      echo "$p"
      return 0
    fi
  done
  echo "nginx.sh: no free port found" >&2
  return 1
}

write_config() {
  local user_line=
  # Workers run as the current user (as root, nginx would switch them to nobody).
  [ "$(id -u)" -eq 0 ] && user_line="user $(id -un) $(id -gn);"
  mkdir -p "$out/www" "$out/tmp"
  printf 'ok\n' >"$out/www/ok.txt"
  cat >"$out/nginx.conf" <<EOF
$user_line
worker_processes 1;
daemon off;
pid $out/nginx.pid;
error_log $out/error.log error;
events { worker_connections 1024; }
http {
  default_type text/plain;
  client_body_temp_path $out/tmp/body;
  proxy_temp_path $out/tmp/proxy;
  fastcgi_temp_path $out/tmp/fastcgi;
  uwsgi_temp_path $out/tmp/uwsgi;
  scgi_temp_path $out/tmp/scgi;
  # One keep-alive connection per caller for the whole run, as with the
  # Beast server of http_load.
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  # When each request started (\$msec less \$request_time), and from whom.
  log_format timing '\$msec \$request_time \$status \$http_x_caller \$http_x_call \$connection';

  limit_req_zone \$server_name zone=one:1m rate=10r/s;
  limit_req_status 429;
  limit_req_log_level info;  # below error_log's level: no line per refusal
  map \$status \$retry_after { 429 1; default ""; }  # an empty value adds no header
  split_clients "\${request_id}" \$fail { 10% 1; * 0; }

  server {
    listen 127.0.0.1:$port_a;
    server_name limited;
    access_log $out/a.log timing;
    root $out/www;
    location / {
      limit_req zone=one;
      add_header Retry-After \$retry_after always;
      # Served in the content phase, after limit_req (a return would answer before it).
      try_files /ok.txt =404;
    }
  }
  server {
    listen 127.0.0.1:$port_b;
    server_name failing;
    access_log $out/b.log timing buffer=256k flush=1s;
    location / {
      if (\$fail) { return 503; }
      return 200 "ok";
    }
  }
}
EOF
}

accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_nginx() {
  local _
  for _ in 1 2 3 4 5; do
    port_a=$(free_port)
    port_b=$(free_port)
    [ "$port_a" != "$port_b" ] || continue
    write_config
    "$nginx" -p "$out" -c "$out/nginx.conf" -e "$out/error.log" >"$out/nginx.out" 2>&1 &
    nginx_pid=$!
    for _ in $(seq 50); do
      if accepts "$port_a" && accepts "$port_b"; then return 0; fi
      kill -0 "$nginx_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -TERM "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
    nginx_pid=
    grep -q 'Address already in use' "$out/error.log" "$out/nginx.out" 2>/dev/null || break
  done
  echo "nginx.sh: nginx did not start:" >&2
  cat "$out/nginx.out" "$out/error.log" >&2 2>/dev/null || true
  exit 1
}

start_nginx
echo "nginx $("$nginx" -v 2>&1 | sed 's/.*nginx\///'), pid $nginx_pid, worker_processes 1: A on port $port_a, B on port $port_b"
echo "machine: $(nproc) cores, $(uname -sr)"

# ---------------------------------------------------------------- A
echo
echo "== A: limit_req 10 r/s (no burst), 429 + Retry-After: 1; $callers callers of one http::client (defaults), ${a_seconds} s"
a_status=0
"$limited_load" --target "127.0.0.1:$port_a" --callers "$callers" --duration "$a_seconds" --retry-after 1 \
  --max-host-hold "${HOST_HOLD:-0}" ${BACKOFF:+--backoff "$BACKOFF"} \
  >"$out/a.client" 2>&1 || a_status=$?
# Each request's start ($msec - $request_time) and end ($msec), in seconds
# from the first start; its status, caller and call.
awk '{ printf "%.3f %.3f %s %s %s\n", $1 - $2, $1, $3, $4, $5 }' "$out/a.log" | sort -n >"$out/a.requests"
t0=$(awk 'NR == 1 { print $1 }' "$out/a.requests")
awk -v t0="$t0" '{ printf "%.3f %.3f %s %s %s\n", $1 - t0, $2 - t0, $3, $4, $5 }' "$out/a.requests" >"$out/a.rel"

printf '%6s %8s %6s %7s %6s %12s\n' second nginx 429 "429 %" 200 client-sent
awk -v client="$out/a.client" '
  BEGIN {
    while ((getline line < client) > 0) {
      split(line, f, " ")
      if (f[1] == "second") sent[f[2]] = f[4]
    }
  }
  { s = int($1) + 1; n[s]++; if ($3 == 429) l[s]++; else if ($3 == 200) ok[s]++; if (s > last) last = s }
  END {
    for (s = 1; s <= last; s++)
      printf "%6d %8d %6d %6.1f%% %6d %12d\n", s, n[s], l[s], n[s] ? 100 * l[s] / n[s] : 0, ok[s], sent[s]
  }' "$out/a.rel"
read -r first_share early_share late_share total_429 total_ok total_n < <(awk '
  { s = int($1) + 1; total++; if ($3 == 429) total_l++; else if ($3 == 200) total_ok++
    if (s == 1) { fn++; if ($3 == 429) fl++ }
    if (s >= 2 && s <= 10) { en++; if ($3 == 429) el++ }
    if (s >= 11 && s <= 20) { ln++; if ($3 == 429) ll++ } }
  END { printf "%.1f %.1f %.1f %d %d %d\n", fn ? 100 * fl / fn : 0, en ? 100 * el / en : 0, ln ? 100 * ll / ln : 0,
               total_l, total_ok, total }' "$out/a.rel")
echo "nginx: $total_n requests, $total_429 answered 429, $total_ok answered 200;" \
  "429 share: second 1 ${first_share}%, seconds 2-10 ${early_share}%, seconds 11-20 ${late_share}%"
burst=$(awk '$1 >= 3 { slot = int($1 * 10); n[slot]++; if (n[slot] > max) max = n[slot] } END { print max + 0 }' "$out/a.rel")
echo "nginx: largest number of requests starting in one 100 ms slot after the first 3 s: $burst"
# Per caller and call: from each 429's end to the start of the call's next request.
read -r gaps short min_gap < <(sort -k4,4n -k5,5n -k1,1n "$out/a.rel" | awk '
  { if ($4 == prev_caller && $5 == prev_call && prev_status == 429) {
      gap = $1 - prev_end; n++; if (n == 1 || gap < min) min = gap; if (gap < 0.999) short++ }
    prev_caller = $4; prev_call = $5; prev_status = $3; prev_end = $2 }
  END { printf "%d %d %.3f\n", n, short + 0, n ? min : 0 }')
echo "nginx: retries after a 429 within a call: $gaps, shortest gap ${min_gap} s, sooner than 1 s (less nginx's 1 ms): $short"
echo "client (retry_after_load):"
{ grep -v '^second \|^#' "$out/a.client" || true; } | sed 's/^/  /'

[ "$a_status" -eq 0 ] || fail "A: retry_after_load exited with $a_status (see its check above)"
grep -q '^check retry-after: PASS' "$out/a.client" || fail "A: a retry after a 429 was sent sooner than its Retry-After (client's view)"
[ "$short" -eq 0 ] || fail "A: nginx saw $short retries sooner than 1 s after their 429"
[ "$gaps" -gt 0 ] || fail "A: nginx saw no retry after a 429"
awk -v f="$first_share" -v l="$late_share" 'BEGIN { exit !(l <= f - 10) }' ||
  fail "A: the 429 share did not fall: ${first_share}% in second 1, ${late_share}% in seconds 11-20"
[ "$burst" -le $((callers / 2)) ] || fail "A: $burst requests started in one 100 ms slot after the first 3 s (lockstep)"

# ---------------------------------------------------------------- B
b_lines() { wc -l <"$out/b.log" 2>/dev/null || echo 0; }
b_since() { tail -n +"$(($1 + 1))" "$out/b.log" | awk '{ n++; if ($3 == 503) f++ } END { printf "%d %.1f\n", n, n ? 100 * f / n : 0 }'; }
# run_b NAME EXPECTED_ROUND_LINES ARGS...: http_load client under a timeout; a hang fails.
run_b() {
  local name=$1 expected=$2
  shift 2
  local limit=$((expected * (b_seconds + 5) + 30)) status=0 before
  before=$(b_lines)
  timeout -k 5 "$limit" "$load" client --target "127.0.0.1:$port_b" --concurrency "$concurrency" \
    --duration "$b_seconds" --rounds "$rounds" "$@" >"$out/$name" 2>&1 || status=$?
  sleep 1.5  # nginx's log buffer, flushed each second
  sed 's/^/  /' "$out/$name"
  read -r b_requests b_share < <(b_since "$before")
  echo "  nginx received $b_requests requests, ${b_share}% answered 503"
  local done_rounds
  done_rounds=$(grep '^round ' "$out/$name" | grep -vc 'resilient / plain' || true)
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    fail "B ($name): http_load did not finish within $limit s (hung)"
  elif [ "$status" -gt 1 ]; then
    fail "B ($name): http_load exited with $status"
  elif [ "$done_rounds" -ne "$expected" ]; then
    fail "B ($name): $done_rounds of $expected rounds finished"
  else
    echo "  every round finished ($done_rounds of $expected; exit status $status: 1 counts failed requests, as the plain client's 503s)"
  fi
}
# cpu_per_request NAME MODE: microseconds of client CPU per 200 response (the median line).
cpu_per_request() { awk -v m="$2" '$1 == "median" && $2 == m { for (i = 1; i < NF; i++) if ($(i + 1) == "req/cpu-s") print ($i > 0 ? 1e6 / $i : 0) }' "$out/$1"; }

echo
echo "== B: 10% of requests answered 503; http_load client, $concurrency users, $rounds round(s) of ${b_seconds} s per mode"
run_b b.both $((2 * rounds)) --mode both
echo
echo "== B: the resilient client with Polly's breaker (opens at 10% of at least 100 attempts in 30 s, 5 s)"
run_b b.polly "$rounds" --mode resilient --breaker polly

plain_us=$(cpu_per_request b.both plain)
resilient_us=$(cpu_per_request b.both resilient)
polly_us=$(cpu_per_request b.polly resilient)
echo
echo "B: client CPU per 200 response (medians): plain Beast ${plain_us:-?} us, http::client ${resilient_us:-?} us" \
  "($(awk -v a="${resilient_us:-0}" -v b="${plain_us:-0}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') x plain)," \
  "with Polly's breaker ${polly_us:-?} us"

opened=$(awk '$1 == "round" && $3 == "resilient" { for (i = 4; i < NF; i++) if ($i == "errors" && $(i + 1) > 0) n++ }
  END { print n + 0 }' "$out/b.polly")
echo "B: Polly's breaker refused calls in $opened of $rounds round(s)$([ "$opened" -gt 0 ] ||
  echo ': the open breaker was not reached, so this run did not test it')"

[ "$failed" = 0 ] && echo "all checks passed"
exit "$failed"
