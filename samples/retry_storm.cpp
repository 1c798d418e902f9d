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
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
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

std::string svg_chart(const scenario& s, const std::vector<result>& results, std::string_view time_label) {
  static constexpr const char* colours[] = {"#d62728", "#ff7f0e", "#8c564b", "#1f77b4", "#2ca02c", "#9467bd", "#17becf"};
  constexpr double width = 1000, height = 420, left = 60, right = 280, top = 40, bottom = 50;
  std::size_t windows = 1;
  int peak = 1;
  for (const auto& r : results) {
    windows = std::max(windows, r.load.size());
    peak = std::max(peak, r.peak);
  }
  // A retry storm dwarfs everything else: clip it, and give every peak in the legend.
  peak = std::min(peak, 3 * s.capacity);
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double seconds = std::chrono::duration<double>(s.window).count() * static_cast<double>(windows);
  auto x = [&](double window) { return left + plot_w * window / static_cast<double>(windows); };
  auto y = [&](double load) { return top + plot_h * (1.0 - std::min<double>(load, peak) / peak); };

  std::string out = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='{}' y='22' font-size='15'>Requests reaching the service per {} ms, {} workers (outage: first {} s)</text>\n",
      width, height, left, std::chrono::duration_cast<std::chrono::milliseconds>(s.window).count(), s.workers,
      std::chrono::duration_cast<std::chrono::seconds>(s.outage).count());
  // Axes, ticks and the capacity line.
  out += fmt::format("<line x1='{0}' y1='{1}' x2='{0}' y2='{2}' stroke='black'/>\n", left, top, top + plot_h);
  out += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='black'/>\n", left, top + plot_h, left + plot_w);
  for (int i = 0; i <= 5; ++i) {
    const double load = peak * i / 5.0, sec = seconds * i / 5.0;
    out += fmt::format("<text x='{}' y='{}' text-anchor='end'>{:.0f}</text>\n", left - 6, y(load) + 4, load);
    out += fmt::format("<text x='{}' y='{}' text-anchor='middle'>{:.1f}s</text>\n",
                       x(static_cast<double>(windows) * i / 5.0), top + plot_h + 18, sec);
  }
  out += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='gray' stroke-dasharray='4 3'/>\n"
                     "<text x='{3}' y='{4}' fill='gray'>capacity</text>\n",
                     left, y(s.capacity), left + plot_w, left + plot_w - 50, y(s.capacity) - 4);
  out += fmt::format("<text x='{}' y='{}' text-anchor='middle'>{}</text>\n", left + plot_w / 2, height - 10, time_label);
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const char* colour = colours[i % std::size(colours)];
    std::string points;
    for (std::size_t w = 0; w < r.load.size(); ++w) points += fmt::format("{:.1f},{:.1f} ", x(w + 0.5), y(r.load[w]));
    out += fmt::format("<polyline fill='none' stroke='{}' stroke-width='1.5' points='{}'/>\n", colour, points);
    const double ly = top + 18.0 * static_cast<double>(i);
    out += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='{3}' stroke-width='3'/>"
                       "<text x='{4}' y='{5}'>{6}</text>\n",
                       width - right + 15, ly, width - right + 35, colour, width - right + 40, ly + 4,
                       fmt::format("{} (peak {})", r.name, r.peak));
  }
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
  std::ofstream(svg_path) << svg_chart(s, results, real_time ? "time" : "virtual time");
  fmt::print("\nchart of service load over time: {}\n", svg_path);
}
