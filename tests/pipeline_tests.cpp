// Pipelines: stages composed around a call (retry, timeout, deadline), the
// bounds they share, outside cancellation at each step, copies and
// references, mistakes refused when a pipeline is built, and one clock for
// every stage of a call.
#include "support.hpp"

#include <resilience/any_pipeline.hpp>
#include <resilience/breaker_registry.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::backoff;
using resilience::co_retry;
using resilience::duration;
using resilience::jitter;
using resilience::retry_policy;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::aborted;
using resilience::test::call_through_local;
using resilience::test::completion;
using resilience::test::deadline_error;
using resilience::test::reset;
using resilience::test::spawn;
using resilience::test::timeout_error;

namespace {
using virtual_time = resilience::test::timed_stages;
}  // namespace

BOOST_FIXTURE_TEST_SUITE(pipelines, virtual_time)

BOOST_AUTO_TEST_CASE(an_attempt_timeout_inside_a_retry_is_retried) {
  // Two attempts time out at 100 ms, the third answers in 50 ms.
  int attempt = 0;
  auto too_slow = slow(1s, 9), fast = slow(50ms, 9);  // named: their coroutines refer to them
  auto op = [&](const resilience::context& ctx) { return ++attempt < 3 ? too_slow(ctx) : fast(ctx); };
  const auto p = resilience::pipeline(retry(), timeout(100ms));
  completion<boost::system::result<int>> done;
  spawn(io, p(op), done);
  clock.run(io);
  BOOST_TEST(done.value->value() == 9);
  BOOST_TEST(calls == 3);
  BOOST_TEST(finished == 3, "every timed-out attempt was waited for");
  BOOST_TEST((now() == 100ms + 300ms + 100ms + 300ms + 50ms));
}

BOOST_AUTO_TEST_CASE(a_deadline_outside_the_retry_cancels_the_remaining_retries) {
  // Attempts of 200 ms (timed out) and waits of 300 ms: attempts at 0 and
  // 500 ms; the wait after the second would end at 1000 ms, past 900 ms.
  const auto p = resilience::pipeline(deadline(900ms), retry().fit_to_time_left(false), timeout(200ms));
  completion<boost::system::result<int>> done;
  spawn(io, p(slow(1s)), done);
  clock.run(io);
  BOOST_TEST(calls == 2);
  BOOST_TEST((done.value->error() == timeout_error), "gave up before the deadline, with the last outcome");
  BOOST_TEST((now() == 700ms));
}

BOOST_AUTO_TEST_CASE(a_deadline_passing_mid_attempt_is_deadline_exceeded) {
  // Attempt 1 times out at 800 ms (its own bound is tighter than the
  // deadline); attempt 2 starts at 850 ms and its timeout is clamped to the
  // deadline, which passes at 900 ms.
  const auto p = resilience::pipeline(deadline(900ms),
                                      retry_policy{}.max_attempts(10).backoff(backoff::constant(50ms).with_jitter(resilience::jitter::none)).clock(clock),
                                      timeout(800ms));
  completion<boost::system::result<int>> done;
  spawn(io, p(slow(1s)), done);
  clock.run(io);
  BOOST_TEST(calls == 2);
  BOOST_TEST(finished == 2);
  BOOST_TEST((done.value->error() == deadline_error), "never plain operation_aborted");
  BOOST_TEST((now() == 900ms));
  BOOST_REQUIRE(contexts.size() == 2u);
  BOOST_TEST((contexts[0].deadline == time_point(800ms)), "each op sees the tightest bound");
  BOOST_TEST((contexts[1].deadline == time_point(900ms)), "clamped to what remains of the deadline");
}

BOOST_AUTO_TEST_CASE(an_attempt_timeout_tighter_than_the_deadline_is_a_timeout) {
  const auto p = resilience::pipeline(deadline(250ms), timeout(200ms));
  completion<boost::system::result<int>> done;
  spawn(io, p(slow(1s)), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == timeout_error));
  BOOST_TEST((now() == 200ms));
}

BOOST_AUTO_TEST_CASE(the_retry_never_sleeps_across_the_deadline) {
  const auto p =
      resilience::pipeline(deadline(1s), retry_policy{}.max_attempts(10).backoff(backoff::exponential(300ms)).jitter(jitter::none).clock(clock)
                                                 .fit_to_time_left(false));
  completion<boost::system::result<int>> done;
  auto failing = [&]() -> asio::awaitable<boost::system::result<int>> {
    started.push_back(clock.now());
    co_return error_code(asio::error::connection_reset);
  };
  spawn(io, p(failing), done);
  clock.run(io);
  BOOST_REQUIRE(started.size() == 3u);
  BOOST_TEST((started[2] == time_point(900ms)));
  BOOST_TEST((now() == 900ms), "the 1200 ms wait would cross the deadline: not started");
  BOOST_TEST((done.value->error() == asio::error::connection_reset));
}

BOOST_AUTO_TEST_CASE(a_deadline_around_timed_attempts_needs_no_timer_of_its_own) {
  // Every attempt's timeout is clamped to the deadline, so one timer keeps
  // both bounds; a nested pipeline hides its stages, so there the deadline
  // keeps its own.
  const auto flat = resilience::pipeline(deadline(1s), retry(), timeout(200ms));
  completion<boost::system::result<int>> a;
  spawn(io, flat(slow(50ms)), a);
  clock.run_for(io, 10ms);
  BOOST_TEST(clock.pending() == 2u, "the attempt timeout and the op's own wait");
  clock.run(io);
  BOOST_TEST(a.value->value() == 1);

  const auto nested = resilience::pipeline(deadline(1s), resilience::pipeline(retry(), timeout(200ms)));
  completion<boost::system::result<int>> b;
  spawn(io, nested(slow(50ms)), b);
  clock.run_for(io, 10ms);
  BOOST_TEST(clock.pending() == 3u, "the deadline's timer too");
  clock.run(io);
  BOOST_TEST(b.value->value() == 1);
}

BOOST_AUTO_TEST_CASE(stages_and_pipelines_named_by_an_lvalue_are_copied_into_the_call) {
  int expiries = 0;
  const auto counted = [&](const resilience::expiry_event&) { ++expiries; };
  completion<boost::system::result<int>> timed, bounded, composed, configured, retried;
  spawn(io, call_through_local(timeout(100ms).on_timeout(counted), slow(1s)), timed);
  spawn(io, call_through_local(deadline(200ms).on_deadline(counted), slow(1s)), bounded);
  spawn(io, call_through_local(resilience::pipeline(deadline(1s), retry(), timeout(300ms).on_timeout(counted)),
                               slow(50ms, 7)),
        composed);
  resilience::any_pipeline<boost::system::result<int>> p;
  p.add(retry_policy{}.max_attempts(2).backoff(backoff::constant(10ms).with_jitter(resilience::jitter::none)).clock(clock)).add(timeout(400ms));
  spawn(io, call_through_local(p, slow(1s)), configured);
  clock.run(io);
  BOOST_TEST((timed.value->error() == timeout_error));
  BOOST_TEST((bounded.value->error() == deadline_error));
  BOOST_TEST(composed.value->value() == 7);
  BOOST_TEST((configured.value->error() == timeout_error));
  BOOST_TEST(expiries == 2, "the copies share the stages' hooks");
  BOOST_TEST(calls == 5);
  BOOST_TEST(timed.times + bounded.times + composed.times + configured.times == 4);
}

BOOST_AUTO_TEST_CASE(a_copied_stage_shares_its_hook_and_run_referenced_refers) {
  int expiries = 0;
  const auto t = timeout(100ms).on_timeout([&](const resilience::expiry_event&) { ++expiries; });
  const auto p = resilience::pipeline(retry_policy{}.max_attempts(1).clock(clock), t);
  completion<boost::system::result<int>> copied, referenced;
  spawn(io, p(slow(1s)), copied);
  spawn(io, p.run_referenced(slow(1s)), referenced);
  clock.run(io);
  BOOST_TEST((copied.value->error() == timeout_error));
  BOOST_TEST((referenced.value->error() == timeout_error));
  BOOST_TEST(expiries == 2);
  // A pipeline changed after a call was made does not change that call.
  resilience::any_pipeline<boost::system::result<int>> growing;
  growing.add(timeout(100ms));
  completion<boost::system::result<int>> before;
  auto call = growing(slow(150ms, 3));
  growing.add(timeout(50ms));
  BOOST_TEST(growing.size() == 2u);
  spawn(io, std::move(call), before);
  io.restart();
  clock.run(io);
  BOOST_TEST((before.value->error() == timeout_error), "one stage: 100 ms");
  BOOST_TEST((now() == 200ms));
}

BOOST_AUTO_TEST_CASE(mistakes_are_rejected_when_the_pipeline_is_built) {
  BOOST_CHECK_EXCEPTION(resilience::pipeline(resilience::deadline_stage(1s), retry_policy{}, resilience::timeout(2s)),
                        std::invalid_argument, [](const std::invalid_argument& e) {
                          return std::string(e.what()).find("timeout") != std::string::npos;
                        });
  BOOST_CHECK_NO_THROW(resilience::pipeline(resilience::deadline_stage(3s), retry_policy{}, resilience::timeout(2s)));
  BOOST_CHECK_NO_THROW(resilience::pipeline(resilience::timeout(2s), resilience::deadline_stage(1s)));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(outside_cancellation, virtual_time)

// Cancels a three-stage pipeline at `when` (virtual time from the start) and
// checks the call completes once, with operation_aborted, and calls no more.
// Attempts time out at 200 ms and are followed by waits of 300 ms: attempt 1
// runs from 0 to 200 ms, attempt 2 from 500 to 700 ms.
void cancel_at(virtual_time& t, duration when, int expected_calls, bool run_due_handlers = true) {
  const auto p = resilience::pipeline(t.deadline(10s), t.retry(), t.timeout(200ms));
  asio::cancellation_signal signal;
  completion<boost::system::result<int>> done;
  spawn(t.io, p(t.slow(1s)), done, &signal);
  if (run_due_handlers) {
    t.clock.run_for(t.io, when);
    signal.emit(asio::cancellation_type::terminal);
  } else {
    // Emitted from a handler (as a signal_set handler would) queued just
    // before the completion that would start the next attempt.
    t.clock.run_for(t.io, when - 1ms);
    asio::post(t.io, [&] { signal.emit(asio::cancellation_type::terminal); });
    t.clock.advance_to(time_point(when));
  }
  t.clock.run(t.io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value->error() == aborted), "outside cancellation is final and distinct: " << done.value->error());
  BOOST_TEST(t.calls == expected_calls);
  BOOST_TEST(t.finished == t.calls, "every started op ran to its end");
  BOOST_TEST(t.clock.pending() == 0u);
}

// The backoff before attempt 2 has ended, but attempt 2 has not started.
BOOST_AUTO_TEST_CASE(before_an_attempt) { cancel_at(*this, 500ms, 1, false); }
BOOST_AUTO_TEST_CASE(mid_attempt) { cancel_at(*this, 50ms, 1); }
BOOST_AUTO_TEST_CASE(mid_backoff) { cancel_at(*this, 350ms, 1); }
BOOST_AUTO_TEST_CASE(mid_second_attempt) { cancel_at(*this, 550ms, 2); }

BOOST_AUTO_TEST_CASE(mid_timeout_while_the_op_winds_down) {
  // The attempt timeout fires at 200 ms; the op takes 100 ms more to stop.
  // The outside cancellation lands in between.
  const auto p = resilience::pipeline(deadline(10s), retry(), timeout(200ms));
  asio::cancellation_signal signal;
  completion<boost::system::result<int>> done;
  spawn(io, p(stubborn(300ms, 1)), done, &signal);
  clock.run_for(io, 250ms);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(calls == 1);
  BOOST_TEST(finished == 1);
  BOOST_TEST((done.value->error() == aborted));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(one_clock_per_call, resilience::test::retry_time)

BOOST_AUTO_TEST_CASE(a_pipeline_puts_every_stage_on_the_clock_it_is_given) {
  // Built for production (steady clock), run on virtual time.
  const auto production = resilience::pipeline(resilience::deadline_stage(10s),
                                               retry_policy{}
                                                   .max_attempts(5)
                                                   .backoff(backoff::constant(1s))
                                                   .jitter(jitter::none),
                                               resilience::timeout(500ms));
  const auto on_virtual_time = production.clock(clock);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(on_virtual_time.stage<1>().clock())>, manual_clock>);
  // Each attempt hangs until its timeout: 500 ms, then 1 s of backoff.
  auto op = [this]() -> asio::awaitable<error_code> {
    attempts.push_back(clock.now());
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(1h);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ec;
  };
  completion<error_code> done;
  spawn(io, on_virtual_time(op), done);
  clock.run(io);
  BOOST_TEST((done.value == resilience::error::timeout));
  BOOST_TEST(calls() == 5);
  BOOST_TEST((since_start(4) == 6s));
  BOOST_TEST((clock.now() == time_point(6500ms)));
}

BOOST_AUTO_TEST_CASE(two_clocks_of_one_type_are_refused_when_the_pipeline_is_built) {
  manual_clock other;
  BOOST_CHECK_THROW(resilience::pipeline(policy(), resilience::timeout(1s).clock(other)), std::invalid_argument);
  const manual_clock copy = clock;  // a copy is the same clock
  BOOST_CHECK_NO_THROW(resilience::pipeline(policy(), resilience::timeout(1s).clock(copy)));
  resilience::basic_circuit_breaker<manual_clock> breaker{resilience::breaker_options{}, other};
  BOOST_CHECK_THROW(resilience::pipeline(policy(), std::ref(breaker)), std::invalid_argument);
  BOOST_CHECK_NO_THROW(resilience::pipeline(policy().clock(other), std::ref(breaker)));
  // The breaker's own stages (with a classifier of their own) and those of
  // a registry are checked alike.
  BOOST_CHECK_THROW(resilience::pipeline(policy(), breaker.stage()), std::invalid_argument);
  BOOST_CHECK_NO_THROW(resilience::pipeline(policy().clock(other), breaker.stage()));
  resilience::basic_breaker_registry<std::string, manual_clock> hosts{resilience::breaker_options{}, {}, other};
  BOOST_CHECK_THROW(resilience::pipeline(policy(), hosts.stage("db")), std::invalid_argument);
  BOOST_CHECK_NO_THROW(resilience::pipeline(policy().clock(other), hosts.stage("db")));
}

BOOST_AUTO_TEST_CASE(a_nested_pipeline_is_one_more_stage_on_the_call_clock) {
  const auto inner = resilience::pipeline(policy(), resilience::timeout(1s).clock(clock));
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(inner.clock())>, manual_clock>);
  manual_clock other;
  BOOST_CHECK_THROW(resilience::pipeline(resilience::timeout(5s).clock(other), inner), std::invalid_argument);
  // Built on the steady clock and given one as a whole: the inner stages too.
  const auto production =
      resilience::pipeline(resilience::deadline_stage(10s), resilience::pipeline(retry_policy{}, resilience::timeout(1s)));
  const auto on_virtual_time = production.clock(clock);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(on_virtual_time.stage<1>().stage<1>().clock())>,
                               manual_clock>);
  completion<boost::system::result<int>> done;
  spawn(io, on_virtual_time(failing({reset})), done);
  clock.run(io);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST(calls() == 2);
}

BOOST_AUTO_TEST_CASE(the_op_reads_the_time_left_on_the_call_clock) {
  clock.advance(1h);  // far from the steady clock's reading
  std::vector<duration> remaining;
  std::vector<time_point> now;
  auto op = [&](const resilience::context& ctx) -> asio::awaitable<error_code> {
    remaining.push_back(ctx.remaining());
    now.push_back(ctx.now());
    co_return error_code{};
  };
  const auto call = resilience::pipeline(resilience::deadline_stage(2s), retry_policy{}, resilience::timeout(300ms));
  for (const auto& run : std::vector<std::function<asio::awaitable<error_code>()>>{
           [&] { return call.clock(clock)(op); },
           [&] { return resilience::timeout(300ms).clock(clock)(op); },
           [&] { return co_retry(op, policy(), resilience::context{.deadline = clock.now() + 300ms}); }}) {
    completion<error_code> done;
    spawn(io, run(), done);
    clock.run(io);
    BOOST_TEST(!*done.value);
  }
  BOOST_TEST((remaining == std::vector<duration>{300ms, 300ms, 300ms}));
  BOOST_TEST((now == std::vector<time_point>(3, clock.now())));
  // Outside any stage that reads a clock: the steady clock, and an explicit one.
  const resilience::context plain{.deadline = clock.now() + 1s};
  BOOST_TEST((plain.remaining(clock) == 1s));
  BOOST_TEST((resilience::context{}.remaining() == duration::max()));
}

BOOST_AUTO_TEST_SUITE_END()
