// The timeout stage's success path against the `op() || timer.async_wait()`
// idiom and a bare co_await, in one run.
#include "bench_support.hpp"

#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>

#include <chrono>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace boost::asio::experimental::awaitable_operators;
using resilience::bench::drive;
using resilience::bench::run_loop;
using resilience::bench::trivial_op;

namespace {

const auto one_second = resilience::timeout(1s);

asio::awaitable<int> or_idiom() {
  asio::steady_timer timer(co_await asio::this_coro::executor, 1s);
  auto winner = co_await (trivial_op() || timer.async_wait(asio::use_awaitable));
  co_return winner.index() == 0 ? std::get<0>(winner) : -1;
}

void timeout_bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void timeout_stage_success(benchmark::State& s) {
  drive(s, [] { return one_second([] { return trivial_op(); }); });
}
void or_idiom_success(benchmark::State& s) {
  drive(s, [] { return or_idiom(); });
}

// An op that suspends once, as real I/O does: the bound is armed and
// disarmed on every call.
asio::awaitable<int> suspending_op() {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  co_return 42;
}
asio::awaitable<int> or_idiom_suspending() {
  asio::steady_timer timer(co_await asio::this_coro::executor, 1s);
  auto winner = co_await (suspending_op() || timer.async_wait(asio::use_awaitable));
  co_return winner.index() == 0 ? std::get<0>(winner) : -1;
}
void suspending_bare_co_await(benchmark::State& s) {
  drive(s, [] { return suspending_op(); });
}
void timeout_stage_suspending_op(benchmark::State& s) {
  drive(s, [] { return one_second([] { return suspending_op(); }); });
}
void or_idiom_suspending_op(benchmark::State& s) {
  drive(s, [] { return or_idiom_suspending(); });
}

// The full pipeline of issue-sized services: a deadline around a retry
// around an attempt timeout.
const auto full_pipeline = resilience::pipeline(resilience::deadline_stage(5s),
                                                resilience::retry_policy{}.max_attempts(3),
                                                resilience::timeout(1s));
void pipeline_success(benchmark::State& s) {
  drive(s, [] { return full_pipeline([] { return trivial_op(); }); });
}
// The same pipeline referred to instead of copied into each call.
void pipeline_success_referenced(benchmark::State& s) {
  drive(s, [] { return full_pipeline.run_referenced([] { return trivial_op(); }); });
}
void pipeline_suspending_op(benchmark::State& s) {
  drive(s, [] { return full_pipeline([] { return suspending_op(); }); });
}
BENCHMARK(pipeline_success);
BENCHMARK(pipeline_success_referenced);
BENCHMARK(pipeline_suspending_op);
const resilience::bench::ratio timeout_bench_ratio5{"pipeline_success", "timeout_bare_co_await"};
const resilience::bench::ratio r5b{"pipeline_success", "pipeline_success_referenced"};
const resilience::bench::ratio timeout_bench_ratio6{"pipeline_suspending_op", "suspending_bare_co_await"};

BENCHMARK(timeout_bare_co_await);
BENCHMARK(timeout_stage_success);
BENCHMARK(or_idiom_success);
BENCHMARK(suspending_bare_co_await);
BENCHMARK(timeout_stage_suspending_op);
BENCHMARK(or_idiom_suspending_op);

const resilience::bench::ratio timeout_bench_ratio1{"or_idiom_success", "timeout_stage_success"};
const resilience::bench::ratio timeout_bench_ratio2{"timeout_stage_success", "timeout_bare_co_await"};
const resilience::bench::ratio timeout_bench_ratio3{"or_idiom_suspending_op", "timeout_stage_suspending_op"};
const resilience::bench::ratio timeout_bench_ratio4{"timeout_stage_suspending_op", "suspending_bare_co_await"};

asio::awaitable<void> loop_timeout(int n) {
  for (int i = 0; i < n; ++i) co_await one_second([] { return trivial_op(); });
}
asio::awaitable<void> loop_pipeline(int n) {
  for (int i = 0; i < n; ++i) co_await full_pipeline([] { return trivial_op(); });
}
asio::awaitable<void> loop_pipeline_referenced(int n) {
  for (int i = 0; i < n; ++i) co_await full_pipeline.run_referenced([] { return trivial_op(); });
}
asio::awaitable<void> loop_or(int n) {
  for (int i = 0; i < n; ++i) co_await or_idiom();
}

}  // namespace

extern "C" [[gnu::noinline]] void measure_timeout(int n) { run_loop(loop_timeout, n); }
extern "C" [[gnu::noinline]] void measure_pipeline(int n) { run_loop(loop_pipeline, n); }
extern "C" [[gnu::noinline]] void measure_pipeline_referenced(int n) { run_loop(loop_pipeline_referenced, n); }
extern "C" [[gnu::noinline]] void measure_or_idiom(int n) { run_loop(loop_or, n); }
// Floors under any timeout built on public Asio API, measured in the same
// run: a co_spawn of the op (the child whose cancellation we own), and one
// arm-and-cancel of a steady_timer (a timerfd syscall and a posted handler).
namespace {
void floor_co_spawn(benchmark::State& s) {
  drive(s, []() -> asio::awaitable<int> {
    auto [e, v] = co_await asio::co_spawn(co_await asio::this_coro::executor, trivial_op(),
                                          asio::as_tuple(asio::use_awaitable));
    co_return v;
  });
}
void floor_timer_arm_cancel(benchmark::State& s) {
  drive(s, []() -> asio::awaitable<int> {
    asio::steady_timer t(co_await asio::this_coro::executor, 1s);
    t.async_wait([](auto) {});
    t.cancel();
    co_await asio::post(asio::use_awaitable);  // let the cancelled handler run
    co_return 1;
  });
}
// The same with the cancellation slot every bounded call must own.
void floor_co_spawn_with_slot(benchmark::State& s) {
  drive(s, []() -> asio::awaitable<int> {
    asio::cancellation_signal signal;
    auto [e, v] = co_await asio::co_spawn(co_await asio::this_coro::executor, trivial_op(),
                                          asio::bind_cancellation_slot(signal.slot(), asio::as_tuple(asio::use_awaitable)));
    co_return v;
  });
}
BENCHMARK(floor_co_spawn);
BENCHMARK(floor_co_spawn_with_slot);
BENCHMARK(floor_timer_arm_cancel);
}  // namespace
