// A call turned away without reaching its dependency still gives its executor
// a turn: loops of refused calls on one io_context leave room for the timer,
// probe or I/O that ends the refusals.
#include "support.hpp"

#include <resilience/adaptive_throttle.hpp>
#include <resilience/bulkhead.hpp>
#include <resilience/chaos.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/rate_limiter.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using result = boost::system::result<int>;
using resilience::testing::manual_clock;

namespace {

constexpr int loops = 4;
constexpr int calls_per_loop = 2000;  // a loop that never yields makes them all before the timer

asio::awaitable<result> answer() {
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  co_return 42;
}

// `loops` coroutines call stage.run(answer) until `stop` or `calls_per_loop`
// calls; a timer due now sets `stop`. Returns how many calls were made before
// the timer ran.
template <class Stage>
int calls_before_the_timer(asio::io_context& io, const Stage& stage, error_code expected) {
  bool stop = false;
  int calls = 0, at_timer = -1, wrong = 0;
  for (int i = 0; i < loops; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          for (int n = 0; n < calls_per_loop && !stop; ++n) {
            ++calls;
            const result r = co_await stage.run(answer);
            if (r.has_value() || r.error() != expected) ++wrong;
          }
        },
        asio::detached);
  }
  asio::steady_timer timer(io, 0ms);
  timer.async_wait([&](error_code) {
    at_timer = calls;
    stop = true;
  });
  io.run();
  BOOST_TEST(wrong == 0);
  BOOST_TEST(at_timer >= 0);
  return at_timer;
}

// A stage called within a context of its own.
template <class Stage>
struct with_context {
  const Stage* stage;
  resilience::context ctx;
  template <class Op>
  auto run(Op op) const {
    return stage->run(std::move(op), ctx);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(refusals_yield)

BOOST_AUTO_TEST_CASE(an_open_breaker_leaves_room_for_a_timer) {
  asio::io_context io;
  resilience::circuit_breaker breaker(resilience::breaker_options{}.consecutive_failures(1).open_duration(1h));
  breaker.try_acquire().record_failure();
  BOOST_REQUIRE(breaker.state() == resilience::circuit_state::open);
  BOOST_TEST(calls_before_the_timer(io, breaker, resilience::error::circuit_open) < calls_per_loop);
}

// The whole scenario: loops hammering an open breaker, a timer that moves
// virtual time past the break, and the half-open probe that closes it. Every
// loop ends with a success, long before it runs out of calls.
BOOST_AUTO_TEST_CASE(loops_on_an_open_breaker_let_the_half_open_probe_complete) {
  asio::io_context io;
  manual_clock clock;
  resilience::basic_circuit_breaker<manual_clock> breaker(
      resilience::breaker_options{}.consecutive_failures(1).open_duration(30s).successes_to_close(1), clock);
  breaker.try_acquire().record_failure();
  int refused = 0, succeeded = 0, exhausted = 0;
  for (int i = 0; i < loops; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          for (int n = 0; n < calls_per_loop; ++n) {
            const result r = co_await breaker.run(answer);
            if (r.has_value()) {
              ++succeeded;
              co_return;
            }
            ++refused;
          }
          ++exhausted;
        },
        asio::detached);
  }
  bool fired = false;
  asio::steady_timer timer(io, 0ms);
  timer.async_wait([&](error_code) {
    fired = true;
    clock.advance(30s);  // the break is over: the next call is the probe
  });
  io.run();
  BOOST_TEST(fired);
  BOOST_TEST(exhausted == 0);
  BOOST_TEST(succeeded == loops);
  BOOST_TEST(refused > 0);
  BOOST_TEST((breaker.state() == resilience::circuit_state::closed));
}

// A rejection hook that cancels its caller does not turn the refusal into a
// thrown cancellation: the turn is taken with throwing off.
BOOST_AUTO_TEST_CASE(a_refusal_whose_hook_cancels_the_caller_is_still_the_refusal) {
  asio::io_context io;
  asio::cancellation_signal cancel;
  resilience::circuit_breaker breaker(resilience::breaker_options{}
                                          .consecutive_failures(1)
                                          .open_duration(1h)
                                          .on_rejection([&](const resilience::rejection&) {
                                            cancel.emit(asio::cancellation_type::terminal);
                                          }));
  breaker.try_acquire().record_failure();
  resilience::test::completion<result> done;
  resilience::test::spawn(io, breaker.run(answer), done, &cancel);
  io.run();
  BOOST_TEST(done.times == 1);
  BOOST_REQUIRE(!done.exception);
  BOOST_TEST((done.value->error() == resilience::error::circuit_open));
}

BOOST_AUTO_TEST_CASE(a_full_bulkhead_leaves_room_for_a_timer) {
  asio::io_context io;
  resilience::bulkhead bulkhead(resilience::bulkhead_options{}.max_concurrent(1).max_queue(0));
  auto held = bulkhead.try_acquire();
  BOOST_REQUIRE(held);
  BOOST_TEST(calls_before_the_timer(io, bulkhead, resilience::error::bulkhead_full) < calls_per_loop);
}

BOOST_AUTO_TEST_CASE(an_empty_rate_limiter_leaves_room_for_a_timer) {
  asio::io_context io;
  manual_clock clock;  // never advanced: no permit comes back
  resilience::basic_rate_limiter<manual_clock> limiter(
      resilience::rate_limiter_options{}.token_bucket(1, 1h), clock);
  BOOST_REQUIRE(limiter.try_acquire());
  BOOST_TEST(calls_before_the_timer(io, limiter, resilience::error::rate_limited) < calls_per_loop);
}

BOOST_AUTO_TEST_CASE(a_rate_limiter_refusing_at_the_deadline_leaves_room_for_a_timer) {
  asio::io_context io;
  manual_clock clock;
  resilience::basic_rate_limiter<manual_clock> limiter(
      resilience::rate_limiter_options{}.token_bucket(1, 1h).max_wait(resilience::duration::max()), clock);
  BOOST_REQUIRE(limiter.try_acquire());
  // Waits are allowed, but none ends before the call's deadline: refused at once.
  resilience::context ctx;
  ctx.deadline = clock.now() + 1s;
  BOOST_TEST(calls_before_the_timer(io, with_context<decltype(limiter)>{&limiter, ctx}, resilience::error::rate_limited) <
             calls_per_loop);
}

BOOST_AUTO_TEST_CASE(a_throttle_rejecting_every_call_leaves_room_for_a_timer) {
  asio::io_context io;
  manual_clock clock;
  resilience::basic_adaptive_throttle<manual_clock> throttle(resilience::adaptive_throttle_options{}.k(1), clock);
  // Many requests, no accept: the rejection probability is close to 1.
  for (int i = 0; i < 100000; ++i) throttle.record(false);
  int throttled = 0, other = 0;
  bool stop = false;
  int calls = 0, at_timer = -1;
  for (int i = 0; i < loops; ++i) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          for (int n = 0; n < calls_per_loop && !stop; ++n) {
            ++calls;
            const result r = co_await throttle.run(answer);
            ++(r.has_error() && r.error() == resilience::error::throttled ? throttled : other);
          }
        },
        asio::detached);
  }
  asio::steady_timer timer(io, 0ms);
  timer.async_wait([&](error_code) {
    at_timer = calls;
    stop = true;
  });
  io.run();
  BOOST_TEST(throttled > 0);
  BOOST_TEST(at_timer >= 0);
  BOOST_TEST(at_timer < calls_per_loop);
}

BOOST_AUTO_TEST_CASE(an_injected_fault_leaves_room_for_a_timer) {
  asio::io_context io;
  const auto chaos = resilience::chaos_error(asio::error::connection_reset);
  BOOST_TEST(calls_before_the_timer(io, chaos, asio::error::connection_reset) < calls_per_loop);
}

BOOST_AUTO_TEST_SUITE_END()
