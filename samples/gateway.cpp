// samples/gateway.cpp — a Beast service that calls another, with the
// library's defaults doing the work: GET /quote asks an upstream for
// /price and answers with it.
//
//   - the inbound deadline (grpc-timeout) bounds the upstream call, passed on
//     in one argument; past it the client gets 504;
//   - the upstream call retries (honouring Retry-After, never sooner), under
//     a retry budget and a breaker per upstream host;
//   - at most 64 requests are served at once: the next get 503 at once;
//   - /metrics serves OpenTelemetry's HTTP metrics for both sides, with the
//     service's own counter, in Prometheus' text format.
//
// The service is the first part of this file (to the line "the demo"). The
// rest runs it for a few seconds against an upstream that injects faults (a
// 503 with Retry-After: 1 for one request in 5, a 10 s stall for one in 25)
// under callers that give each request 5 s (grpc-timeout), then prints what
// each side counted and checks that the counts agree.
//
//   gateway [--seconds S] [--callers N] [--page FILE]   (FILE: the /metrics page as served)
//           [--grpc-timeout T] [--retry-after S|none] [--fit-to-time-left on|off]
//           [--budget grpc|client-default]
// These try the rule for short deadlines: `--grpc-timeout 500m --retry-after
// none --budget client-default` (503s without Retry-After, which a call may
// retry after a backoff fitted to the time it has left, under the client's
// default budget: gRPC's throttling refuses most retries when one call in 5
// fails), against the same with `--fit-to-time-left off`.
#include <resilience/http/client.hpp>
#include <resilience/http/metrics_page.hpp>
#include <resilience/http/server.hpp>
#include <resilience/http/telemetry.hpp>
#include <resilience/metrics.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/string_body.hpp>

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace rhttp = resilience::http;
using namespace std::chrono_literals;
using response = http::response<http::string_body>;

// ---- the service -----------------------------------------------------------

class gateway {
 public:
  gateway(rhttp::endpoint upstream, resilience::metrics& telemetry, bool fit_to_time_left = true,
          bool grpc_budget = true)
      : upstream_(std::move(upstream)),
        quotes_(telemetry.counter("gateway.quotes", {{"outcome", "ok"}}, "Quotes answered, by outcome.")),
        failed_(telemetry.counter("gateway.quotes", {{"outcome", "failed"}})),
        client_(budgeted(grpc_budget)
                    .fit_to_time_left(fit_to_time_left)
                    .events(telemetry.events("upstream"))  // retries, refusals, breaker: on /metrics
                    .on_call_finished([this, meter = rhttp::client_meter{telemetry}](const rhttp::client_call_event& e) {
                      meter(e);
                      attempts_ += e.attempts;
                    })),
        server_(rhttp::with_metrics_page(telemetry, "/metrics", handler{this}),
                rhttp::server_options{}
                    .max_concurrent(64)
                    .events(telemetry.events("gateway"))  // shed, refused, 504, slow clients
                    .on_request_finished(rhttp::server_meter{telemetry})
                    .on_slow_client(rhttp::server_meter{telemetry})) {}

  static rhttp::client_options budgeted(bool grpc_budget) {
    if (!grpc_budget) return {};  // the client's own: 20% of the calls, at least 10 a second
    return rhttp::client_options{}.budget_per_host(
        rhttp::retry_token_budget_settings{10, 0.1});  // retries stop when most calls fail
  }

  asio::awaitable<void> run(asio::ip::tcp::acceptor& acceptor) { return server_.run(acceptor); }
  void drain() { server_.drain(); }
  std::uint64_t upstream_attempts() const { return attempts_; }

 private:
  struct handler {
    gateway* self;
    asio::awaitable<response> operator()(rhttp::server_request req, const resilience::context& ctx) const {
      return self->quote(std::move(req), ctx);
    }
  };

  asio::awaitable<response> quote(rhttp::server_request req, const resilience::context& ctx) {
    response res{http::status::not_found, req.version()};
    if (req.target() == "/quote") {
      // ctx carries the inbound deadline: the call, its retries and its waits end by then.
      auto price = co_await client_.request(upstream_, http::request<http::empty_body>{http::verb::get, "/price", 11}, ctx);
      if (price && price->result() == http::status::ok) {
        res.result(http::status::ok);
        res.body() = "quote: " + price->body();
        quotes_.add();
      } else {
        // The upstream's own status, or 502 when there was none (refused, timed out).
        res.result(price ? price->result() : http::status::bad_gateway);
        res.body() = price ? price->body() : price.error().message();
        failed_.add();
      }
    }
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    co_return res;
  }

  rhttp::endpoint upstream_;
  resilience::metric_counter_ref quotes_, failed_;
  std::uint64_t attempts_ = 0;
  rhttp::client client_;
  rhttp::server<rhttp::metrics_page_handler<handler>> server_;
};

// ---- the demo --------------------------------------------------------------

// The upstream: answers /price, with faults.
struct flaky_upstream {
  std::string retry_after = "1";  // empty: none
  int requests = 0, unavailable = 0, stalled = 0;
  asio::awaitable<response> operator()(rhttp::server_request req, const resilience::context&) {
    const int n = ++requests;
    response res{http::status::ok, req.version()};
    if (n % 5 == 0) {
      ++unavailable;
      res.result(http::status::service_unavailable);
      if (!retry_after.empty()) res.set(http::field::retry_after, retry_after);
    } else if (n % 25 == 1) {
      ++stalled;
      asio::steady_timer stall(co_await asio::this_coro::executor, 10s);
      co_await stall.async_wait(asio::use_awaitable);  // the gateway's deadline cuts it first
      res.body() = "slow";
    } else {
      res.body() = "42.00";
    }
    res.prepare_payload();
    co_return res;
  }
};

bool flag_value(const char* given, const char* expected) { return std::string(given) == expected; }

int main(int argc, char** argv) {
  double seconds = 5;
  int callers = 20;
  std::string page_file, grpc_timeout = "5S";
  flaky_upstream faults;
  bool fit = true, grpc_budget = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (flag == "--callers") callers = std::atoi(argv[i + 1]);
    else if (flag == "--page") page_file = argv[i + 1];
    else if (flag == "--grpc-timeout") grpc_timeout = argv[i + 1];
    else if (flag == "--retry-after") faults.retry_after = flag_value(argv[i + 1], "none") ? "" : argv[i + 1];
    else if (flag == "--fit-to-time-left" && (flag_value(argv[i + 1], "on") || flag_value(argv[i + 1], "off")))
      fit = flag_value(argv[i + 1], "on");
    else if (flag == "--budget" && (flag_value(argv[i + 1], "grpc") || flag_value(argv[i + 1], "client-default")))
      grpc_budget = flag_value(argv[i + 1], "grpc");
    else
      return fmt::print(stderr, "usage: gateway [--seconds S] [--callers N] [--page FILE] [--grpc-timeout T]\n"
                                "               [--retry-after S|none] [--fit-to-time-left on|off]\n"
                                "               [--budget grpc|client-default]\n"), 2;
  }
  if (!(seconds > 0) || callers < 1) return fmt::print(stderr, "gateway: --seconds and --callers must be positive\n"), 2;

  asio::io_context io;
  const auto loopback = asio::ip::make_address("127.0.0.1");
  rhttp::server upstream{[&faults](rhttp::server_request r, const resilience::context& c) { return faults(std::move(r), c); }};
  asio::ip::tcp::acceptor upstream_acceptor{io, {loopback, 0}};
  resilience::metrics telemetry;
  gateway service{rhttp::endpoint::http("127.0.0.1", upstream_acceptor.local_endpoint().port()), telemetry, fit, grpc_budget};
  asio::ip::tcp::acceptor gateway_acceptor{io, {loopback, 0}};
  const auto at = rhttp::endpoint::http("127.0.0.1", gateway_acceptor.local_endpoint().port());
  asio::co_spawn(io, upstream.run(upstream_acceptor), asio::detached);
  asio::co_spawn(io, service.run(gateway_acceptor), asio::detached);

  // Callers: GET /quote with a deadline (5 s), one after another, no retries of their own.
  rhttp::client callers_client{rhttp::client_options{}.max_retries(0)};
  std::map<unsigned, int> answers;
  int calls = 0, running = callers;
  const auto stop_at = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string page;
  for (int c = 0; c < callers; ++c) {
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      while (std::chrono::steady_clock::now() < stop_at) {
        http::request<http::empty_body> req{http::verb::get, "/quote", 11};
        req.set("grpc-timeout", grpc_timeout);
        auto res = co_await callers_client.request(at, std::move(req));
        ++calls;
        ++answers[res ? res->result_int() : 0u];
      }
      if (--running == 0) {
        auto metrics = co_await callers_client.request(at, http::request<http::empty_body>{http::verb::get, "/metrics", 11});
        if (metrics) page = metrics->body();
        service.drain();
        upstream.drain();
      }
    }, asio::detached);
  }
  io.run();

  // What the page says: each family's observations, and the service's counter.
  const auto page_sum = [&](const std::string& prefix) {
    std::uint64_t sum = 0;
    for (std::size_t from = 0; from < page.size();) {
      const std::size_t end = std::min(page.find('\n', from), page.size());
      const std::string line = page.substr(from, end - from);
      if (line.rfind(prefix, 0) == 0) sum += std::stoull(line.substr(line.rfind(' ') + 1));
      from = end + 1;
    }
    return sum;
  };
  const std::uint64_t served = page_sum("http_server_request_duration_seconds_count");
  const std::uint64_t upstream_calls = page_sum("http_client_request_duration_seconds_count");
  const std::uint64_t quotes = page_sum("gateway_quotes_total");
  fmt::print("callers: {} calls to /quote in {} s, each with grpc-timeout {}\n", calls, seconds, grpc_timeout);
  for (const auto& [status, n] : answers)
    fmt::print("  {:>5}  {}\n", status == 0 ? std::string("error") : std::to_string(status), n);
  fmt::print("upstream: {} requests; {} answered 503 {}, {} stalled 10 s\n", faults.requests, faults.unavailable,
             faults.retry_after.empty() ? std::string("without Retry-After") : "with Retry-After: " + faults.retry_after,
             faults.stalled);
  fmt::print("\n/metrics of the gateway:\n");
  for (std::size_t from = 0; from < page.size();) {
    const std::size_t end = std::min(page.find('\n', from), page.size());
    const std::string line = page.substr(from, end - from);
    if (line.rfind("gateway_", 0) == 0 || line.rfind("resilience_strategy_events_total", 0) == 0 ||
        line.find("_count{") != std::string::npos)
      fmt::print("  {}\n", line);
    from = end + 1;
  }
  if (grpc_budget)
    fmt::print("\nOne upstream request in 5 fails: more than gRPC's retry throttling (10 tokens, 0.1 back per\n"
               "success) lets through for long, so most 503s are passed on rather than retried\n"
               "(event_name=\"on_budget_refused\"); a stalled request ends at the caller's deadline as 504.\n");
  else
    fmt::print("\nThe client's own budget (20% of the calls) lets every 503 be retried; with fit_to_time_left\n"
               "the backoff is scaled to the time the deadline leaves, so the retry fits (on_retry); off,\n"
               "a wait that would end past the deadline gives up and the 503 is passed on.\n");
  if (!page_file.empty()) {
    std::FILE* f = std::fopen(page_file.c_str(), "w");
    if (!f || std::fwrite(page.data(), 1, page.size(), f) != page.size() || std::fclose(f) != 0)
      return fmt::print(stderr, "gateway: cannot write {}\n", page_file), 1;
  }
  const bool agree = served == static_cast<std::uint64_t>(calls) && upstream_calls == served && quotes == served &&
                     service.upstream_attempts() == static_cast<std::uint64_t>(faults.requests);
  fmt::print("\nchecks: callers' calls {} = requests the gateway served {} = upstream calls it made {} = quotes {}\n",
             calls, served, upstream_calls, quotes);
  fmt::print("        upstream attempts the gateway's client made {} = requests the upstream counted {}\n",
             service.upstream_attempts(), faults.requests);
  fmt::print("        (a retry is an attempt; a request resent on a connection the upstream had closed would\n"
             "        be a request more than attempts, and none was: {})\n",
             agree ? "all agree" : "MISMATCH");
  return agree ? 0 : 1;
}
