// retry_storm: why backoff and jitter matter, in numbers and a chart.
//
//   retry_storm [--svg FILE] [--workers N] [--jobs N] [--real-time]
//
// Fifty workers each send a series of jobs to one in-process service. The
// service is down for its first five seconds, and afterwards can serve only
// `capacity` requests in each 100 ms window, turning the rest away. It also
// recovers only after a calm window: a service that is still hammered when its
// outage ends stays down. The same scenario runs once per retry strategy. By
// default it runs on virtual time (resilience::testing::manual_clock), so the
// whole comparison takes well under a second and gives the same numbers
// every run; --real-time runs it on the steady clock instead.
#include "chart_scale.hpp"

#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using resilience::backoff;
using resilience::duration;
using resilience::jitter;
using resilience::time_point;

namespace {

struct scenario {
  int workers = 50;
  int jobs_per_worker = 10;
  duration outage = 5s;
  duration window = 100ms;
  int capacity = 40;         // requests served per window once recovered
  duration latency = 10ms;   // time the service takes to answer
  std::uint32_t max_attempts = 6;
};

struct strategy {
  std::string name;
  backoff delays;
};

struct result {
  std::string name;
  long attempts = 0;
  long successes = 0;
  long failures = 0;
  int peak = 0;              // most requests the service saw in one window
  duration done_after{};     // until the last worker finished
  std::vector<int> load;     // requests per window, for the chart
};

// The overloaded service. Decides at arrival, answers after `latency`.
template <class Clock>
class service {
 public:
  service(const scenario& s, Clock clock) : s_(s), clock_(clock), start_(clock.now()) {}

  asio::awaitable<boost::system::result<int>> call() {
    const auto window = static_cast<std::size_t>((clock_.now() - start_) / s_.window);
    if (load_.size() <= window) load_.resize(window + 1, 0);
    const int seen = ++load_[window];
    const bool ok = healthy(window) && seen <= s_.capacity;

    auto timer = clock_.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(s_.latency);
    co_await timer.async_wait(asio::use_awaitable);
    if (!ok) co_return boost::system::errc::make_error_code(boost::system::errc::resource_unavailable_try_again);
    co_return 200;
  }

  const std::vector<int>& load() const { return load_; }

 private:
  bool healthy(std::size_t window) {
    if (recovered_) return true;
    if (clock_.now() - start_ < s_.outage || window == 0) return false;
    recovered_ = load_[window - 1] <= s_.capacity;  // needs one calm window
    return recovered_;
  }

  const scenario& s_;
  Clock clock_;
  time_point start_;
  std::vector<int> load_;
  bool recovered_ = false;
};

template <class Clock>
result run(const scenario& s, const strategy& st, Clock clock, asio::io_context& io) {
  service<Clock> svc(s, clock);
  result r{.name = st.name};
  const auto policy = resilience::retry_policy{}
                          .max_attempts(s.max_attempts)
                          .backoff(st.delays)
                          .random(resilience::random_source::seeded(2026))
                          .clock(clock)
                          .on_retry([&](const auto&) { ++r.attempts; });
  const time_point start = clock.now();
  for (int w = 0; w < s.workers; ++w) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          for (int j = 0; j < s.jobs_per_worker; ++j) {
            ++r.attempts;  // the first attempt; on_retry counts the others
            auto answer = co_await resilience::co_retry([&] { return svc.call(); }, policy);
            ++(answer ? r.successes : r.failures);
          }
          r.done_after = std::max(r.done_after, clock.now() - start);
        },
        asio::detached);
  }
  if constexpr (std::is_same_v<Clock, resilience::testing::manual_clock>) {
    clock.run(io);
  } else {
    io.run();
  }
  io.restart();
  r.load = svc.load();
  r.peak = r.load.empty() ? 0 : *std::max_element(r.load.begin(), r.load.end());
  return r;
}

// Small multiples: a panel per strategy, all on the same axes, so that the
// panels compare at a glance and no strategy's line hides another's. The y
// axis reaches the highest peak of all: nothing is cut off. What goes over
// capacity is drawn red, the rest blue.
std::string svg_chart(const scenario& s, const std::vector<result>& results, std::string_view time_label) {
  constexpr int columns = 4;
  constexpr double panel_w = 225, panel_h = 190, gap_x = 28, gap_y = 92, left = 50, top = 134, bottom = 40;
  const int rows = (static_cast<int>(results.size()) + columns - 1) / columns;
  const double width = left + columns * panel_w + (columns - 1) * gap_x + 20;
  const double height = top + rows * panel_h + (rows - 1) * gap_y + bottom;
  std::size_t windows = 1;
  int peak = 1;
  for (const auto& r : results) {
    windows = std::max(windows, r.load.size());
    peak = std::max(peak, r.peak);
  }
  const double y_top = nice_top(std::max(peak, s.capacity));
  const double window_s = std::chrono::duration<double>(s.window).count();
  const double seconds = window_s * static_cast<double>(windows);
  const double outage_s = std::min(seconds, std::chrono::duration<double>(s.outage).count());
  const double x_step = nice_step(seconds, 4);
  const long window_ms = std::chrono::duration_cast<std::chrono::milliseconds>(s.window).count();
  const int jobs = s.workers * s.jobs_per_worker;

  std::string out = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{:.0f}' height='{:.0f}' font-family='sans-serif' "
      "font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='{}' y='26' font-size='17'>Requests reaching the service per {} ms window, one panel per retry "
      "strategy</text>\n"
      "<text x='{}' y='48' font-size='12' fill='#444'>{} workers x {} jobs; the service is down for the first "
      "{:.0f} s (shaded), then serves {} requests per window (dashed line) and turns the rest away.</text>\n"
      "<text x='{}' y='68' font-size='12' fill='#444'>Every panel has the same scales. "
      "<tspan fill='#d62728' font-weight='bold'>Red</tspan>: load over capacity.</text>\n",
      width, height, left, window_ms, left, s.workers, s.jobs_per_worker, outage_s, s.capacity, left);

  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const double x0 = left + static_cast<double>(i % columns) * (panel_w + gap_x);
    const double y0 = top + static_cast<double>(i / columns) * (panel_h + gap_y);
    auto x = [&](double sec) { return x0 + panel_w * sec / seconds; };
    auto y = [&](double load) { return y0 + panel_h * (1.0 - load / y_top); };
    const double cap_y = y(s.capacity);

    out += fmt::format("<text x='{}' y='{}' font-size='13' font-weight='bold'>{}</text>\n", x0, y0 - 34, r.name);
    out += fmt::format("<text x='{}' y='{}' fill='{}'>peak {}: {:.1f}x capacity</text>\n", x0, y0 - 19,
                       r.peak > s.capacity ? "#b02020" : "#444", r.peak, static_cast<double>(r.peak) / s.capacity);
    out += fmt::format("<text x='{}' y='{}' fill='#444'>{} of {} jobs ok, all over at {:.1f} s</text>\n", x0, y0 - 5,
                       r.successes, jobs, std::chrono::duration<double>(r.done_after).count());
    out += fmt::format("<rect x='{}' y='{}' width='{:.1f}' height='{}' fill='#fbe3e3'/>\n", x0, y0,
                       x(outage_s) - x0, panel_h);
    for (int t = 1; t <= 5; ++t) {
      const double load = y_top * t / 5.0;
      out += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='#e4e4e4'/>\n", x0 + 1, y(load),
                         x0 + panel_w, y(load));
    }
    // The y labels once per row: every panel shares them.
    if (i % columns == 0) {
      for (int t = 0; t <= 5; ++t) {
        const double load = y_top * t / 5.0;
        out += fmt::format("<text x='{}' y='{:.1f}' text-anchor='end'>{:.0f}</text>\n", x0 - 5, y(load) + 4, load);
      }
    }
    for (double at = 0; at <= seconds + 1e-9; at += x_step) {
      out += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle'>{:g}s</text>\n", x(at), y0 + panel_h + 14, at);
    }

    // The load as an area, twice: clipped below the capacity line in blue and above it in red.
    std::string points = fmt::format("{:.1f},{:.1f} ", x(0), y(0));
    for (std::size_t w = 0; w < r.load.size(); ++w) {
      points += fmt::format("{:.1f},{:.1f} ", x(window_s * (static_cast<double>(w) + 0.5)), y(r.load[w]));
    }
    points += fmt::format("{:.1f},{:.1f}", x(window_s * static_cast<double>(r.load.size())), y(0));
    out += fmt::format("<clipPath id='over{0}'><rect x='{1}' y='{2}' width='{3}' height='{4:.1f}'/></clipPath>"
                       "<clipPath id='under{0}'><rect x='{1}' y='{5:.1f}' width='{3}' height='{6:.1f}'/></clipPath>\n",
                       i, x0, y0 - 1, panel_w, cap_y - y0 + 1, cap_y, y0 + panel_h - cap_y);
    for (const auto& [clip, colour] : {std::pair{"under", "#1f77b4"}, std::pair{"over", "#d62728"}}) {
      out += fmt::format("<polygon clip-path='url(#{0}{1})' fill='{2}' fill-opacity='0.35' stroke='{2}' "
                         "stroke-width='1.2' points='{3}'/>\n",
                         clip, i, colour, points);
    }
    out += fmt::format("<line x1='{0}' y1='{1:.1f}' x2='{2}' y2='{1:.1f}' stroke='#333' stroke-dasharray='5 3'/>\n",
                       x0, cap_y, x0 + panel_w);
    out += fmt::format("<line x1='{0}' y1='{1}' x2='{0}' y2='{2}' stroke='black'/>\n", x0, y0, y0 + panel_h);
    out += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='black'/>\n", x0, y0 + panel_h,
                       x0 + panel_w);
  }
  out += fmt::format("<text x='{:.0f}' y='{:.0f}' text-anchor='middle' fill='#444'>{}</text>\n", width / 2,
                     height - 8, time_label);
  return out + "</svg>\n";
}

}  // namespace

int main(int argc, char** argv) {
  scenario s;
  std::string svg_path = "retry-storm.svg";
  bool real_time = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--svg" && has_value) {
      svg_path = argv[++i];
    } else if (arg == "--workers" && has_value) {
      s.workers = std::atoi(argv[++i]);
    } else if (arg == "--jobs" && has_value) {
      s.jobs_per_worker = std::atoi(argv[++i]);
    } else if (arg == "--real-time") {
      real_time = true;
    } else {
      std::fprintf(stderr, "usage: retry_storm [--svg FILE] [--workers N] [--jobs N] [--real-time]\n");
      return 2;
    }
  }
  if (s.workers < 1 || s.jobs_per_worker < 1) {
    std::fprintf(stderr, "retry_storm: --workers and --jobs must be at least 1\n");
    return 2;
  }

  const auto exponential = backoff::exponential(200ms, 2.0, 5s);
  const std::vector<strategy> strategies{
      {"immediate retry", backoff::constant(0ms)},
      {"fixed 1 s delay", backoff::constant(1s)},
      {"exponential, no jitter", exponential},
      {"exponential + full jitter", exponential.with_jitter(jitter::full)},
      {"exponential + equal jitter", exponential.with_jitter(jitter::equal)},
      {"decorrelated (AWS)", backoff::decorrelated(200ms, 5s)},
      {"decorrelated, clamped", exponential.with_jitter(jitter::decorrelated_clamped)},
      {"decorrelated jitter v2", exponential.with_jitter(jitter::decorrelated_v2)},
  };

  fmt::print("{} workers x {} jobs; service down for {} s, then {} requests per {} ms; up to {} attempts per job\n"
             "({})\n\n",
             s.workers, s.jobs_per_worker, std::chrono::duration_cast<std::chrono::seconds>(s.outage).count(),
             s.capacity, std::chrono::duration_cast<std::chrono::milliseconds>(s.window).count(), s.max_attempts,
             real_time ? "real time: this takes a while" : "virtual time");
  fmt::print("{:<28} {:>9} {:>10} {:>9} {:>16} {:>12}\n", "strategy", "attempts", "successes", "failures",
             "peak req/window", "all done at");
  std::vector<result> results;
  for (const auto& st : strategies) {
    asio::io_context io;
    result r = real_time ? run(s, st, resilience::steady_clock{}, io)
                         : run(s, st, resilience::testing::manual_clock{}, io);
    fmt::print("{:<28} {:>9} {:>10} {:>9} {:>16} {:>11.2f}s\n", r.name, r.attempts, r.successes, r.failures, r.peak,
               std::chrono::duration<double>(r.done_after).count());
    results.push_back(std::move(r));
  }
  std::ofstream chart(svg_path);
  chart << svg_chart(s, results, real_time ? "time" : "virtual time");
  chart.close();
  if (!chart) {
    fmt::print(stderr, "retry_storm: could not write {}\n", svg_path);
    return 1;
  }
  fmt::print("\nchart of service load over time: {}\n", svg_path);
  // Every job ends once, a success or a failure, whatever the strategy.
  const long jobs = static_cast<long>(s.workers) * s.jobs_per_worker;
  const bool every_job_ended = std::all_of(results.begin(), results.end(),
                                           [&](const result& r) { return r.successes + r.failures == jobs; });
  fmt::print("check: the {} jobs of each strategy ended once each: {}\n", jobs,
             every_job_ended ? "yes" : "MISMATCH");
  return every_job_ended ? 0 : 1;
}
