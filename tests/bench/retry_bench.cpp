// co_retry's costs against what a user would otherwise write, in one run.
//
//   build/release/tests/bench/retry_bench             # wall time + ratios
//   tests/bench/callgrind.sh build/release            # instruction counts
//
// Every benchmark drives its calls from one coroutine on one io_context, so
// each figure is the cost of one `co_await` of the thing measured. Heap
// allocations are counted through the global operator new.
#include "alloc_counter.hpp"

#include <resilience/retry.hpp>

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>

RESILIENCE_BENCH_COUNT_ALLOCATIONS

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

// The operation every variant calls: as cheap as an awaitable can be, and
// opaque to the optimiser so it cannot fold the call away.
[[gnu::noinline]] asio::awaitable<int> trivial_op() { co_return 42; }

int failure_phase = 0;
// Fails every other call, to measure one failed attempt then a success.
[[gnu::noinline]] asio::awaitable<boost::system::result<int>> flaky_op() {
  if (++failure_phase % 2 == 1) co_return error_code(asio::error::connection_reset);
  co_return 42;
}

const auto success_policy = resilience::retry_policy{}.max_attempts(3);
const auto zero_delay_policy = resilience::retry_policy{}.max_attempts(3).backoff(resilience::backoff::constant(0ms));
const auto timer_policy = resilience::retry_policy{}.max_attempts(3).backoff(resilience::backoff::constant(1us));

// What a careful user writes by hand: a loop, a classifier, a zero-delay yield.
asio::awaitable<boost::system::result<int>> hand_written_retry(int max_attempts) {
  for (int attempt = 1;; ++attempt) {
    auto r = co_await flaky_op();
    if (r || attempt == max_attempts) co_return r;
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  }
}
asio::awaitable<int> hand_written_retry_success(int max_attempts) {
  for (int attempt = 1;; ++attempt) {
    try {
      co_return co_await trivial_op();
    } catch (...) {
      if (attempt == max_attempts) throw;
    }
  }
}

// Runs `body` once per benchmark iteration inside one coroutine.
template <class Body>
void drive(benchmark::State& state, Body body) {
  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 64; ++i) co_await body();  // warm the frame caches
        const std::size_t before = resilience::bench::allocations.load();
        for (auto _ : state) benchmark::DoNotOptimize(co_await body());
        const auto allocs = resilience::bench::allocations.load() - before;
        state.counters["allocs/call"] =
            static_cast<double>(allocs) / static_cast<double>(state.iterations());
      },
      asio::detached);
  io.run();
}

void bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void hand_written_loop_success(benchmark::State& s) {
  drive(s, [] { return hand_written_retry_success(3); });
}
void co_retry_success(benchmark::State& s) {
  drive(s, [] { return resilience::co_retry([] { return trivial_op(); }, success_policy); });
}
void hand_written_loop_one_failure(benchmark::State& s) {
  failure_phase = 0;
  drive(s, [] { return hand_written_retry(3); });
}
void co_retry_one_failure_zero_delay(benchmark::State& s) {
  failure_phase = 0;
  drive(s, [] { return resilience::co_retry([] { return flaky_op(); }, zero_delay_policy); });
}
void co_retry_one_failure_timer_wait(benchmark::State& s) {
  failure_phase = 0;
  drive(s, [] { return resilience::co_retry([] { return flaky_op(); }, timer_policy); });
}

BENCHMARK(bare_co_await);
BENCHMARK(hand_written_loop_success);
BENCHMARK(co_retry_success);
BENCHMARK(hand_written_loop_one_failure);
BENCHMARK(co_retry_one_failure_zero_delay);
BENCHMARK(co_retry_one_failure_timer_wait);

// Console output as usual, plus the ratios the project's claims rest on.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    // With --benchmark_repetitions, the median stands for the benchmark.
    for (const auto& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Iteration || median) ns_[r.run_name.function_name] = r.GetAdjustedRealTime();
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nratios (same run):\n");
    ratio("co_retry_success", "bare_co_await");
    ratio("co_retry_success", "hand_written_loop_success");
    ratio("co_retry_one_failure_zero_delay", "hand_written_loop_one_failure");
    ratio("co_retry_one_failure_timer_wait", "co_retry_one_failure_zero_delay");
  }

 private:
  void ratio(const std::string& a, const std::string& b) {
    if (ns_.count(a) && ns_.count(b) && ns_[b] > 0)
      std::printf("  %-34s / %-30s = %.2fx\n", a.c_str(), b.c_str(), ns_[a] / ns_[b]);
  }
  std::map<std::string, double> ns_;
};

}  // namespace

// Entry points for tests/bench/callgrind.sh: each runs `n` calls of one
// variant, and callgrind counts instructions inside it alone. (Named
// coroutines, not lambdas: GCC 12 mis-mangles coroutine lambdas inside
// extern "C" functions.)
asio::awaitable<void> loop_bare(int n) {
  for (int i = 0; i < n; ++i) co_await trivial_op();
}
asio::awaitable<void> loop_co_retry(int n) {
  for (int i = 0; i < n; ++i) co_await resilience::co_retry([] { return trivial_op(); }, success_policy);
}
asio::awaitable<void> loop_hand_written(int n) {
  for (int i = 0; i < n; ++i) co_await hand_written_retry_success(3);
}
void run_loop(asio::awaitable<void> (*loop)(int), int n) {
  asio::io_context io;
  asio::co_spawn(io, loop(n), asio::detached);
  io.run();
}
extern "C" [[gnu::noinline]] void measure_bare(int n) { run_loop(loop_bare, n); }
extern "C" [[gnu::noinline]] void measure_co_retry(int n) { run_loop(loop_co_retry, n); }
extern "C" [[gnu::noinline]] void measure_hand_written(int n) { run_loop(loop_hand_written, n); }

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--instructions") == 0) {
    const int n = std::atoi(argv[2]);
    measure_bare(n);
    measure_co_retry(n);
    measure_hand_written(n);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
}
