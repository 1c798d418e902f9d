// What a manual_clock timer costs while many other waits are pending: cancel,
// expires_after and destruction of a timer that waits, and the same calls on
// a timer that does not. None may grow with the number pending; the ratios
// at the end compare 100,000 pending with 10.
#include "bench_support.hpp"

#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using resilience::testing::manual_clock;

namespace {

using clock_timer = manual_clock::timer_type<asio::io_context::executor_type>;

void noop(boost::system::error_code) {}

// `n` waits pending on timers of their own, spread over an hour from 1 h on.
struct crowd {
  asio::io_context io;
  manual_clock clock;
  std::vector<clock_timer> others;
  // Where the measured waits go: in the middle of the crowd.
  resilience::time_point middle;

  explicit crowd(std::int64_t n) : middle(clock.now() + 1h + 30min) {
    others.reserve(static_cast<std::size_t>(n));
    // Every expiry is set before the first wait: setting one cancels, and
    // that must not make the setup itself quadratic where cancel is O(n).
    for (std::int64_t i = 0; i < n; ++i)
      others.emplace_back(clock.make_timer(io.get_executor())).expires_after(1h + 1h * i / n);
    for (auto& t : others) t.async_wait(noop);
  }
  // Completing every wait at once keeps teardown fast whatever a cancel costs.
  ~crowd() {
    clock.advance(24h);
    drain();
  }
  void drain() {
    if (io.stopped()) io.restart();
    io.poll();
  }
};

// Measured calls go in batches, timed without the arming around them; the
// reported time is per call.
constexpr int batch = 16;

template <class Arm, class Call>
void per_call(benchmark::State& state, crowd& c, Arm arm, Call call) {
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) arm(i);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) call(i);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    state.SetIterationTime(took.count() / batch);
    c.drain();  // runs the aborted handlers
  }
}

void cancel_pending(benchmark::State& state, std::int64_t pending) {
  crowd c(pending);
  std::vector<clock_timer> mine;
  for (int i = 0; i < batch; ++i) mine.emplace_back(c.clock.make_timer(c.io.get_executor()));
  per_call(
      state, c,
      [&](int i) {
        mine[i].expires_at(c.middle);
        mine[i].async_wait(noop);
      },
      [&](int i) { benchmark::DoNotOptimize(mine[i].cancel()); });
}

void expires_after_pending(benchmark::State& state, std::int64_t pending) {
  crowd c(pending);
  std::vector<clock_timer> mine;
  for (int i = 0; i < batch; ++i) mine.emplace_back(c.clock.make_timer(c.io.get_executor()));
  per_call(
      state, c,
      [&](int i) {
        mine[i].expires_at(c.middle);
        mine[i].async_wait(noop);
      },
      [&](int i) { benchmark::DoNotOptimize(mine[i].expires_after(2h)); });
}

void destroy_pending(benchmark::State& state, std::int64_t pending) {
  crowd c(pending);
  std::vector<std::optional<clock_timer>> mine(batch);
  per_call(
      state, c,
      [&](int i) {
        mine[i].emplace(c.clock.make_timer(c.io.get_executor()));
        mine[i]->expires_at(c.middle);
        mine[i]->async_wait(noop);
      },
      [&](int i) { mine[i].reset(); });
}

// A timer with no wait pending, as a retry loop sets one before each wait.
void expires_after_idle(benchmark::State& state, std::int64_t pending) {
  crowd c(pending);
  auto t = c.clock.make_timer(c.io.get_executor());
  for (auto _ : state) benchmark::DoNotOptimize(t.expires_after(1s));
}

// A timer made, set and destroyed without a wait.
void make_set_destroy_idle(benchmark::State& state, std::int64_t pending) {
  crowd c(pending);
  for (auto _ : state) {
    auto t = c.clock.make_timer(c.io.get_executor());
    benchmark::DoNotOptimize(t.expires_after(1s));
  }
}

template <class F>
void register_sizes(const std::string& name, F f, bool manual_time) {
  for (const std::int64_t n : {10, 100, 1000, 10000, 100000}) {
    auto* b = benchmark::RegisterBenchmark((name + "/" + std::to_string(n)).c_str(),
                                           [f, n](benchmark::State& state) { f(state, n); });
    // Arming and draining around each batch take about 25 times the
    // measured calls: 5 ms of measured time is 100k calls and a short run.
    if (manual_time) b->UseManualTime()->MinTime(0.005);
  }
  static std::vector<resilience::bench::ratio> flat;
  flat.emplace_back(name + "/100000", name + "/10");
}

const bool registered = [] {
  register_sizes("manual_clock_cancel_pending", cancel_pending, true);
  register_sizes("manual_clock_expires_after_pending", expires_after_pending, true);
  register_sizes("manual_clock_destroy_pending", destroy_pending, true);
  register_sizes("manual_clock_expires_after_idle", expires_after_idle, false);
  register_sizes("manual_clock_make_set_destroy_idle", make_set_destroy_idle, false);
  return true;
}();

}  // namespace
