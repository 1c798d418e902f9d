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
//     service's own counter, in Prometheus' text format; /status the running
//     policies (their version and source) as JSON.
//
// Its policies (the upstream client's retries, budget, timeouts, breaker;
// the server's limits) come from a JSON document, samples/gateway-policies.json
// by default (docs/config.md), read again whenever the file changes: a new
// call runs under the policies as they are when it starts.
//
// The service is the first part of this file (to the line "the demo"). The
// rest runs it for a few seconds against an upstream that injects faults (a
// 503 with Retry-After: 1 for one request in 5, a 10 s stall for one in 25)
// under callers that give each request 5 s (grpc-timeout), then prints what
// each side counted and checks that the counts agree. With --edit-at S it
// runs on a copy of the policies and, S seconds in, edits the copy as an
// operator would during an incident (the upstream's attempt_timeout from
// 10 s to 200 ms), then shows the calls before and after.
//
//   gateway [--seconds S] [--callers N] [--page FILE]   (FILE: the /metrics page as served)
//           [--policies FILE] [--edit-at S]
//           [--grpc-timeout T] [--retry-after S|none] [--fit-to-time-left on|off]
//           [--budget grpc|client-default]   (these two override the policies file)
// These try the rule for short deadlines: `--grpc-timeout 500m --retry-after
// none --budget client-default` (503s without Retry-After, which a call may
// retry after a backoff fitted to the time it has left, under the client's
// default budget: gRPC's throttling refuses most retries when one call in 5
// fails), against the same with `--fit-to-time-left off`.
#include <resilience/config_watch.hpp>
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
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace rhttp = resilience::http;
using namespace std::chrono_literals;
using response = http::response<http::string_body>;

// ---- the service -----------------------------------------------------------

class gateway {
 public:
  // What a run of the demo may change in code (--fit-to-time-left, --budget);
  // a service would have none.
  using client_override = std::function<rhttp::client_options(rhttp::client_options)>;

  gateway(rhttp::endpoint upstream, resilience::metrics& telemetry, asio::any_io_executor ex,
          const std::string& policies_file, client_override override = {})
      : upstream_(std::move(upstream)),
        quotes_(telemetry.counter("gateway.quotes", {{"outcome", "ok"}}, "Quotes answered, by outcome.")),
        failed_(telemetry.counter("gateway.quotes", {{"outcome", "failed"}})),
        policies_(resilience::config::read_file(policies_file), policies_file, hooks(telemetry, std::move(override))),
        watch_(std::move(ex), policies_, policies_file),  // a changed file is a reload
        server_(rhttp::with_metrics_page(telemetry, "/metrics", handler{this}),
                policies_.current()
                    ->http_server(gateway_key)  // read once: a server's limits are set when it starts
                    .events(telemetry.events("gateway"))  // shed, refused, 504, slow clients
                    .on_request_finished(rhttp::server_meter{telemetry})
                    .on_slow_client(rhttp::server_meter{telemetry})) {
    policies_.events(telemetry.events("config"));  // reloads, accepted or refused: on /metrics
  }

  // What the document cannot say: where the upstream client reports. Added
  // to each client a snapshot builds.
  resilience::config::code_hooks hooks(resilience::metrics& telemetry, client_override override) {
    resilience::config::code_hooks h;
    h.http_client = [this, &telemetry, override = std::move(override)](std::string_view, rhttp::client_options o) {
      if (override) o = override(std::move(o));
      return o.events(telemetry.events("upstream"))  // retries, refusals, breaker: on /metrics
          .on_call_finished([this, meter = rhttp::client_meter{telemetry}](const rhttp::client_call_event& e) {
            meter(e);
            attempts_ += e.attempts;
          });
    };
    return h;
  }

  asio::awaitable<void> run(asio::ip::tcp::acceptor& acceptor) { return server_.run(acceptor); }
  void drain() {
    watch_.stop();
    server_.drain();
  }
  std::uint64_t upstream_attempts() const { return attempts_; }
  const resilience::config::live_config& policies() const { return policies_; }

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
      // The policies as they are now, held for the whole call; ctx carries the
      // inbound deadline: the call, its retries and its waits end by then.
      const auto now = policies_.current();
      auto price = co_await now->http_client(upstream_key).request(
          upstream_, http::request<http::empty_body>{http::verb::get, "/price", 11}, ctx);
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
    if (req.target() == "/status") {  // the running policies, for an operator (no admin actions here)
      res.result(http::status::ok);
      res.set(http::field::content_type, "application/json");
      res.body() = resilience::config::status_json(*policies_.current());
    }
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    co_return res;
  }

  // The document's entries this service uses, looked up by key (an index).
  inline static const resilience::config::name_key upstream_key{"upstream"}, gateway_key{"gateway"};

  rhttp::endpoint upstream_;
  resilience::metric_counter_ref quotes_, failed_;
  std::uint64_t attempts_ = 0;
  resilience::config::live_config policies_;  // owns the upstream client: before the server, which calls it
  resilience::config::file_watch watch_;
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

// Writes `text` as an editor does: aside, then renamed over the file.
bool replace_file(const std::string& path, const std::string& text) {
  const std::string aside = path + ".new";
  std::FILE* f = std::fopen(aside.c_str(), "w");
  if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0) return false;
  std::error_code ec;
  std::filesystem::rename(aside, path, ec);
  return !ec;
}

int main(int argc, char** argv) {
  double seconds = 5, edit_at = -1;
  int callers = 20;
  std::string page_file, grpc_timeout = "5S", policies = RESILIENCE_GATEWAY_POLICIES;
  flaky_upstream faults;
  std::optional<bool> fit, grpc_budget;  // given: they override the policies file
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (flag == "--callers") callers = std::atoi(argv[i + 1]);
    else if (flag == "--page") page_file = argv[i + 1];
    else if (flag == "--policies") policies = argv[i + 1];
    else if (flag == "--edit-at") edit_at = std::atof(argv[i + 1]);
    else if (flag == "--grpc-timeout") grpc_timeout = argv[i + 1];
    else if (flag == "--retry-after") faults.retry_after = flag_value(argv[i + 1], "none") ? "" : argv[i + 1];
    else if (flag == "--fit-to-time-left" && (flag_value(argv[i + 1], "on") || flag_value(argv[i + 1], "off")))
      fit = flag_value(argv[i + 1], "on");
    else if (flag == "--budget" && (flag_value(argv[i + 1], "grpc") || flag_value(argv[i + 1], "client-default")))
      grpc_budget = flag_value(argv[i + 1], "grpc");
    else
      return fmt::print(stderr, "usage: gateway [--seconds S] [--callers N] [--page FILE] [--policies FILE]\n"
                                "               [--edit-at S] [--grpc-timeout T] [--retry-after S|none]\n"
                                "               [--fit-to-time-left on|off] [--budget grpc|client-default]\n"), 2;
  }
  if (!(seconds > 0) || callers < 1) return fmt::print(stderr, "gateway: --seconds and --callers must be positive\n"), 2;
  if (edit_at >= seconds) return fmt::print(stderr, "gateway: --edit-at must come before --seconds ends\n"), 2;
  // The edit is made to a copy: the file given stays as it is.
  std::filesystem::path edit_dir;
  if (edit_at >= 0) {
    edit_dir = std::filesystem::temp_directory_path() / fmt::format("gateway-policies-{}", ::getpid());
    std::filesystem::create_directories(edit_dir);
    const std::string copy = (edit_dir / "policies.json").string();
    std::filesystem::copy_file(policies, copy, std::filesystem::copy_options::overwrite_existing);
    policies = copy;
  }
  const auto override = [&](rhttp::client_options o) {
    if (fit) o = o.fit_to_time_left(*fit);
    if (grpc_budget && *grpc_budget) o = o.budget_per_host(rhttp::retry_token_budget_settings{10, 0.1});
    if (grpc_budget && !*grpc_budget)  // the client's own: 20% of the calls, at least 10 a second
      o = o.budget_per_host(std::get<resilience::retry_ratio_budget_options>(
          rhttp::client_options::standard().budget_per_host()));
    return o;
  };

  asio::io_context io;
  const auto loopback = asio::ip::make_address("127.0.0.1");
  rhttp::server upstream{[&faults](rhttp::server_request r, const resilience::context& c) { return faults(std::move(r), c); }};
  asio::ip::tcp::acceptor upstream_acceptor{io, {loopback, 0}};
  resilience::metrics telemetry;
  std::optional<gateway> service;
  try {
    service.emplace(rhttp::endpoint::http("127.0.0.1", upstream_acceptor.local_endpoint().port()), telemetry,
                    io.get_executor(), policies, override);
  } catch (const resilience::config::error& e) {
    return fmt::print(stderr, "gateway: {}\n", e.what()), 2;  // a service does not start without its policies
  }
  asio::ip::tcp::acceptor gateway_acceptor{io, {loopback, 0}};
  const auto at = rhttp::endpoint::http("127.0.0.1", gateway_acceptor.local_endpoint().port());
  asio::co_spawn(io, upstream.run(upstream_acceptor), asio::detached);
  asio::co_spawn(io, service->run(gateway_acceptor), asio::detached);

  // The operator's edit, mid-run: a stalled upstream request holds its caller
  // for the whole deadline; a shorter attempt timeout lets it go at once.
  const auto started = std::chrono::steady_clock::now();
  asio::steady_timer edit_timer{io};
  std::string edit_outcome;
  if (edit_at >= 0) {
    edit_timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(edit_at)));
    edit_timer.async_wait([&](boost::system::error_code ec) {
      if (ec) return;
      std::string text = resilience::config::read_file(policies);
      const std::string from = "\"attempt_timeout\": \"10s\"", to = "\"attempt_timeout\": \"200ms\"";
      const std::size_t found = text.find(from);
      if (found == std::string::npos) {
        edit_outcome = fmt::format("cannot edit: {} does not say {}", policies, from);
        return;
      }
      text.replace(found, from.size(), to);
      edit_outcome = replace_file(policies, text) ? "" : "cannot write " + policies;
    });
  }

  // Callers: GET /quote with a deadline (5 s), one after another, no retries of their own.
  struct answer {
    double at, took;  // seconds since the start
    unsigned status;  // 0: no response
  };
  std::vector<answer> log;
  rhttp::client callers_client{rhttp::client_options{}.max_retries(0)};
  std::map<unsigned, int> answers;
  int calls = 0, running = callers;
  const auto stop_at = started + std::chrono::duration<double>(seconds);
  std::string page, status_page;
  const auto since_start = [&](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(t - started).count();
  };
  for (int c = 0; c < callers; ++c) {
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      while (std::chrono::steady_clock::now() < stop_at) {
        http::request<http::empty_body> req{http::verb::get, "/quote", 11};
        req.set("grpc-timeout", grpc_timeout);
        const auto sent = std::chrono::steady_clock::now();
        auto res = co_await callers_client.request(at, std::move(req));
        ++calls;
        const unsigned status = res ? res->result_int() : 0u;
        ++answers[status];
        log.push_back({since_start(sent), since_start(std::chrono::steady_clock::now()) - since_start(sent), status});
      }
      if (--running == 0) {
        // The edit's reload, if the watch has not had it yet (a loaded machine): waited for, within 5 s.
        asio::steady_timer poll{io};
        for (int i = 0; i < 500 && edit_at >= 0 && edit_outcome.empty() &&
                        service->policies().reloads_accepted() + service->policies().reloads_rejected() == 0;
             ++i) {
          poll.expires_after(10ms);
          co_await poll.async_wait(asio::use_awaitable);
        }
        auto metrics = co_await callers_client.request(at, http::request<http::empty_body>{http::verb::get, "/metrics", 11});
        if (metrics) page = metrics->body();
        auto status = co_await callers_client.request(at, http::request<http::empty_body>{http::verb::get, "/status", 11});
        if (status) status_page = status->body();
        edit_timer.cancel();
        service->drain();
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
  fmt::print("\n/status of the gateway: {}\n", status_page.substr(0, status_page.find(",\"breakers\"")) + "...}");
  fmt::print("\n/metrics of the gateway:\n");
  for (std::size_t from = 0; from < page.size();) {
    const std::size_t end = std::min(page.find('\n', from), page.size());
    const std::string line = page.substr(from, end - from);
    if (line.rfind("gateway_", 0) == 0 || line.rfind("resilience_strategy_events_total", 0) == 0 ||
        line.find("_count{") != std::string::npos)
      fmt::print("  {}\n", line);
    from = end + 1;
  }
  if (edit_at >= 0) {
    fmt::print("\nThe operator's edit at {} s: attempt_timeout 10s -> 200ms in {}\n", edit_at, policies);
    if (!edit_outcome.empty()) fmt::print("  {}\n", edit_outcome);
    fmt::print("  reloads: {} accepted, {} refused; running policies version {}\n",
               service->policies().reloads_accepted(), service->policies().reloads_rejected(),
               service->policies().current()->version());
    const auto row = [&](const char* name, bool after) {
      int n = 0, ok = 0, held = 0;
      double slowest = 0;
      for (const answer& a : log) {
        if ((a.at >= edit_at) != after) continue;
        ++n;
        ok += a.status == 200;
        held += a.took >= 1.0;
        slowest = std::max(slowest, a.took);
      }
      const double span = after ? seconds - edit_at : edit_at;
      fmt::print("  {:<18} {:>6} calls, {:>6.0f} a second: {:>5.1f}% answered 200, {:>4} held 1 s or more; slowest {:.2f} s\n",
                 name, n, n / span, n ? 100.0 * ok / n : 0.0, held, slowest);
    };
    row("started before it", false);
    row("started after it", true);
    fmt::print("  Before, an upstream request that stalls holds its caller until the caller's 5 s\n"
               "  deadline (504); after, its attempt ends at 200 ms, the upstream is told so\n"
               "  (grpc-timeout) and stops too, and callers are no longer held. Calls in flight\n"
               "  finished under the policies they started with; none failed because of the reload.\n");
    std::error_code ignored;
    std::filesystem::remove_all(edit_dir, ignored);
  }
  if (!grpc_budget || *grpc_budget)
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
                     service->upstream_attempts() == static_cast<std::uint64_t>(faults.requests) &&
                     (edit_at < 0 || (edit_outcome.empty() && service->policies().reloads_accepted() == 1)) &&
                     !answers.contains(0u);  // no caller lost its call (no answer at all)
  fmt::print("\nchecks: callers' calls {} = requests the gateway served {} = upstream calls it made {} = quotes {}\n",
             calls, served, upstream_calls, quotes);
  fmt::print("        upstream attempts the gateway's client made {} = requests the upstream counted {}\n",
             service->upstream_attempts(), faults.requests);
  fmt::print("        calls that got no answer at all: {}{}\n", answers.contains(0u) ? answers[0u] : 0,
             edit_at >= 0 ? fmt::format("; reloads accepted {} (1 expected)", service->policies().reloads_accepted()) : "");
  fmt::print("        (a retry is an attempt; a request resent on a connection the upstream had closed would\n"
             "        be a request more than attempts, and none was: {})\n",
             agree ? "all agree" : "MISMATCH");
  return agree ? 0 : 1;
}
