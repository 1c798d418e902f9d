// http_demo: the resilient HTTP client against a failing server, over real
// sockets, compared with the clients people write without it.
//
//   http_demo [--duration S] [--users N] [--svg FILE] [fault options; --help]
//
// A Beast server on 127.0.0.1 (an ephemeral port, in this process, on a
// thread of its own) fails on purpose: a base rate of 500s, connection resets,
// latency spikes, short bursts of 503 with Retry-After, an outage window in
// which every request is answered 503 or reset, and a capacity per 100 ms
// above which it sheds load with 503 + Retry-After. Fifty users each send a
// GET about every 100 ms (on their own schedule: a slow call does not hold
// the next one back) for `duration` seconds, once per client:
//   plain      a Beast client, one attempt, 2 s timeout;
//   naive      the same, retrying any failure at once, up to 3 times;
//   resilient  resilience::http::client, the standard stack on this demo's
//              time scale (2 s in all, 500 ms per attempt, 3 retries with
//              backoff from 50 ms, Retry-After honoured up to 1 s, a breaker
//              for the host that opens for 250 ms at a time).
// Every phase meets the same fault schedule. The report gives per phase the
// calls, attempts, successes by attempt, failures by kind, latency and the
// server's load per 100 ms; the SVG shows the load, and the p99 latency of
// the calls that succeeded and of those that failed, over time. Exits 1 if a
// call did not complete exactly once, or (unless --no-rate-check) if the
// resilient client succeeded less often than plain.
#include "chart_scale.hpp"

#include <resilience/http/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using asio::ip::tcp;
using boost::system::error_code;
using namespace std::chrono_literals;
using sclock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

namespace {

constexpr auto window = 100ms;  // the server's load is counted per window
constexpr auto latency_bucket = 500ms;
constexpr auto plain_timeout = 2s;
constexpr auto retry_after = 1s;  // what the server's 503s ask for
constexpr auto resilient_backoff_cap = 400ms;

double seconds(sclock::duration d) { return std::chrono::duration<double>(d).count(); }
double millis(sclock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct scenario {
  sclock::duration duration = 8s;  // per phase
  int users = 50;
  ms interval{100};           // between a user's calls, jittered 50-150%
  ms latency{5};              // the server's time for an answer
  double error_rate = 0.05;   // 500
  double reset_rate = 0.02;   // the connection reset instead of an answer
  double spike_rate = 0.02;   // an answer this slow
  ms spike{1000};
  sclock::duration burst_first = 500ms, burst_every = 2500ms;  // every request 503 + Retry-After: 1
  ms burst{300};
  sclock::duration outage_from = 2s, outage_to = 5s;  // 503 (no Retry-After) or reset
  int capacity = 100;         // requests per window served; the rest 503 + Retry-After: 1
  ms host_hold{0};            // the resilient client's max_host_hold (0: off, its default)
  bool retry_budget = true;   // the resilient client's default retry budget per host
  unsigned seed = 2026;

  bool in_outage(sclock::duration t) const { return t >= outage_from && t < outage_to; }
  bool in_burst(sclock::duration t) const {
    if (t < burst_first) return false;
    return (t - burst_first) % burst_every < burst;
  }
  std::size_t windows() const { return static_cast<std::size_t>((duration + window - 1ns) / window); }
};

// One call's latency, with its outcome: a call that fails fast must not be
// read as a slow call, nor a slow success hidden among fast failures.
struct latency_sample {
  sclock::duration started_at;  // since the phase started
  sclock::duration took;
  bool succeeded;
};

// What one phase saw, from both ends.
struct phase {
  std::string name, what;
  // client side
  long calls = 0, attempts = 0, successes = 0;
  long calls_outside_outage = 0, successes_outside_outage = 0;
  std::array<long, 5> by_attempt{};  // successes on attempt 1..4
  long failed_status = 0, failed_connection = 0, failed_timeout = 0, refused = 0;
  long held_back = 0;  // ended by the host's Retry-After hold (--host-hold)
  long retry_after_honoured = 0, retry_after_ignored = 0;
  std::vector<unsigned char> completions{};  // per call: must end at 1
  std::vector<latency_sample> latencies{};
  long reported_calls = 0;  // on_call_finished, to cross-check
  // server side
  std::vector<int> load{};  // requests received per window
  std::vector<int> started{};  // calls started per window
  long received = 0, served = 0, shed = 0;

  long failures() const { return calls - successes; }
  double success_rate() const { return calls ? 100.0 * static_cast<double>(successes) / static_cast<double>(calls) : 0; }
  long not_exactly_once() const {
    return std::count_if(completions.begin(), completions.end(), [](unsigned char n) { return n != 1; });
  }
};

// The fault-injecting server. Decides each request's fate when it has read
// it, from the time since the phase started and a seeded generator.
class fault_server {
 public:
  fault_server(asio::io_context& io, const scenario& s, phase& p, sclock::time_point start)
      : io_(io), s_(s), p_(p), start_(start), acceptor_(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)),
        random_(s.seed) {
    p_.load.assign(s_.windows(), 0);
    p_.started.assign(s_.windows(), 0);
  }

  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void start() { asio::co_spawn(io_, accept_loop(), asio::detached); }
  void stop() {
    error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  enum class fate { ok, error, overloaded, unavailable, reset };

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      asio::co_spawn(io_, serve(beast::tcp_stream(std::move(socket))), asio::detached);
    }
  }

  fate decide(sclock::duration t) {
    const auto w = static_cast<std::size_t>(t / window);
    int seen = 0;
    if (w < p_.load.size()) seen = ++p_.load[w];
    ++p_.received;
    std::uniform_real_distribution<double> u(0, 1);
    if (s_.in_outage(t)) return u(random_) < 0.3 ? fate::reset : fate::unavailable;
    if (s_.in_burst(t)) return fate::overloaded;
    if (seen > s_.capacity) return fate::overloaded;
    const double r = u(random_);
    if (r < s_.reset_rate) return fate::reset;
    if (r < s_.reset_rate + s_.error_rate) return fate::error;
    return fate::ok;
  }

  asio::awaitable<void> serve(beast::tcp_stream stream) {
    beast::flat_buffer buffer;
    asio::steady_timer delay(io_);
    for (;;) {
      bhttp::request<bhttp::string_body> req;
      auto [ec, n] = co_await bhttp::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      const fate f = decide(sclock::now() - start_);
      if (f == fate::reset) {
        auto& socket = stream.socket();
        socket.set_option(asio::socket_base::linger(true, 0));
        socket.close();
        co_return;
      }
      bhttp::response<bhttp::string_body> res{bhttp::status::ok, req.version()};
      ms wait = s_.latency;
      switch (f) {
        case fate::ok:
          ++p_.served;
          res.body() = "ok";
          if (std::uniform_real_distribution<double>(0, 1)(random_) < s_.spike_rate) wait = s_.spike;
          break;
        case fate::error:
          res.result(bhttp::status::internal_server_error);
          break;
        case fate::overloaded:
          ++p_.shed;
          res.result(bhttp::status::service_unavailable);
          res.set(bhttp::field::retry_after, std::to_string(retry_after.count()));
          break;
        default:
          res.result(bhttp::status::service_unavailable);
          break;
      }
      delay.expires_after(wait);
      co_await delay.async_wait(asio::as_tuple(asio::use_awaitable));
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      auto [wec, wn] = co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      if (wec || !req.keep_alive()) co_return;
    }
  }

  asio::io_context& io_;
  const scenario& s_;
  phase& p_;
  sclock::time_point start_;
  tcp::acceptor acceptor_;
  std::mt19937 random_;
};

// One call's bookkeeping: numbered when it starts, counted when it ends.
struct call_record {
  phase& p;
  sclock::time_point phase_start;
  std::size_t id;
  sclock::time_point started = sclock::now();
  bool in_outage;

  call_record(const scenario& s, phase& ph, sclock::time_point at)
      : p(ph), phase_start(at), id(p.completions.size()), in_outage(s.in_outage(started - at)) {
    p.completions.push_back(0);
    ++p.calls;
    if (const auto w = static_cast<std::size_t>((started - at) / window); w < p.started.size()) ++p.started[w];
    if (!in_outage) ++p.calls_outside_outage;
  }
  void finish(bool success) {
    ++p.completions[id];
    if (success) ++p.successes;
    if (success && !in_outage) ++p.successes_outside_outage;
    p.latencies.push_back({.started_at = started - phase_start, .took = sclock::now() - started, .succeeded = success});
  }
};

bool is_timeout(const error_code& ec) {
  return ec == beast::error::timeout || ec == resilience::error::timeout ||
         ec == resilience::error::deadline_exceeded;
}

// A plain client's connection, kept alive between calls.
struct plain_connection {
  explicit plain_connection(const asio::any_io_executor& ex) : stream(ex) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  bool connected = false;
};

// A user's idle connections: a call takes one (or opens one) and gives it
// back if it is still usable, so that calls of one user may overlap.
using plain_connections = std::vector<std::unique_ptr<plain_connection>>;

struct exchange_result {
  error_code error;
  unsigned status = 0;
  bool retry_after = false;
};

// One request on `c`: connect if needed, write, read, each bounded by the
// timeout; the connection is closed after any error.
asio::awaitable<exchange_result> exchange(plain_connection& c, const tcp::endpoint& server) {
  exchange_result r;
  c.stream.expires_after(plain_timeout);
  if (!c.connected) {
    c.buffer.consume(c.buffer.size());
    auto [ec] = co_await c.stream.async_connect(server, asio::as_tuple(asio::use_awaitable));
    if (ec) {
      c.stream.close();
      r.error = ec;
      co_return r;
    }
    c.connected = true;
  }
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/v1/items", 11};
  req.set(bhttp::field::host, "127.0.0.1");
  auto [wec, wn] = co_await bhttp::async_write(c.stream, req, asio::as_tuple(asio::use_awaitable));
  bhttp::response<bhttp::string_body> res;
  error_code rec;
  if (!wec) {
    std::tie(rec, std::ignore) =
        co_await bhttp::async_read(c.stream, c.buffer, res, asio::as_tuple(asio::use_awaitable));
  }
  if (wec || rec) {
    c.stream.close();
    c.connected = false;
    r.error = wec ? wec : rec;
    co_return r;
  }
  if (!res.keep_alive()) {
    c.stream.close();
    c.connected = false;
  }
  r.status = res.result_int();
  r.retry_after = res.find(bhttp::field::retry_after) != res.end();
  co_return r;
}

// plain (max_attempts 1) and naive (4: any failure retried at once).
asio::awaitable<void> plain_call(const scenario& s, phase& p, sclock::time_point start, int max_attempts,
                                 plain_connections& idle, tcp::endpoint server) {
  call_record call(s, p, start);
  std::unique_ptr<plain_connection> conn;
  exchange_result r;
  int attempt = 1;
  for (;; ++attempt) {
    if (!conn) {
      if (idle.empty()) {
        conn = std::make_unique<plain_connection>(co_await asio::this_coro::executor);
      } else {
        conn = std::move(idle.back());
        idle.pop_back();
      }
    }
    ++p.attempts;
    r = co_await exchange(*conn, server);
    if (!conn->connected) conn.reset();
    if (!r.error && r.status == 200) break;
    if (attempt == max_attempts) break;
    if (r.retry_after) ++p.retry_after_ignored;
  }
  if (conn) idle.push_back(std::move(conn));
  const bool ok = !r.error && r.status == 200;
  if (ok) ++p.by_attempt[static_cast<std::size_t>(attempt)];
  else if (!r.error) ++p.failed_status;
  else if (is_timeout(r.error)) ++p.failed_timeout;
  else ++p.failed_connection;
  call.finish(ok);
}

asio::awaitable<void> resilient_call(const scenario& s, phase& p, sclock::time_point start, rhttp::client& client,
                                     rhttp::endpoint server) {
  call_record call(s, p, start);
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/v1/items", 11};
  const auto res = co_await client.request(server, std::move(req));
  const bool ok = res && res->result() == bhttp::status::ok;
  if (res && !ok) ++p.failed_status;
  else if (!res && res.error() == resilience::error::circuit_open) ++p.refused;
  else if (!res && res.error() == resilience::error::rate_limited) ++p.held_back;
  else if (!res && is_timeout(res.error())) ++p.failed_timeout;
  else if (!res) ++p.failed_connection;
  call.finish(ok);
}

rhttp::client_options resilient_options(const scenario& s, phase& p) {
  const auto standard = rhttp::client_options::standard();
  return (s.retry_budget ? standard : standard.no_retry_budget())
      .total_timeout(2s)
      .attempt_timeout(500ms)
      .max_retries(3)
      .backoff(resilience::backoff::exponential(50ms, 2.0, resilient_backoff_cap).with_jitter(resilience::jitter::full))
      .max_retry_after(1s)
      .max_host_hold(s.host_hold)
      .breaker(resilience::breaker_options{}
                   .failure_ratio(0.5)
                   .minimum_calls(20)
                   .time_window(1s)
                   .open_duration(250ms))
      .pool(rhttp::connection_pool_options{}.max_connections_per_host(static_cast<std::uint32_t>(s.users)))
      .on_retry([&p](const rhttp::client_retry_event& e) {
        if (e.retry_after) ++p.retry_after_honoured;
      })
      .on_call_finished([&p](const rhttp::client_call_event& e) {
        ++p.reported_calls;
        p.attempts += e.attempts;
        if (!e.error && e.status == 200 && e.attempts >= 1 && e.attempts <= 4) ++p.by_attempt[e.attempts];
      });
}

enum class kind { plain, naive, resilient };

// Runs one phase to its end. Users send on a schedule of their own (every
// interval, jittered), whether or not their previous call has finished,
// so that every phase gets the same demand; they stop at `duration`, and the
// phase ends when the last call has completed. Every call is bounded by a
// timeout; should one still hang 15 s later, the demo fails at once.
void run_phase(const scenario& s, phase& p, kind k) {
  // The server has a thread of its own, as it would have a machine: the
  // clients' work does not slow it down, nor its work theirs.
  asio::io_context server_io;
  asio::io_context io;
  const auto start = sclock::now();
  fault_server server(server_io, s, p, start);
  server.start();
  const tcp::endpoint at(asio::ip::address_v4::loopback(), server.port());
  std::thread server_thread([&] { server_io.run(); });
  std::vector<plain_connections> idle(static_cast<std::size_t>(s.users));
  std::optional<rhttp::client> client;
  if (k == kind::resilient) client.emplace(resilient_options(s, p));

  int users = s.users;
  long in_flight = 0;
  asio::steady_timer watchdog(io, s.duration + 15s);
  watchdog.async_wait([&](error_code ec) {
    if (!ec) io.stop();
  });
  auto maybe_done = [&] {
    if (users > 0 || in_flight > 0) return;
    // All done: close every connection so that the server's sessions, and
    // with them run(), end.
    if (client) client->pool().close_idle();
    for (auto& conns : idle) conns.clear();
    asio::post(server_io, [&] { server.stop(); });
    watchdog.cancel();
  };
  auto call_done = [&](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
    --in_flight;
    maybe_done();
  };
  auto user = [&](int u) -> asio::awaitable<void> {
    std::mt19937 random(s.seed + static_cast<unsigned>(u));
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    asio::steady_timer timer(io);
    auto next = start + std::chrono::duration_cast<sclock::duration>(s.interval * (jitter(random) - 0.5));
    for (;;) {
      timer.expires_at(next);
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (sclock::now() - start >= s.duration) break;
      ++in_flight;
      if (k == kind::resilient) {
        asio::co_spawn(io, resilient_call(s, p, start, *client, rhttp::endpoint::http("127.0.0.1", at.port())),
                       call_done);
      } else {
        asio::co_spawn(io, plain_call(s, p, start, k == kind::plain ? 1 : 4, idle[static_cast<std::size_t>(u)], at),
                       call_done);
      }
      next += std::chrono::duration_cast<sclock::duration>(s.interval * jitter(random));
    }
  };
  for (int u = 0; u < s.users; ++u) {
    asio::co_spawn(io, user(u), [&](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);
      --users;
      maybe_done();
    });
  }
  io.run();
  if (users == 0 && in_flight == 0) server_thread.join();
  if (users > 0 || in_flight > 0) {
    // Calls still suspended hold leases on the client's pool: nothing can be
    // destroyed in a safe order, so leave without destroying.
    fmt::print(stderr, "http_demo: {}: {} calls never completed\n", p.name, in_flight);
    std::fflush(nullptr);
    std::_Exit(1);
  }
  client.reset();  // before the io_context its connections belong to
}

struct latency_summary {
  double p50 = 0, p99 = 0, max = 0;
};

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

enum class outcome { any, succeeded, failed };

latency_summary summarize(const phase& p, outcome of = outcome::any) {
  std::vector<double> v;
  v.reserve(p.latencies.size());
  for (const auto& sample : p.latencies) {
    if (of == outcome::any || sample.succeeded == (of == outcome::succeeded)) v.push_back(millis(sample.took));
  }
  latency_summary l;
  if (v.empty()) return l;
  l.max = *std::max_element(v.begin(), v.end());
  l.p50 = percentile(v, 0.50);
  l.p99 = percentile(v, 0.99);
  return l;
}

// p99 latency of the calls with this outcome started in each bucket; NaN
// for a bucket without such a call (a gap in the line, not a zero).
std::vector<double> p99_over_time(const scenario& s, const phase& p, bool succeeded) {
  const auto buckets = static_cast<std::size_t>((s.duration + latency_bucket - 1ns) / latency_bucket);
  std::vector<std::vector<double>> by(buckets);
  for (const auto& sample : p.latencies) {
    if (sample.succeeded != succeeded) continue;
    const auto b = std::min(buckets - 1, static_cast<std::size_t>(sample.started_at / latency_bucket));
    by[b].push_back(millis(sample.took));
  }
  std::vector<double> out;
  for (auto& v : by) out.push_back(v.empty() ? std::nan("") : percentile(v, 0.99));
  return out;
}

int peak_load(const phase& p) { return p.load.empty() ? 0 : *std::max_element(p.load.begin(), p.load.end()); }
double mean_load(const phase& p) {
  if (p.load.empty()) return 0;
  long sum = 0;
  for (int n : p.load) sum += n;
  return static_cast<double>(sum) / static_cast<double>(p.load.size());
}
double mean_load_in_outage(const scenario& s, const phase& p) {
  long sum = 0, n = 0;
  for (std::size_t w = 0; w < p.load.size(); ++w) {
    if (!s.in_outage(window * static_cast<long>(w))) continue;
    sum += p.load[w];
    ++n;
  }
  return n ? static_cast<double>(sum) / static_cast<double>(n) : 0;
}

// The first 500 ms of the outage, before a breaker can have seen enough:
// the requests the server received per call started then (1 if none was
// retried; a retry budget of 20% keeps it near 1.2).
constexpr auto outage_start = 500ms;
double outage_start_amplification(const scenario& s, const phase& p) {
  long requests = 0, calls = 0;
  for (std::size_t w = 0; w < p.load.size(); ++w) {
    const auto t = window * static_cast<long>(w);
    if (t < s.outage_from || t >= std::min(s.outage_to, s.outage_from + outage_start)) continue;
    requests += p.load[w];
    calls += p.started[w];
  }
  return calls ? static_cast<double>(requests) / static_cast<double>(calls) : 0;
}

std::string percent(long part, long whole) {
  return whole ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}

void print_phase(const scenario& s, const phase& p, sclock::duration took) {
  const auto l = summarize(p);
  fmt::print("{} — {}  ({:.1f} s)\n", p.name, p.what, seconds(took));
  fmt::print("  calls            {:>7}   succeeded {} ({}); of those started outside the outage {}\n", p.calls,
             p.successes, percent(p.successes, p.calls),
             percent(p.successes_outside_outage, p.calls_outside_outage));
  fmt::print("  attempts sent    {:>7}   {:.2f} per call\n", p.attempts,
             p.calls ? static_cast<double>(p.attempts) / static_cast<double>(p.calls) : 0.0);
  fmt::print("  succeeded on attempt  1: {}  2: {}  3: {}  4: {}\n", p.by_attempt[1], p.by_attempt[2], p.by_attempt[3],
             p.by_attempt[4]);
  fmt::print("  failed           {:>7}   5xx {}, reset/closed {}, timeout {}, breaker refused {}{}\n", p.failures(),
             p.failed_status, p.failed_connection, p.failed_timeout, p.refused,
             p.held_back ? fmt::format(", held back by Retry-After {}", p.held_back) : std::string());
  fmt::print("  Retry-After      honoured {}, ignored {}\n", p.retry_after_honoured, p.retry_after_ignored);
  fmt::print("  latency          p50 {:.0f} ms, p99 {:.0f} ms, max {:.0f} ms\n", l.p50, l.p99, l.max);
  const auto ok = summarize(p, outcome::succeeded), failed = summarize(p, outcome::failed);
  fmt::print("    successes      p50 {:.0f} ms, p99 {:.0f} ms; failures p50 {:.0f} ms, p99 {:.0f} ms\n", ok.p50, ok.p99,
             failed.p50, failed.p99);
  fmt::print("  server           {} requests; per 100 ms: peak {}, mean {:.1f}, {:.1f} in the outage; "
             "served {}, shed {}\n\n",
             p.received, peak_load(p), mean_load(p), mean_load_in_outage(s, p), percent(p.served, p.received), p.shed);
}

void print_comparison(const scenario& s, const std::vector<phase>& phases) {
  fmt::print("{:<38}", "");
  for (const auto& p : phases) fmt::print("{:>11}", p.name);
  fmt::print("\n");
  auto row = [&](std::string_view label, auto cell) {
    fmt::print("{:<38}", label);
    for (const auto& p : phases) fmt::print("{:>11}", cell(p));
    fmt::print("\n");
  };
  row("calls that succeeded", [](const phase& p) { return percent(p.successes, p.calls); });
  row("  of those started outside the outage",
      [](const phase& p) { return percent(p.successes_outside_outage, p.calls_outside_outage); });
  row("attempts per call", [](const phase& p) {
    return fmt::format("{:.2f}", p.calls ? static_cast<double>(p.attempts) / static_cast<double>(p.calls) : 0.0);
  });
  row("server requests per 100 ms, peak", [](const phase& p) { return fmt::format("{}", peak_load(p)); });
  row("  mean", [](const phase& p) { return fmt::format("{:.1f}", mean_load(p)); });
  row("  mean in the outage", [&](const phase& p) { return fmt::format("{:.1f}", mean_load_in_outage(s, p)); });
  if (s.outage_from < s.duration)
    row("  outage's first 500 ms, per call", [&](const phase& p) {
      return fmt::format("{:.2f}", outage_start_amplification(s, p));
    });
  row("latency p99 (ms)", [](const phase& p) { return fmt::format("{:.0f}", summarize(p).p99); });
  row("  of successes",
      [](const phase& p) { return fmt::format("{:.0f}", summarize(p, outcome::succeeded).p99); });
  row("  of failures", [](const phase& p) { return fmt::format("{:.0f}", summarize(p, outcome::failed).p99); });
  row("latency max (ms)", [](const phase& p) { return fmt::format("{:.0f}", summarize(p).max); });
}

// The tops of the bumps over capacity that a phase honouring Retry-After
// makes when the callers a burst of 503 + Retry-After turned away all come
// back together: outside the outage and the bursts, from Retry-After after a
// burst began until Retry-After plus the client's backoff after it ended.
struct bump {
  std::size_t phase, window;
  int load;
};

std::vector<bump> retry_after_returns(const scenario& s, const std::vector<phase>& phases) {
  std::vector<bump> out;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const auto& p = phases[i];
    if (p.retry_after_honoured == 0) continue;
    for (auto b = s.burst_first; b < s.duration; b += s.burst_every) {
      if (s.in_outage(b)) continue;
      std::optional<bump> top;
      for (auto t = b + retry_after; t < std::min(s.duration, b + s.burst + retry_after + resilient_backoff_cap);
           t += window) {
        const auto w = static_cast<std::size_t>(t / window);
        if (w >= p.load.size() || s.in_outage(t) || s.in_burst(t) || p.load[w] <= s.capacity) continue;
        if (!top || p.load[w] > top->load) top = bump{i, w, p.load[w]};
      }
      if (top) out.push_back(*top);
    }
  }
  return out;
}

// Three panels on one time axis: the server's load, then the p99 latency of
// the calls that succeeded and of those that failed, apart: a client that
// fails fast (a breaker refusing) is not slow, and one that waits out a
// Retry-After before succeeding is slow only for those calls.
std::string svg_chart(const scenario& s, const std::vector<phase>& phases) {
  static constexpr const char* colours[] = {"#7f7f7f", "#d62728", "#1f77b4", "#2ca02c"};
  constexpr double width = 1040, left = 64, right = 270, load_h = 240, latency_h = 160, gap = 78;
  constexpr double top_load = 70, top_ok = top_load + load_h + gap, top_failed = top_ok + latency_h + gap;
  constexpr double height = top_failed + latency_h + 40;
  const double plot_w = width - left - right;
  const double span = seconds(s.duration);
  const double time_step = nice_step(span, 8);
  auto x = [&](double sec) { return left + plot_w * sec / span; };
  auto colour_of = [&](std::size_t i) { return colours[i % std::size(colours)]; };

  std::string out = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='{}' y='24' font-size='16'>{} users against a failing server, once per client; the same fault "
      "schedule each time</text>\n",
      width, height, left, s.users);
  auto shade = [&](double top, double h, double from, double to, const char* fill) {
    if (to <= from) return;
    out += fmt::format("<rect x='{:.1f}' y='{}' width='{:.1f}' height='{}' fill='{}'/>\n", x(from), top,
                       x(to) - x(from), h, fill);
  };
  auto panel = [&](double top, double h, std::string_view title, double ymax, std::string_view unit) {
    // The outage, and the bursts of 503 + Retry-After, behind the lines.
    shade(top, h, seconds(s.outage_from), std::min(span, seconds(s.outage_to)), "#fbe3e3");
    for (auto b = s.burst_first; b < s.duration; b += s.burst_every) {
      if (!s.in_outage(b)) shade(top, h, seconds(b), std::min(span, seconds(b + s.burst)), "#fdf0d8");
    }
    out += fmt::format("<text x='{}' y='{}' font-size='14'>{}</text>\n", left, top - 10, title);
    out += fmt::format("<line x1='{0}' y1='{1}' x2='{0}' y2='{2}' stroke='black'/>\n", left, top, top + h);
    out += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='black'/>\n", left, top + h, left + plot_w);
    for (int i = 0; i <= 5; ++i) {
      const double v = ymax * i / 5.0;
      out += fmt::format("<text x='{}' y='{:.1f}' text-anchor='end'>{:.0f}{}</text>\n", left - 6,
                         top + h * (1 - i / 5.0) + 4, v, i == 5 ? unit : "");
      if (i > 0) {
        out += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='#000' stroke-opacity='0.08'/>\n",
                           left + 1, top + h * (1 - i / 5.0), left + plot_w, top + h * (1 - i / 5.0));
      }
    }
    for (double sec = 0; sec <= span + 1e-9; sec += time_step) {
      out += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{:g} s</text>\n", x(sec), top + h + 16, sec);
    }
    if (s.outage_from < s.duration) {
      out += fmt::format("<text x='{:.1f}' y='{}' fill='#b03030'>outage</text>\n", x(seconds(s.outage_from)) + 4,
                         top + 14);
    }
  };
  // Earlier phases drawn wider, so that a later line on the same values
  // leaves them visible on either side.
  auto stroke_width = [&](std::size_t i) { return 1.5 + 1.2 * static_cast<double>(phases.size() - 1 - i); };
  auto line = [&](double top, double h, double ymax, const std::vector<double>& values, double step, std::size_t i) {
    std::string points;
    for (std::size_t k = 0; k < values.size(); ++k) {
      points += fmt::format("{:.1f},{:.1f} ", x(step * (static_cast<double>(k) + 0.5)),
                            top + h * (1.0 - values[k] / ymax));
    }
    out += fmt::format("<polyline fill='none' stroke='{}' stroke-width='{:.1f}' stroke-linejoin='round' "
                       "points='{}'/>\n",
                       colour_of(i), stroke_width(i), points);
  };
  // One level per bucket, held across it; a gap where the bucket had no call
  // of that kind (NaN), not a zero.
  auto steps = [&](double top, double h, double ymax, const std::vector<double>& values, double step, std::size_t i) {
    std::string path;
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (std::isnan(values[k])) continue;
      const double y = top + h * (1.0 - values[k] / ymax);
      const bool joined = k > 0 && !std::isnan(values[k - 1]);
      path += fmt::format("{}{:.1f},{:.1f} H{:.1f} ", joined ? "L" : "M", x(step * static_cast<double>(k)), y,
                          x(std::min(span, step * static_cast<double>(k + 1))));
    }
    out += fmt::format("<path fill='none' stroke='{}' stroke-width='{:.1f}' d='{}'/>\n", colour_of(i),
                       stroke_width(i), path);
  };

  // Load, on a range that holds every phase's peak.
  int peak = 1;
  for (const auto& p : phases) peak = std::max(peak, peak_load(p));
  const double load_max = nice_top(std::max(peak, s.capacity) * 1.08);
  panel(top_load, load_h, fmt::format("Requests reaching the server per {} ms", ms(window).count()), load_max, "");
  const double cap_y = top_load + load_h * (1.0 - s.capacity / load_max);
  out += fmt::format("<line x1='{0}' y1='{1:.1f}' x2='{2}' y2='{1:.1f}' stroke='#444' stroke-dasharray='5 3'/>"
                     "<text x='{3}' y='{4:.1f}' fill='#444' text-anchor='end'>capacity {5}</text>\n",
                     left, cap_y, left + plot_w, left + plot_w - 4, cap_y - 4, s.capacity);
  for (auto b = s.burst_first; b < s.duration; b += s.burst_every) {
    if (s.in_outage(b)) continue;
    out += fmt::format("<text x='{:.1f}' y='{}' font-size='10' fill='#9a6a10' text-anchor='middle'>503s</text>\n",
                       x(seconds(b + s.burst / 2)), top_load + 12);
  }
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const auto& p = phases[i];
    line(top_load, load_h, load_max, std::vector<double>(p.load.begin(), p.load.end()), seconds(window), i);
  }
  for (const auto& b : retry_after_returns(s, phases)) {
    const double px = x(seconds(window) * (static_cast<double>(b.window) + 0.5));
    const double py = top_load + load_h * (1.0 - b.load / load_max);
    out += fmt::format("<line x1='{0:.1f}' y1='{1:.1f}' x2='{0:.1f}' y2='{2:.1f}' stroke='{3}'/>"
                       "<text x='{0:.1f}' y='{4:.1f}' font-size='10' fill='{3}' text-anchor='middle'>"
                       "<tspan x='{0:.1f}'>back after</tspan><tspan x='{0:.1f}' dy='11'>Retry-After</tspan></text>\n",
                       px, py - 3, py - 14, colour_of(b.phase), py - 38);
  }

  // What each phase's line does in the outage and the first burst, said on the line.
  auto label_at = [&](std::size_t i, double sec, double load, std::string_view first, std::string_view second) {
    const double y = top_load + load_h * (1.0 - load / load_max) - (second.empty() ? 6 : 19);
    out += fmt::format("<text x='{0:.1f}' y='{1:.1f}' font-size='11' fill='{2}' text-anchor='middle'>"
                       "<tspan x='{0:.1f}'>{3}</tspan><tspan x='{0:.1f}' dy='13'>{4}</tspan></text>\n",
                       x(sec), y, colour_of(i), first, second);
  };
  const auto window_at = [&](sclock::duration t) { return static_cast<std::size_t>(t / window); };
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const auto& p = phases[i];
    if (p.refused > 0 && s.outage_from < s.duration) {
      // Where the breaker is open the load drops below the plain client's own.
      const auto mid = s.outage_from + (std::min(s.outage_to, s.duration) - s.outage_from) / 2;
      if (const auto w = window_at(mid); w < p.load.size()) {
        label_at(i, seconds(mid), p.load[w], "breaker open: few requests reach the server", "");
      }
    }
    if (p.retry_after_ignored > 0) {
      // The first burst outside the outage: the load that retrying at once adds.
      for (auto b = s.burst_first; b < s.duration; b += s.burst_every) {
        if (s.in_outage(b)) continue;
        const auto from = std::min(window_at(b), p.load.size());
        const auto to = std::min(window_at(b + s.burst) + 1, p.load.size());
        if (from == to) break;
        const int top = *std::max_element(p.load.begin() + static_cast<long>(from),
                                          p.load.begin() + static_cast<long>(to));
        label_at(i, seconds(b + s.burst / 2), top, "retries at once,", "Retry-After ignored");
        break;
      }
    }
  }

  // Latency: one scale for both panels, so that they compare.
  std::vector<std::vector<double>> ok_p99, failed_p99;
  double latency_max = 1;
  for (const auto& p : phases) {
    ok_p99.push_back(p99_over_time(s, p, true));
    failed_p99.push_back(p99_over_time(s, p, false));
    for (const auto* series : {&ok_p99.back(), &failed_p99.back()}) {
      for (double v : *series) {
        if (!std::isnan(v)) latency_max = std::max(latency_max, v);
      }
    }
  }
  latency_max = nice_top(latency_max * 1.05);
  const auto bucket_ms = ms(latency_bucket).count();
  for (const auto& [top, which] : {std::pair{top_ok, "SUCCEEDED"}, std::pair{top_failed, "FAILED"}}) {
    panel(top, latency_h,
          fmt::format("p99 latency of the calls that {}, by start time ({} ms buckets)", which, bucket_ms),
          latency_max, " ms");
  }
  for (std::size_t i = 0; i < phases.size(); ++i) {
    steps(top_ok, latency_h, latency_max, ok_p99[i], seconds(latency_bucket), i);
    steps(top_failed, latency_h, latency_max, failed_p99[i], seconds(latency_bucket), i);
  }

  // Legends, right of each panel.
  const double lx = width - right + 16;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const auto& p = phases[i];
    const double ly = top_load + 6 + 34.0 * static_cast<double>(i);
    out += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='{3}' stroke-width='3'/>"
                       "<text x='{4}' y='{5}' font-weight='bold'>{6}</text>"
                       "<text x='{4}' y='{7}' fill='#444'>peak {8}, {9} of calls ok</text>\n",
                       lx, ly, lx + 20, colour_of(i), lx + 26, ly + 4, p.name, ly + 18, peak_load(p),
                       percent(p.successes, p.calls));
  }
  const double keys = top_load + 6 + 34.0 * static_cast<double>(phases.size()) + 4;
  out += fmt::format("<rect x='{}' y='{}' width='18' height='11' fill='#fbe3e3'/><text x='{}' y='{}'>outage: 503 "
                     "or reset</text>\n",
                     lx + 1, keys, lx + 26, keys + 10);
  out += fmt::format("<rect x='{}' y='{}' width='18' height='11' fill='#fdf0d8'/><text x='{}' y='{}'>burst: 503 + "
                     "Retry-After: 1</text>\n",
                     lx + 1, keys + 20, lx + 26, keys + 30);
  auto latency_legend = [&](double top, outcome of) {
    for (std::size_t i = 0; i < phases.size(); ++i) {
      const auto& p = phases[i];
      const long n = std::count_if(p.latencies.begin(), p.latencies.end(),
                                   [&](const latency_sample& l) { return l.succeeded == (of == outcome::succeeded); });
      const auto l = summarize(p, of);
      const double ly = top + 4 + 34.0 * static_cast<double>(i);
      out += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='{3}' stroke-width='3'/>"
                         "<text x='{4}' y='{5}'><tspan font-weight='bold'>{6}</tspan>: {7} calls</text>"
                         "<text x='{4}' y='{8}' fill='#444'>p50 {9:.0f} ms, p99 {10:.0f} ms</text>\n",
                         lx, ly, lx + 20, colour_of(i), lx + 26, ly + 4, p.name, n, ly + 18, l.p50, l.p99);
    }
  };
  latency_legend(top_ok, outcome::succeeded);
  latency_legend(top_failed, outcome::failed);
  // Why a client's line sits where it does, from its own counts, under the legends.
  const double notes = 4 + 34.0 * static_cast<double>(phases.size()) + 4;
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const auto& p = phases[i];
    auto note = [&](double top, std::string_view first, std::string second) {
      out += fmt::format("<text x='{0}' y='{1}' font-size='11' fill='{2}'><tspan x='{0}'>{3}</tspan>"
                         "<tspan x='{0}' dy='13'>{4}</tspan></text>\n",
                         lx, top + notes, colour_of(i), first, second);
    };
    if (p.retry_after_honoured > 0) {
      note(top_ok, fmt::format("{}: slow successes waited out", p.name),
           fmt::format("Retry-After: 1 s ({} times)", p.retry_after_honoured));
    }
    if (p.refused > 0) {
      note(top_failed, fmt::format("{}: {} of {} failures refused", p.name, p.refused, p.failures()),
           "at once by its open breaker");
    }
  }
  return out + "</svg>\n";
}

bool parse_seconds(std::string_view text, sclock::duration& out) {
  char* end = nullptr;
  const std::string t(text);
  const double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || *end != '\0' || !(v >= 0) || v > 3600) return false;
  out = std::chrono::duration_cast<sclock::duration>(std::chrono::duration<double>(v));
  return true;
}

bool parse_rate(const char* text, double& out) {
  char* end = nullptr;
  out = std::strtod(text, &end);
  return end != text && *end == '\0' && out >= 0 && out <= 1;
}

bool parse_int(const char* text, long lo, long hi, long& out) {
  char* end = nullptr;
  out = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && out >= lo && out <= hi;
}

constexpr const char* usage =
    "usage: http_demo [--duration S] [--users N] [--interval MS] [--capacity N] [--latency MS]\n"
    "                 [--error-rate F] [--reset-rate F] [--spike-rate F] [--spike MS]\n"
    "                 [--outage FROM-TO] [--burst MS] [--burst-every S] [--seed N]\n"
    "                 [--host-hold MS] [--no-retry-budget] [--svg FILE] [--no-rate-check]\n"
    "  --duration S     seconds per phase (8); three phases\n"
    "  --outage FROM-TO seconds into each phase (2-5); 0-0 for none\n"
    "  --capacity N     requests per 100 ms the server serves (100); the rest get 503\n"
    "  --burst MS       bursts of 503 + Retry-After: 1 (300 ms, every 2.5 s from 0.5 s)\n"
    "  rates are fractions of requests: 500s 0.05, resets 0.02, 1 s spikes 0.02\n"
    "  --host-hold MS   the resilient client's max_host_hold (0, its default: off)\n"
    "  --no-retry-budget  the resilient client without its default retry budget per host\n"
    "  --no-rate-check  exit 0 even if resilient succeeded less often than plain\n";

}  // namespace

int main(int argc, char** argv) {
  scenario s;
  std::string svg_path = "http-demo.svg";
  bool rate_check = true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    long n = 0;
    bool ok = value != nullptr;
    if (arg == "--no-rate-check") {
      rate_check = false;
      continue;
    }
    if (arg == "--no-retry-budget") {
      s.retry_budget = false;
      continue;
    }
    if (arg == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (ok) {
      if (arg == "--svg") {
        svg_path = value;
      } else if (arg == "--duration") {
        ok = parse_seconds(value, s.duration) && s.duration >= 500ms;
      } else if (arg == "--users") {
        ok = parse_int(value, 1, 1000, n);
        s.users = static_cast<int>(n);
      } else if (arg == "--interval") {
        ok = parse_int(value, 2, 10000, n);
        s.interval = ms(n);
      } else if (arg == "--capacity") {
        ok = parse_int(value, 1, 1000000, n);
        s.capacity = static_cast<int>(n);
      } else if (arg == "--latency") {
        ok = parse_int(value, 0, 10000, n);
        s.latency = ms(n);
      } else if (arg == "--host-hold") {
        ok = parse_int(value, 0, 600000, n);
        s.host_hold = ms(n);
      } else if (arg == "--spike") {
        ok = parse_int(value, 0, 10000, n);
        s.spike = ms(n);
      } else if (arg == "--burst") {
        ok = parse_int(value, 0, 10000, n);
        s.burst = ms(n);
      } else if (arg == "--burst-every") {
        ok = parse_seconds(value, s.burst_every) && s.burst_every >= 100ms;
      } else if (arg == "--seed") {
        ok = parse_int(value, 0, 1L << 31, n);
        s.seed = static_cast<unsigned>(n);
      } else if (arg == "--error-rate") {
        ok = parse_rate(value, s.error_rate);
      } else if (arg == "--reset-rate") {
        ok = parse_rate(value, s.reset_rate);
      } else if (arg == "--spike-rate") {
        ok = parse_rate(value, s.spike_rate);
      } else if (arg == "--outage") {
        const std::string_view v = value;
        const auto dash = v.find('-');
        ok = dash != std::string_view::npos && parse_seconds(v.substr(0, dash), s.outage_from) &&
             parse_seconds(v.substr(dash + 1), s.outage_to) && s.outage_from <= s.outage_to;
      } else {
        ok = false;
      }
    }
    if (!ok) {
      std::fprintf(stderr, "http_demo: bad or unknown option %s\n%s", argv[i], usage);
      return 2;
    }
    ++i;
  }

  fmt::print(
      "{} users on 127.0.0.1, {:.1f} s per phase, a call per user every ~{} ms. Server faults: 500s {:.0f}%, resets {:.0f}%, "
      "{} ms spikes {:.0f}%;\n503 + Retry-After: 1 for {} ms every {:.1f} s from {:.1f} s and above {} requests "
      "per 100 ms; outage {:.1f}-{:.1f} s (503 or reset)\n\n",
      s.users, seconds(s.duration), s.interval.count(), 100 * s.error_rate, 100 * s.reset_rate, s.spike.count(),
      100 * s.spike_rate, s.burst.count(), seconds(s.burst_every), seconds(s.burst_first), s.capacity,
      seconds(s.outage_from), seconds(s.outage_to));

  std::vector<phase> phases;
  phases.push_back({.name = "plain", .what = "a Beast client: one attempt, 2 s timeout"});
  phases.push_back({.name = "naive", .what = "the same, retrying any failure at once, up to 3 times"});
  phases.push_back({.name = "resilient",
                    .what = "resilience::http::client: 2 s in all, 500 ms per attempt, 3 retries with backoff, "
                            "Retry-After, breaker"});
  const kind kinds[] = {kind::plain, kind::naive, kind::resilient};
  const auto run_start = sclock::now();
  for (std::size_t i = 0; i < phases.size(); ++i) {
    const auto started = sclock::now();
    run_phase(s, phases[i], kinds[i]);
    print_phase(s, phases[i], sclock::now() - started);
  }
  print_comparison(s, phases);

  int status = 0;
  for (const auto& p : phases) {
    if (const long bad = p.not_exactly_once()) {
      fmt::print(stderr, "http_demo: {}: {} calls did not complete exactly once\n", p.name, bad);
      status = 1;
    }
  }
  const phase& resilient = phases[2];
  if (resilient.reported_calls != resilient.calls) {
    fmt::print(stderr, "http_demo: the client reported {} finished calls of {}\n", resilient.reported_calls,
               resilient.calls);
    status = 1;
  }
  if (rate_check && resilient.success_rate() < phases[0].success_rate()) {
    fmt::print(stderr, "http_demo: the resilient client succeeded less often ({:.1f}%) than plain ({:.1f}%)\n",
               resilient.success_rate(), phases[0].success_rate());
    status = 1;
  }
  std::ofstream svg(svg_path);
  svg << svg_chart(s, phases);
  svg.close();
  if (!svg) {
    fmt::print(stderr, "http_demo: could not write {}\n", svg_path);
    status = 1;
  }
  fmt::print("\nall phases in {:.1f} s; chart of load and latency over time: {}\n", seconds(sclock::now() - run_start),
             svg_path);
  return status;
}
