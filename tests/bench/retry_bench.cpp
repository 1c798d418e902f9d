// co_retry's costs against what a user would otherwise write, in one run.
// Each figure is the cost of one `co_await` of the thing measured.
#include "bench_support.hpp"


#include <resilience/retry.hpp>

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <functional>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

using resilience::bench::drive;
using resilience::bench::run_loop;
using resilience::bench::trivial_op;

int failure_phase = 0;
// Fails every other call, to measure one failed attempt then a success.
[[gnu::noinline]] asio::awaitable<boost::system::result<int>> flaky_op() {
  if (++failure_phase % 2 == 1) co_return error_code(asio::error::connection_reset);
  co_return 42;
}

const auto success_policy = resilience::retry_policy{}.max_attempts(3);
const auto zero_delay_policy = resilience::retry_policy{}.max_attempts(3).backoff(resilience::backoff::constant(0ms).with_jitter(resilience::jitter::none));
const auto timer_policy = resilience::retry_policy{}.max_attempts(3).backoff(resilience::backoff::constant(1us).with_jitter(resilience::jitter::none));

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

void bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void hand_written_loop_success(benchmark::State& s) {
  drive(s, [] { return hand_written_retry_success(3); });
}
void co_retry_success(benchmark::State& s) {
  drive(s, [] { return resilience::co_retry([] { return trivial_op(); }, success_policy); });
}
// The policy referred to rather than copied into the call.
void co_retry_success_cref(benchmark::State& s) {
  drive(s, [] { return resilience::co_retry([] { return trivial_op(); }, std::cref(success_policy)); });
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
BENCHMARK(co_retry_success_cref);
BENCHMARK(hand_written_loop_one_failure);
BENCHMARK(co_retry_one_failure_zero_delay);
BENCHMARK(co_retry_one_failure_timer_wait);

const resilience::bench::ratio retry_bench_ratio1{"co_retry_success", "bare_co_await"};
const resilience::bench::ratio retry_bench_ratio2{"co_retry_success", "hand_written_loop_success"};
const resilience::bench::ratio r2b{"co_retry_success_cref", "hand_written_loop_success"};
const resilience::bench::ratio retry_bench_ratio3{"co_retry_one_failure_zero_delay", "hand_written_loop_one_failure"};
const resilience::bench::ratio retry_bench_ratio4{"co_retry_one_failure_timer_wait", "co_retry_one_failure_zero_delay"};

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
asio::awaitable<void> loop_co_retry_cref(int n) {
  for (int i = 0; i < n; ++i) co_await resilience::co_retry([] { return trivial_op(); }, std::cref(success_policy));
}
asio::awaitable<void> loop_hand_written(int n) {
  for (int i = 0; i < n; ++i) co_await hand_written_retry_success(3);
}
extern "C" [[gnu::noinline]] void measure_bare(int n) { run_loop(loop_bare, n); }
extern "C" [[gnu::noinline]] void measure_co_retry(int n) { run_loop(loop_co_retry, n); }
extern "C" [[gnu::noinline]] void measure_co_retry_cref(int n) { run_loop(loop_co_retry_cref, n); }
extern "C" [[gnu::noinline]] void measure_hand_written(int n) { run_loop(loop_hand_written, n); }

