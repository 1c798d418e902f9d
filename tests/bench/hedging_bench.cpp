// A hedged call whose first attempt answers before the hedging delay,
// against a timeout stage's success path (both run the op as a co_spawn'd
// child and keep a node in the shared timer queue), in one run: an op that
// answers at once, and one that suspends once as real I/O does (the hedge's
// time is then armed and disarmed). Also a hedge that wins, for its cost.
#include "bench_support.hpp"

#include <resilience/hedging.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using resilience::bench::drive;
using resilience::bench::trivial_op;

namespace {

const auto one_second = resilience::timeout(1s);
const auto hedged = resilience::hedging_policy{}.max_attempts(3).delay(1s);

asio::awaitable<int> suspending_op() {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  co_return 42;
}

// Answers at once on its first call of a pair, and waits (until cancelled)
// on the second: a hedge that loses to the first attempt.
int phase = 0;
asio::awaitable<int> first_answers_then_slow() {
  if (++phase % 2 == 1) {
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    co_return 42;
  }
  asio::steady_timer t(co_await asio::this_coro::executor, 1h);
  co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return -1;
}

void hedging_bare_co_await(benchmark::State& s) {
  drive(s, [] { return trivial_op(); });
}
void hedging_timeout_success(benchmark::State& s) {
  drive(s, [] { return one_second([] { return trivial_op(); }); });
}
void hedging_first_answers(benchmark::State& s) {
  drive(s, [] { return hedged([] { return trivial_op(); }); });
}
void hedging_timeout_suspending_op(benchmark::State& s) {
  drive(s, [] { return one_second([] { return suspending_op(); }); });
}
void hedging_first_answers_suspending_op(benchmark::State& s) {
  drive(s, [] { return hedged([] { return suspending_op(); }); });
}
void hedging_two_attempts_one_cancelled(benchmark::State& s) {
  static const auto two_at_once = resilience::hedging_policy{}.max_attempts(2).delay(0ms);
  drive(s, [] { return two_at_once([] { return first_answers_then_slow(); }); });
}

BENCHMARK(hedging_bare_co_await);
BENCHMARK(hedging_timeout_success);
BENCHMARK(hedging_first_answers);
BENCHMARK(hedging_timeout_suspending_op);
BENCHMARK(hedging_first_answers_suspending_op);
BENCHMARK(hedging_two_attempts_one_cancelled);

const resilience::bench::ratio hedging_bench_ratio1{"hedging_first_answers", "hedging_timeout_success"};
const resilience::bench::ratio hedging_bench_ratio2{"hedging_first_answers_suspending_op", "hedging_timeout_suspending_op"};
const resilience::bench::ratio hedging_bench_ratio3{"hedging_first_answers", "hedging_bare_co_await"};
const resilience::bench::ratio hedging_bench_ratio4{"hedging_two_attempts_one_cancelled", "hedging_timeout_suspending_op"};

}  // namespace
