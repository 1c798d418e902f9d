// samples/replicas.cpp — one upstream made of five replicas (http::server
// instances on 127.0.0.1): one answers every request with 503, one is ten
// times slower than the others, one is killed a third of the way through a
// round and brought back at two thirds. Callers keep a gateway-style client
// busy (each a call, then 5 ms of its own work), and the same load runs
// three ways:
//
//   single endpoint  the client as it is given one host: each caller's calls
//                    all go to one replica (callers spread over the five, as
//                    a fleet's clients each end up on one address of a name)
//   round robin      an upstream, every replica in turn, no ejection
//   defaults         an upstream with the defaults: peak-EWMA balancing,
//                    Envoy's outlier ejection, retries sent elsewhere
//
// Then the rules one at a time, each against the defaults: the 503 replica
// alone (how soon it is ejected, what calls cost after), the slow replica
// alone (the p99 beside four healthy replicas without it, and beside round
// robin), and the replica killed and restarted (the ejection cap, its
// return; a round of 10 s at least, killed at 1/4, back at 1/2, so that its
// probes find it back). The client retries as Envoy's retry policy does by default (a
// 25 ms base, at most 250 ms, full jitter) rather than with its own
// standalone schedule (a 2 s base), which would hide the balancing behind
// the backoff.
//
//   replicas [--seconds S] [--callers N] [--svg FILE] [--report-only]
//   (S: each round's length, 4 by default; N: 24 callers; FILE: the chart;
//   --report-only: exit 0 whatever the checks say, for a smoke run on a
//   busy machine, where real-time figures mean little)
#include <resilience/http/client.hpp>
#include <resilience/http/server.hpp>
#include <resilience/http/upstream.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/string_body.hpp>

#include <fmt/core.h>

#include "chart_scale.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace rhttp = resilience::http;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using response = http::response<http::string_body>;

constexpr auto healthy_latency = 2ms;
constexpr auto slow_latency = 20ms;
constexpr auto bucket = 250ms;  // the chart's resolution

// ---- the replicas ----------------------------------------------------------

enum class behaviour { healthy, unavailable, slow };

struct replica {
  struct handler {
    replica* self;
    asio::awaitable<response> operator()(rhttp::server_request req, const resilience::context&) const {
      self->served(clock_type::now());
      response res{http::status::ok, req.version()};
      if (self->mode == behaviour::unavailable) {
        res.result(http::status::service_unavailable);
      } else {
        asio::steady_timer work(co_await asio::this_coro::executor,
                                self->mode == behaviour::slow ? slow_latency : healthy_latency);
        co_await work.async_wait(asio::use_awaitable);
        res.body() = "42.00";
      }
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      co_return res;
    }
  };
  using server = rhttp::server<handler>;

  replica(asio::io_context& io, behaviour m, clock_type::time_point start) : io(io), mode(m), start(start) {
    listen(0);
  }

  void listen(unsigned short at) {
    auto& acceptor = acceptors.emplace_back(io);
    const asio::ip::tcp::endpoint local(asio::ip::make_address("127.0.0.1"), at);
    acceptor.open(local.protocol());
    acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true));
    acceptor.bind(local);
    acceptor.listen();
    port = acceptor.local_endpoint().port();
    auto& s = servers.emplace_back(handler{this});
    stop = std::make_unique<asio::cancellation_signal>();
    asio::co_spawn(io, s.run(acceptor), asio::bind_cancellation_slot(stop->slot(), asio::detached));
    up = true;
  }
  // As a killed process: connections dropped, the port refusing.
  void kill() {
    stop->emit(asio::cancellation_type::terminal);
    stop->emit(asio::cancellation_type::terminal);  // no grace
    acceptors.back().close();
    up = false;
  }
  void restart() {
    restarted_at = clock_type::now();
    listen(port);
  }
  void drain() {
    if (up) stop->emit(asio::cancellation_type::terminal);
  }
  void served(clock_type::time_point now) {
    ++requests;
    const auto b = static_cast<std::size_t>((now - start) / bucket);
    if (per_bucket.size() <= b) per_bucket.resize(b + 1);
    ++per_bucket[b];
    if (restarted_at && !back_at) back_at = now;
  }
  rhttp::endpoint at() const { return rhttp::endpoint::http("127.0.0.1", port); }
  std::string key() const { return at().key(); }

  asio::io_context& io;
  behaviour mode;
  clock_type::time_point start;
  unsigned short port = 0;
  bool up = false;
  // The killed one's too: its run() ends on its own.
  std::list<asio::ip::tcp::acceptor> acceptors;
  std::list<server> servers;
  std::unique_ptr<asio::cancellation_signal> stop;
  std::uint64_t requests = 0;
  std::vector<int> per_bucket;
  std::optional<clock_type::time_point> restarted_at, back_at;
};

// ---- one round -------------------------------------------------------------

enum class route { single_endpoint, round_robin, defaults };

struct round_spec {
  std::string name;
  route how;
  std::vector<behaviour> replicas;
  bool kill_one = false;  // the last replica: killed at kill_at, back at restart_at (shares of the round)
  double kill_at = 1.0 / 3, restart_at = 2.0 / 3;
};

struct call_record {
  double started_s;
  double latency_ms;
  bool ok;
  std::uint32_t attempts;
};

struct round_result {
  std::string name;
  std::vector<call_record> calls;
  std::vector<std::vector<int>> per_bucket;  // per replica
  std::vector<std::uint64_t> requests;       // per replica
  std::vector<behaviour> modes;
  struct ejection {
    double at_s;
    std::size_t replica;
    std::uint64_t its_requests;  // served by then
  };
  std::vector<ejection> ejections;
  std::size_t most_ejected = 0;
  std::size_t cap = 0;
  bool panicked = false;
  double kill_s = 0, restart_s = 0;
  std::optional<double> back_after_s;  // from the restart to its first request served
  double seconds = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

struct summary {
  std::size_t calls = 0, ok = 0;
  double attempts_per_call = 0, p50 = 0, p99 = 0;
};

summary summarize(const round_result& r, double from_s = 0, double to_s = 1e9) {
  summary s;
  std::vector<double> latencies;
  std::uint64_t attempts = 0;
  for (const auto& c : r.calls) {
    if (c.started_s < from_s || c.started_s >= to_s) continue;
    ++s.calls;
    s.ok += c.ok;
    attempts += c.attempts;
    latencies.push_back(c.latency_ms);
  }
  if (s.calls == 0) return s;
  s.attempts_per_call = static_cast<double>(attempts) / static_cast<double>(s.calls);
  s.p50 = percentile(latencies, 0.50);
  s.p99 = percentile(latencies, 0.99);
  return s;
}

round_result run_round(const round_spec& spec, double seconds, int callers) {
  asio::io_context io;
  const auto start = clock_type::now();
  std::list<replica> replicas;
  std::vector<replica*> by_index;
  for (behaviour m : spec.replicas) by_index.push_back(&replicas.emplace_back(io, m, start));
  std::vector<rhttp::endpoint> endpoints;
  for (auto* r : by_index) endpoints.push_back(r->at());

  round_result result;
  result.name = spec.name;
  result.modes = spec.replicas;
  result.seconds = seconds;
  const auto since_start = [start] { return std::chrono::duration<double>(clock_type::now() - start).count(); };

  // The replica ejections, as the client's events tell them.
  struct ejection_sink final : resilience::event_sink {
    round_result* out;
    std::vector<replica*>* replicas;
    std::function<double()> now;
    void on_event(const resilience::event& e) noexcept override {
      if (e.kind != resilience::event_kind::replica_ejected) return;
      for (std::size_t i = 0; i < replicas->size(); ++i)
        if ((*replicas)[i]->key() == e.host) out->ejections.push_back({now(), i, (*replicas)[i]->requests});
    }
  } sink;
  sink.out = &result;
  sink.replicas = &by_index;
  sink.now = since_start;

  std::optional<rhttp::upstream> upstream;
  if (spec.how != route::single_endpoint) {
    auto o = rhttp::upstream_options{}.name("prices").replicas(endpoints);
    if (spec.how == route::round_robin)
      o = o.balance(rhttp::balancer::round_robin)
              .outlier_detection(
                  rhttp::outlier_detection_options{}.consecutive_5xx(0).consecutive_gateway_failure(0));
    upstream.emplace(o);
    const auto& od = upstream->options().outlier_detection();
    result.cap = std::max<std::size_t>(1, endpoints.size() * od.max_ejection_percent() / 100);
  }
  std::uint32_t last_attempts = 0;
  rhttp::client client{
      rhttp::client_options{}
          .backoff(resilience::backoff::exponential(25ms, 2.0, 250ms).with_jitter(resilience::jitter::full))
          .events(sink)
          .on_call_finished([&](const rhttp::client_call_event& e) { last_attempts = e.attempts; })};

  const auto stop_at = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  int running = callers;
  for (int c = 0; c < callers; ++c) {
    asio::co_spawn(io, [&, c]() -> asio::awaitable<void> {
      asio::steady_timer think(co_await asio::this_coro::executor);
      const rhttp::destination to = upstream ? rhttp::destination(*upstream)
                                             : rhttp::destination(endpoints[static_cast<std::size_t>(c) % endpoints.size()]);
      while (clock_type::now() < stop_at) {
        const auto began = clock_type::now();
        auto res = co_await client.request(to, http::request<http::empty_body>{http::verb::get, "/price", 11});
        const double ms = std::chrono::duration<double, std::milli>(clock_type::now() - began).count();
        result.calls.push_back({std::chrono::duration<double>(began - start).count(), ms,
                                res.has_value() && res->result() == http::status::ok, last_attempts});
        think.expires_after(5ms);
        co_await think.async_wait(asio::use_awaitable);
      }
      if (--running == 0)
        for (auto* r : by_index) r->drain();
    }, asio::detached);
  }
  // The kill and the restart, and the upstream's state every 10 ms.
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    asio::steady_timer tick(co_await asio::this_coro::executor);
    bool killed = false, restarted = false;
    while (running > 0) {
      const double t = since_start();
      if (spec.kill_one && !killed && t >= seconds * spec.kill_at) {
        by_index.back()->kill();
        result.kill_s = t;
        killed = true;
      }
      if (spec.kill_one && killed && !restarted && t >= seconds * spec.restart_at) {
        by_index.back()->restart();
        result.restart_s = t;
        restarted = true;
      }
      if (upstream) {
        const auto status = upstream->status();
        result.most_ejected = std::max(result.most_ejected, status.ejected());
        result.panicked = result.panicked || status.panic;
      }
      tick.expires_after(10ms);
      co_await tick.async_wait(asio::use_awaitable);
    }
  }, asio::detached);
  io.run();

  for (auto* r : by_index) {
    result.per_bucket.push_back(r->per_bucket);
    result.requests.push_back(r->requests);
  }
  if (auto* killed = by_index.back(); killed->restarted_at && killed->back_at)
    result.back_after_s = std::chrono::duration<double>(*killed->back_at - *killed->restarted_at).count();
  return result;
}

// ---- the report and the chart ---------------------------------------------

const char* mode_name(behaviour m, bool killed) {
  if (killed) return "killed, then back";
  switch (m) {
    case behaviour::unavailable: return "answers 503";
    case behaviour::slow: return "10x slower";
    default: return "healthy";
  }
}

void print_round(const round_result& r, bool kill_one) {
  const summary s = summarize(r);
  fmt::print("{:<16} {:>6} calls  {:>7.3f}% ok  {:>5.2f} attempts/call  p50 {:>6.1f} ms  p99 {:>7.1f} ms\n", r.name,
             s.calls, 100.0 * static_cast<double>(s.ok) / static_cast<double>(std::max<std::size_t>(1, s.calls)),
             s.attempts_per_call, s.p50, s.p99);
  fmt::print("                 requests per replica:");
  for (std::size_t i = 0; i < r.requests.size(); ++i)
    fmt::print(" {} ({})", r.requests[i], mode_name(r.modes[i], kill_one && i + 1 == r.requests.size()));
  fmt::print("\n");
}

void write_svg(const std::string& file, const std::vector<round_result>& rounds, bool kill_one) {
  const double w = 900, panel_h = 190, top = 50, left = 60, right = 20, gap = 50;
  const double h = top + static_cast<double>(rounds.size()) * (panel_h + gap);
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='{}' y='24' font-size='15'>One upstream, five replicas: requests per second each replica served</text>\n",
      w, h, left);
  const std::array<const char*, 5> colours{"#1b9e77", "#7570b3", "#d95f02", "#e7298a", "#666666"};
  double most = 0;
  for (const auto& r : rounds)
    for (const auto& b : r.per_bucket)
      for (int n : b) most = std::max(most, n / std::chrono::duration<double>(bucket).count());
  const double y_top = nice_top(most);
  for (std::size_t p = 0; p < rounds.size(); ++p) {
    const auto& r = rounds[p];
    const summary s = summarize(r);
    const double y0 = top + static_cast<double>(p) * (panel_h + gap) + 20;
    const double x_of = (w - left - right) / r.seconds;
    const auto x = [&](double t) { return left + t * x_of; };
    const auto y = [&](double v) { return y0 + panel_h - v / y_top * panel_h; };
    svg += fmt::format("<text x='{}' y='{}' font-size='13'>{}: {:.2f}% ok, {:.2f} attempts/call, p50 {:.1f} ms, "
                       "p99 {:.1f} ms</text>\n",
                       left, y0 - 6, r.name,
                       100.0 * static_cast<double>(s.ok) / static_cast<double>(std::max<std::size_t>(1, s.calls)),
                       s.attempts_per_call, s.p50, s.p99);
    if (kill_one && r.kill_s > 0)
      svg += fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='#eeeeee'/>\n", x(r.kill_s), y0,
                         x(r.restart_s) - x(r.kill_s), panel_h);
    svg += fmt::format("<line x1='{0}' y1='{1}' x2='{0}' y2='{2}' stroke='black'/>"
                       "<line x1='{0}' y1='{2}' x2='{3}' y2='{2}' stroke='black'/>\n",
                       left, y0, y0 + panel_h, w - right);
    for (int t = 0; t <= 4; ++t) {
      const double v = y_top * t / 4;
      svg += fmt::format("<text x='{}' y='{}' text-anchor='end'>{:.0f}</text>\n", left - 4, y(v) + 4, v);
    }
    for (double t = 0; t <= r.seconds + 1e-9; t += nice_step(r.seconds, 8))
      svg += fmt::format("<text x='{}' y='{}' text-anchor='middle'>{:g} s</text>\n", x(t), y0 + panel_h + 14, t);
    for (std::size_t i = 0; i < r.per_bucket.size(); ++i) {
      std::string points;
      for (std::size_t b = 0; b * bucket < std::chrono::duration<double>(r.seconds) && b < 10000; ++b) {
        const int n = b < r.per_bucket[i].size() ? r.per_bucket[i][b] : 0;
        const double t = (static_cast<double>(b) + 0.5) * std::chrono::duration<double>(bucket).count();
        points += fmt::format("{:.1f},{:.1f} ", x(t), y(n / std::chrono::duration<double>(bucket).count()));
      }
      svg += fmt::format("<polyline fill='none' stroke='{}' stroke-width='2' points='{}'/>\n", colours[i % 5], points);
    }
  }
  // The legend, once.
  double lx = left;
  for (std::size_t i = 0; i < rounds.front().modes.size(); ++i) {
    const bool killed = kill_one && i + 1 == rounds.front().modes.size();
    svg += fmt::format("<rect x='{}' y='32' width='12' height='4' fill='{}'/><text x='{}' y='38'>{}</text>\n", lx,
                       colours[i % 5], lx + 16, mode_name(rounds.front().modes[i], killed));
    lx += 160;
  }
  svg += "</svg>\n";
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (!f || std::fwrite(svg.data(), 1, svg.size(), f) != svg.size() || std::fclose(f) != 0) {
    fmt::print(stderr, "replicas: cannot write {}\n", file);
    std::exit(1);
  }
}

int main(int argc, char** argv) {
  double seconds = 4;
  int callers = 24;
  std::string svg_file;
  bool report_only = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--report-only") {
      report_only = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) return fmt::print(stderr, "replicas: {} needs a value\n", flag), 2;
    if (flag == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (flag == "--callers") callers = std::atoi(argv[i + 1]);
    else if (flag == "--svg") svg_file = argv[i + 1];
    else return fmt::print(stderr, "usage: replicas [--seconds S] [--callers N] [--svg FILE] [--report-only]\n"), 2;
  }
  if (!(seconds >= 1) || callers < 1)
    return fmt::print(stderr, "replicas: --seconds must be at least 1 and --callers positive\n"), 2;

  using enum behaviour;
  const std::vector<behaviour> mix{healthy, healthy, unavailable, slow, healthy};
  fmt::print("Five replicas: two healthy ({} ms), one answering 503, one 10x slower ({} ms), one killed at 1/3\n"
             "of each {} s round and brought back at 2/3; {} callers.\n\n",
             healthy_latency.count(), slow_latency.count(), seconds, callers);
  std::vector<round_result> headline;
  for (const auto& spec : {round_spec{"single endpoint", route::single_endpoint, mix, true},
                           round_spec{"round robin", route::round_robin, mix, true},
                           round_spec{"defaults", route::defaults, mix, true}}) {
    headline.push_back(run_round(spec, seconds, callers));
    print_round(headline.back(), true);
  }
  bool met = true;
  const auto check = [&met](bool ok, const std::string& what) {
    fmt::print("  [{}] {}\n", ok ? "met" : "NOT MET", what);
    met = met && ok;
  };

  fmt::print("\nThe rules one at a time, with the defaults:\n");
  // One replica answering 503.
  const auto failing = run_round({"503 replica", route::defaults, {healthy, healthy, unavailable, healthy, healthy}},
                                 seconds, callers);
  print_round(failing, false);
  // Out of the way within its first consecutive_5xx (5) answers: ejected,
  // or never picked again (its first 503 cost it the set's latency estimate
  // at least, and the balancer sends the load elsewhere).
  {
    const bool ejected = !failing.ejections.empty() && failing.ejections.front().replica == 2;
    const std::uint64_t before = ejected ? failing.ejections.front().its_requests : failing.requests[2];
    check(before <= 5, ejected ? fmt::format("ejected after {} of its answers (consecutive_5xx: 5), {:.2f} s in", before,
                                             failing.ejections.front().at_s)
                               : fmt::format("not ejected: the balancer sent it {} requests in all (at most 5)", before));
    const double from = ejected ? failing.ejections.front().at_s : 0.0;
    const summary after = summarize(failing, from);
    check(static_cast<double>(after.ok) >= 0.999 * static_cast<double>(after.calls),
          fmt::format("from {:.2f} s, {} of {} calls succeed ({:.3f}%, at least 99.9%)", from, after.ok, after.calls,
                      100.0 * static_cast<double>(after.ok) / static_cast<double>(std::max<std::size_t>(1, after.calls))));
    check(after.attempts_per_call <= 1.05,
          fmt::format("{:.3f} upstream attempts per call (at most 1.05)", after.attempts_per_call));
  }
  // One replica ten times slower, beside four healthy replicas alone and beside round robin.
  const auto four = run_round({"four healthy", route::defaults, {healthy, healthy, healthy, healthy}}, seconds, callers);
  const auto slow_ewma = run_round({"slow, defaults", route::defaults, {healthy, healthy, slow, healthy, healthy}},
                                   seconds, callers);
  const auto slow_rr = run_round({"slow, round robin", route::round_robin, {healthy, healthy, slow, healthy, healthy}},
                                 seconds, callers);
  for (const auto* r : {&four, &slow_ewma, &slow_rr}) print_round(*r, false);
  const double p99_four = summarize(four).p99, p99_ewma = summarize(slow_ewma).p99, p99_rr = summarize(slow_rr).p99;
  check(p99_ewma <= 1.5 * p99_four,
        fmt::format("p99 with the slow replica {:.1f} ms, {:.2f}x that of the four healthy alone ({:.1f} ms; at most "
                    "1.5x); round robin's {:.1f} ms",
                    p99_ewma, p99_ewma / std::max(p99_four, 1e-9), p99_four, p99_rr));
  // One killed and restarted: the cap, the panic, the return. Long enough
  // for its probes (1 s after its ejection, then 2, 4, ... s) to find it back.
  const auto killed = run_round(
      {"killed, back", route::defaults, {healthy, healthy, healthy, healthy, healthy}, true, 0.25, 0.5},
      std::max(seconds, 10.0), callers);
  print_round(killed, true);
  check(killed.most_ejected <= killed.cap && !killed.panicked,
        fmt::format("at most {} ejected at once (max_ejection_percent 10% of 5, at least one): {} at most, no panic",
                    killed.cap, killed.most_ejected));
  const double base = std::chrono::duration<double>(rhttp::outlier_detection_options{}.base_ejection_time()).count();
  check(killed.back_after_s && *killed.back_after_s <= base,
        killed.back_after_s
            ? fmt::format("back in service {:.2f} s after it answered again (base_ejection_time {:.0f} s)",
                          *killed.back_after_s, base)
            : std::string("back in service after its restart"));
  const summary during = summarize(killed, killed.kill_s, killed.restart_s);
  fmt::print("  while it was down: {:.3f}% of {} calls ok, {:.2f} attempts per call\n",
             100.0 * static_cast<double>(during.ok) / static_cast<double>(std::max<std::size_t>(1, during.calls)),
             during.calls, during.attempts_per_call);

  if (!svg_file.empty()) {
    write_svg(svg_file, headline, true);
    fmt::print("\nchart: {}\n", svg_file);
  }
  fmt::print("\n{}\n", met ? "all met" : "SOME NOT MET");
  return met || report_only ? 0 : 1;
}
