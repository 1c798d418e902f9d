// amplification: how retries multiply load down a chain of services, and
// what bounds it, in numbers and a chart.
//
//   amplification [--requests N] [--svg FILE]
//
// A user's client calls `top`, which calls `middle`, which calls `bottom`.
// Every caller retries its downstream: 4 attempts with exponential backoff
// and full jitter. `bottom` is down for the whole run, so every call fails;
// a service whose downstream call failed answers "unavailable" in turn. With
// plain retries each layer multiplies the load by 4: one user request becomes
// 4 x 4 x 4 = 64 calls at the bottom. The same run is repeated with each
// layer's retries bounded by
//   - a retry ratio budget (retries at most 10% of calls),
//   - gRPC's retry throttling (10 tokens, 0.1 back per success),
//   - adaptive client-side throttling (k = 2, inside the retry: each attempt
//     is judged, and a call the throttle rejects locally is not retried).
// It runs on virtual time (resilience::testing::manual_clock): the whole
// comparison takes well under a second and gives the same numbers every run.
// Exits with 1 if the shape is wrong (plain retries below 40x at the bottom,
// the budget or adaptive throttling above 2x), so the smoke test guards it.
#include <resilience/adaptive_throttle.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using resilience::backoff;
using resilience::duration;
using resilience::testing::manual_clock;

namespace {

constexpr int layers = 3;  // client -> top, top -> middle, middle -> bottom
constexpr std::array<const char*, layers> service_names{"top", "middle", "bottom"};

struct scenario {
  int requests = 2000;
  duration between_requests = 50ms;  // 20 user requests a second
  duration latency = 5ms;            // each service's own work
  std::uint32_t attempts = 4;
};

struct result {
  std::string name;
  std::array<long, layers> arrivals{};  // calls that reached each service
  long throttled_at_client = 0;         // user requests the client's own throttle turned away
  duration done_after{};

  double per_request(int layer, int requests) const {
    return static_cast<double>(arrivals[static_cast<std::size_t>(layer)]) / requests;
  }
};

const error_code unavailable = boost::system::errc::make_error_code(boost::system::errc::resource_unavailable_try_again);

// One service of the chain. `call(layer, op)` makes a call through that
// layer's client (its retries and their bound).
template <class Calls>
asio::awaitable<error_code> serve(result& r, const Calls& call, const manual_clock& clock, duration latency,
                                  int depth) {
  ++r.arrivals[static_cast<std::size_t>(depth)];
  auto timer = clock.make_timer(co_await asio::this_coro::executor);
  timer.expires_after(latency);
  co_await timer.async_wait(asio::use_awaitable);
  if (depth == layers - 1) co_return unavailable;  // the bottom is down
  const error_code downstream =
      co_await call(depth + 1, [&r, &call, &clock, latency, depth] { return serve(r, call, clock, latency, depth + 1); });
  co_return downstream ? unavailable : error_code{};
}

auto retry_policy(const manual_clock& clock, std::uint32_t attempts, int layer) {
  return resilience::retry_policy{}
      .max_attempts(attempts)
      .backoff(backoff::exponential(100ms, 2.0, 2s).with_jitter(resilience::jitter::full))
      .random(resilience::random_source::seeded(2026 + static_cast<std::uint64_t>(layer)))
      .clock(clock);
}

// Runs every user request through `call(0, ...)` and the chain below it.
template <class Calls>
result simulate(const scenario& s, std::string name, const manual_clock& clock, const Calls& call) {
  asio::io_context io;
  result r{.name = std::move(name)};
  const auto start = clock.now();
  for (int i = 0; i < s.requests; ++i) {
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          auto wait = clock.make_timer(co_await asio::this_coro::executor);
          wait.expires_after(s.between_requests * i);
          co_await wait.async_wait(asio::use_awaitable);
          const error_code ec = co_await call(0, [&] { return serve(r, call, clock, s.latency, 0); });
          if (ec == resilience::error::throttled) ++r.throttled_at_client;
          r.done_after = std::max(r.done_after, clock.now() - start);
        },
        asio::detached);
  }
  clock.run(io);
  return r;
}

result plain(const scenario& s) {
  manual_clock clock;
  const std::array policies{retry_policy(clock, s.attempts, 0), retry_policy(clock, s.attempts, 1),
                            retry_policy(clock, s.attempts, 2)};
  return simulate(s, "plain retries", clock,
                  [&](int layer, auto op) { return policies[static_cast<std::size_t>(layer)].run(std::move(op)); });
}

result ratio_budget(const scenario& s) {
  manual_clock clock;
  // No allowance for a quiet client: the ratio alone, so the bound shows.
  const auto options = resilience::retry_ratio_budget_options{}.ratio(0.1).min_retries_per_second(0);
  using budget = resilience::basic_retry_ratio_budget<manual_clock>;
  budget b0{options, clock}, b1{options, clock}, b2{options, clock};
  const std::array policies{retry_policy(clock, s.attempts, 0).budget(b0), retry_policy(clock, s.attempts, 1).budget(b1),
                            retry_policy(clock, s.attempts, 2).budget(b2)};
  return simulate(s, "retry ratio budget 10%", clock,
                  [&](int layer, auto op) { return policies[static_cast<std::size_t>(layer)].run(std::move(op)); });
}

result grpc_throttle(const scenario& s) {
  manual_clock clock;
  resilience::retry_token_budget t0{10, 0.1}, t1{10, 0.1}, t2{10, 0.1};
  const std::array policies{retry_policy(clock, s.attempts, 0).budget(t0), retry_policy(clock, s.attempts, 1).budget(t1),
                            retry_policy(clock, s.attempts, 2).budget(t2)};
  return simulate(s, "gRPC retry throttling", clock,
                  [&](int layer, auto op) { return policies[static_cast<std::size_t>(layer)].run(std::move(op)); });
}

result adaptive(const scenario& s) {
  manual_clock clock;
  using throttle = resilience::basic_adaptive_throttle<manual_clock>;
  const auto options = [](std::uint64_t seed) {
    return resilience::adaptive_throttle_options{}.k(2).window(2min).random(resilience::random_source::seeded(seed));
  };
  const throttle t0{options(1), clock}, t1{options(2), clock}, t2{options(3), clock};
  const std::array calls{resilience::pipeline(retry_policy(clock, s.attempts, 0), t0),
                         resilience::pipeline(retry_policy(clock, s.attempts, 1), t1),
                         resilience::pipeline(retry_policy(clock, s.attempts, 2), t2)};
  return simulate(s, "adaptive throttling k=2", clock,
                  [&](int layer, auto op) { return calls[static_cast<std::size_t>(layer)](std::move(op)); });
}

std::string svg_chart(const scenario& s, const std::vector<result>& results) {
  static constexpr std::array<const char*, layers> colours{"#1f77b4", "#ff7f0e", "#d62728"};
  constexpr double width = 900, height = 440, left = 70, right = 150, top = 50, bottom = 60;
  // Log scale: plain retries and the bounded runs differ by orders of
  // magnitude. Its decades reach past the smallest and largest values, so
  // that every bar has a height and none is cut off.
  double smallest = 1, largest = 1;
  for (const auto& r : results) {
    for (int l = 0; l < layers; ++l) {
      const double v = r.per_request(l, s.requests);
      if (v <= 0) continue;
      smallest = std::min(smallest, v);
      largest = std::max(largest, v);
    }
  }
  const double lo = std::floor(std::log10(smallest / 2)), hi = std::ceil(std::log10(largest * 1.2));
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  auto y = [&](double v) {
    const double l = v > 0 ? std::log10(v) : lo;  // a zero has no bar, only its label
    return top + plot_h * (1.0 - (l - lo) / (hi - lo));
  };
  std::string out = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='{}' y='24' font-size='15'>Calls reaching each service per user request ({} requests, bottom down, "
      "{} attempts per layer)</text>\n",
      width, height, left, s.requests, s.attempts);
  out += fmt::format("<line x1='{0}' y1='{1}' x2='{0}' y2='{2}' stroke='black'/>\n", left, top, top + plot_h);
  out += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='black'/>\n", left, top + plot_h, left + plot_w);
  for (double l = lo; l <= hi; l += 1) {
    const double v = std::pow(10.0, l);
    out += fmt::format("<line x1='{0}' y1='{1:.1f}' x2='{2}' y2='{1:.1f}' stroke='#ddd'/>"
                       "<text x='{3}' y='{4:.1f}' text-anchor='end'>{5}x</text>\n",
                       left, y(v), left + plot_w, left - 6, y(v) + 4, fmt::format("{:g}", v));
  }
  const double group = plot_w / static_cast<double>(results.size());
  const double bar = group / (layers + 2);
  for (std::size_t g = 0; g < results.size(); ++g) {
    const auto& r = results[g];
    const double gx = left + group * static_cast<double>(g);
    for (int l = 0; l < layers; ++l) {
      const double v = r.per_request(l, s.requests);
      const double x = gx + bar * (l + 1);
      out += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'/>"
                         "<text x='{:.1f}' y='{:.1f}' text-anchor='middle' font-size='10'>{:.3g}</text>\n",
                         x, y(v), bar - 2, top + plot_h - y(v), colours[static_cast<std::size_t>(l)], x + bar / 2 - 1,
                         y(v) - 4, v);
    }
    out += fmt::format("<text x='{:.1f}' y='{:.1f}' text-anchor='middle'>{}</text>\n", gx + group / 2,
                       top + plot_h + 20, r.name);
  }
  for (int l = 0; l < layers; ++l) {
    const double ly = top + 10 + 18.0 * l;
    out += fmt::format("<rect x='{}' y='{}' width='14' height='10' fill='{}'/><text x='{}' y='{}'>at {}</text>\n",
                       width - right + 15, ly - 9, colours[static_cast<std::size_t>(l)], width - right + 35, ly,
                       service_names[static_cast<std::size_t>(l)]);
  }
  return out + "</svg>\n";
}

}  // namespace

int main(int argc, char** argv) {
  scenario s;
  std::string svg_path = "amplification.svg";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--svg" && has_value) {
      svg_path = argv[++i];
    } else if (arg == "--requests" && has_value) {
      s.requests = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: amplification [--requests N] [--svg FILE]\n");
      return 2;
    }
  }
  if (s.requests < 1) {
    std::fprintf(stderr, "amplification: --requests must be at least 1\n");
    return 2;
  }

  fmt::print("{} user requests, one every {} ms; client -> top -> middle -> bottom, bottom down throughout;\n"
             "every caller makes up to {} attempts (exponential backoff from 100 ms, full jitter); virtual time\n\n",
             s.requests, std::chrono::duration_cast<std::chrono::milliseconds>(s.between_requests).count(),
             s.attempts);
  fmt::print("{:<26} {:>16} {:>16} {:>16} {:>11} {:>19}\n", "", "calls at top", "calls at middle", "calls at bottom",
             "x per layer", "throttled at client");
  fmt::print("{:<26} {:>16} {:>16} {:>16}\n", "strategy", "per request", "per request", "per request");
  std::vector<result> results{plain(s), ratio_budget(s), grpc_throttle(s), adaptive(s)};
  for (const auto& r : results) {
    const double at_bottom = r.per_request(2, s.requests);
    fmt::print("{:<26} {:>16.3f} {:>16.3f} {:>16.3f} {:>11.2f} {:>18.1f}%\n", r.name, r.per_request(0, s.requests),
               r.per_request(1, s.requests), at_bottom, std::cbrt(at_bottom),
               100.0 * static_cast<double>(r.throttled_at_client) / s.requests);
  }
  std::ofstream(svg_path) << svg_chart(s, results);
  fmt::print("\nchart: {}\n", svg_path);

  // The shape the demo exists to show.
  bool ok = true;
  const auto expect = [&](bool holds, std::string_view what) {
    if (!holds) {
      fmt::print(stderr, "amplification: unexpected shape: {}\n", what);
      ok = false;
    }
  };
  expect(results[0].per_request(2, s.requests) >= 40, "plain retries reach the bottom less than 40x");
  expect(results[1].per_request(2, s.requests) <= 2, "the retry ratio budget lets more than 2x reach the bottom");
  expect(results[3].per_request(2, s.requests) <= 2, "adaptive throttling lets more than 2x reach the bottom");
  return ok ? 0 : 1;
}
