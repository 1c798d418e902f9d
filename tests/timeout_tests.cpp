#include "support.hpp"

#include <resilience/any_pipeline.hpp>
#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::backoff;
using resilience::duration;
using resilience::jitter;
using resilience::retry_policy;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::call_through_local;
using resilience::test::completion;
using resilience::test::spawn;

namespace {

const error_code timeout_error = resilience::error::timeout;
const error_code deadline_error = resilience::error::deadline_exceeded;
const error_code aborted = asio::error::operation_aborted;

struct virtual_time {
  asio::io_context io;
  manual_clock clock;
  int calls = 0;
  int finished = 0;  // ops that ran to their end, however they ended
  std::vector<time_point> started;
  std::vector<resilience::context> contexts;

  auto timeout(duration d) const { return resilience::timeout(d).clock(clock); }
  auto deadline(duration d) const { return resilience::basic_deadline_stage<manual_clock>(d, clock); }
  auto retry() const {
    return retry_policy{}.max_attempts(10).backoff(backoff::constant(300ms)).clock(clock);
  }

  // Takes `work` of virtual time, then answers `value`; a cancellation ends
  // the wait early with operation_aborted in the error channel.
  auto slow(duration work, int value = 1) {
    return [this, work, value](const resilience::context& ctx) -> asio::awaitable<boost::system::result<int>> {
      ++calls;
      started.push_back(clock.now());
      contexts.push_back(ctx);
      auto t = clock.make_timer(co_await asio::this_coro::executor);
      t.expires_after(work);
      auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      ++finished;
      if (ec) co_return ec;
      co_return value;
    };
  }

  // Like slow(), but the answer is a plain int and failures are exceptions.
  auto slow_throwing(duration work) {
    return [this, work]() -> asio::awaitable<int> {
      ++calls;
      auto t = clock.make_timer(co_await asio::this_coro::executor);
      t.expires_after(work);
      co_await t.async_wait(asio::use_awaitable);
      ++finished;
      co_return 7;
    };
  }

  // Ignores cancellation: always takes `work`, then answers `result`.
  auto stubborn(duration work, boost::system::result<int> result) {
    return [this, work, result]() -> asio::awaitable<boost::system::result<int>> {
      ++calls;
      co_await asio::this_coro::reset_cancellation_state(asio::disable_cancellation());
      auto t = clock.make_timer(co_await asio::this_coro::executor);
      t.expires_after(work);
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      ++finished;
      co_return result;
    };
  }

  duration now() const { return clock.now() - time_point{}; }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(timeout_stage, virtual_time)

BOOST_AUTO_TEST_CASE(the_timeout_fires_cancels_and_waits_for_the_op) {
  completion<boost::system::result<int>> done;
  const auto t = timeout(100ms);
  spawn(io, t(slow(1s)), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value->error() == timeout_error));
  BOOST_TEST(finished == 1, "the op was waited for, not detached");
  BOOST_TEST((now() == 100ms));
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(an_op_without_an_error_channel_gets_the_timeout_thrown) {
  completion<int> done;
  const auto t = timeout(100ms);
  spawn(io, t(slow_throwing(1s)), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == timeout_error; });
}

BOOST_AUTO_TEST_CASE(the_op_finishing_first_wins_and_nothing_wakes_later) {
  completion<boost::system::result<int>> done;
  const auto t = timeout(1s);
  spawn(io, t(slow(10ms, 42)), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((now() == 10ms), "the timer was disarmed: time never ran on to 1 s");
  BOOST_TEST(clock.pending() == 0u);
}

BOOST_AUTO_TEST_CASE(an_op_that_ignores_cancellation_is_waited_for) {
  // Success after the timer: the work was done, so it is returned as is.
  completion<boost::system::result<int>> ok;
  const auto t = timeout(100ms);
  spawn(io, t(stubborn(300ms, 5)), ok);
  clock.run(io);
  BOOST_TEST(ok.value->value() == 5);
  BOOST_TEST((now() == 300ms), "never detached: the call lasted as long as the op");
  // Failure after the timer: reported as the timeout it is.
  completion<boost::system::result<int>> failed;
  spawn(io, t(stubborn(300ms, error_code(asio::error::connection_reset))), failed);
  clock.run(io);
  BOOST_TEST((failed.value->error() == timeout_error));
  BOOST_TEST(finished == 2);
}

BOOST_AUTO_TEST_CASE(on_timeout_reports_each_expiry_once_after_the_op_finished) {
  std::vector<resilience::expiry_event> events;
  int finished_when_reported = -1;
  const auto t = timeout(100ms).on_timeout([&](const resilience::expiry_event& e) {
    events.push_back(e);
    finished_when_reported = finished;
  });
  completion<boost::system::result<int>> late, early;
  spawn(io, t(slow(1s)), late);
  spawn(io, t(slow(10ms)), early);
  clock.run(io);
  BOOST_REQUIRE(events.size() == 1u);
  BOOST_TEST((events[0].reason == timeout_error));
  BOOST_TEST((events[0].at == time_point(100ms)));
  BOOST_TEST(events[0].attempt == 1u);
  BOOST_TEST(finished_when_reported == 2, "reported after the overrunning op was waited for");
  BOOST_TEST(early.value->value() == 1);
}

BOOST_AUTO_TEST_CASE(bad_timeouts_are_rejected) {
  BOOST_CHECK_THROW(resilience::timeout(0ms), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::timeout(-1s), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::timeout(1s).cancellation(asio::cancellation_type::none), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::deadline_stage(0s), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::deadline::after(-1s), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(deadlines, virtual_time)

BOOST_AUTO_TEST_CASE(deadline_values) {
  const auto d = resilience::deadline::after(2s, clock);
  BOOST_TEST(d.is_set());
  BOOST_TEST((d.remaining(clock) == 2s));
  BOOST_TEST(!d.expired(clock));
  clock.advance(3s);
  BOOST_TEST((d.remaining(clock) == duration::zero()));
  BOOST_TEST(d.expired(clock));
  BOOST_TEST(!resilience::deadline{}.is_set());
  BOOST_TEST((resilience::deadline{}.remaining(clock) == duration::max()));
}

BOOST_AUTO_TEST_CASE(the_op_reads_the_deadline_from_its_context) {
  completion<boost::system::result<int>> done;
  const auto stage = deadline(2s);
  spawn(io, stage(slow(10ms)), done);
  clock.run(io);
  BOOST_REQUIRE(contexts.size() == 1u);
  BOOST_TEST((contexts[0].deadline == time_point(2s)));
  BOOST_TEST((contexts[0].remaining(clock) == 2s - 10ms), "read after the op's 10 ms");
}

BOOST_AUTO_TEST_CASE(nested_deadlines_take_the_earliest) {
  for (bool tight_outside : {true, false}) {
    virtual_time t;
    completion<boost::system::result<int>> done;
    const auto p = tight_outside ? resilience::pipeline(t.deadline(1s), t.deadline(5s))
                                 : resilience::pipeline(t.deadline(5s), t.deadline(1s));
    spawn(t.io, p(t.slow(3s)), done);
    t.clock.run(t.io);
    BOOST_REQUIRE(t.contexts.size() == 1u);
    BOOST_TEST((t.contexts[0].deadline == time_point(1s)));
    BOOST_TEST((done.value->error() == deadline_error));
    BOOST_TEST((t.now() == 1s));
  }
}

BOOST_AUTO_TEST_CASE(an_absolute_deadline_from_an_inbound_request) {
  const auto inbound = resilience::deadline::after(500ms, clock);
  clock.advance(200ms);  // time spent before the outbound call
  completion<boost::system::result<int>> done;
  const auto stage = resilience::basic_deadline_stage<manual_clock>(inbound, clock);
  spawn(io, stage(slow(1s)), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == deadline_error));
  BOOST_TEST((now() == 500ms));
}

BOOST_AUTO_TEST_CASE(on_deadline_reports_the_deadline_passing) {
  std::vector<resilience::expiry_event> events;
  const auto stage = deadline(300ms).on_deadline([&](const auto& e) { events.push_back(e); });
  completion<boost::system::result<int>> done;
  spawn(io, stage(slow(1s)), done);
  clock.run(io);
  BOOST_REQUIRE(events.size() == 1u);
  BOOST_TEST((events[0].reason == deadline_error));
  BOOST_TEST((events[0].at == time_point(300ms)));
}

BOOST_AUTO_TEST_CASE(an_expired_deadline_does_not_call_the_op) {
  const auto inbound = resilience::deadline::after(100ms, clock);
  clock.advance(1s);
  completion<boost::system::result<int>> done;
  const auto stage = resilience::basic_deadline_stage<manual_clock>(inbound, clock);
  spawn(io, stage(slow(1ms)), done);
  clock.run(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST((done.value->error() == deadline_error));
}

BOOST_AUTO_TEST_SUITE_END()

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
  const auto p = resilience::pipeline(deadline(900ms), retry(), timeout(200ms));
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
                                      retry_policy{}.max_attempts(10).backoff(backoff::constant(50ms)).clock(clock),
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
      resilience::pipeline(deadline(1s), retry_policy{}.max_attempts(10).backoff(backoff::exponential(300ms)).jitter(jitter::none).clock(clock));
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

BOOST_AUTO_TEST_CASE(a_pipeline_built_at_run_time_behaves_the_same) {
  // Configuration decides the stages; the scenario is the static
  // a_deadline_passing_mid_attempt_is_deadline_exceeded one.
  resilience::any_pipeline<boost::system::result<int>> p;
  p.add(deadline(900ms))
      .add(retry_policy{}.max_attempts(10).backoff(backoff::constant(50ms)).clock(clock))
      .add(timeout(800ms));
  BOOST_TEST(p.size() == 3u);
  completion<boost::system::result<int>> done;
  spawn(io, p(slow(1s)), done);
  clock.run(io);
  BOOST_TEST(calls == 2);
  BOOST_TEST(finished == 2);
  BOOST_TEST((done.value->error() == deadline_error));
  BOOST_TEST((now() == 900ms));

  resilience::any_pipeline<boost::system::result<int>> bad;
  bad.add(resilience::deadline_stage(1s));
  BOOST_CHECK_THROW(bad.add(resilience::timeout(2s)), std::invalid_argument);
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
  p.add(retry_policy{}.max_attempts(2).backoff(backoff::constant(10ms)).clock(clock)).add(timeout(400ms));
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

BOOST_AUTO_TEST_SUITE(timeout_concurrency)

BOOST_AUTO_TEST_CASE(pipelines_on_strands_of_a_two_thread_pool) {
  // Real time, short bounds: some attempts time out, some do not. What is
  // checked is exactly-once completion and, under TSan, the absence of races,
  // not timing.
  constexpr int calls = 300;
  asio::thread_pool pool(2);
  std::atomic<int> completions{0}, values{0}, timeouts{0}, starts{0};
  const auto p = resilience::pipeline(resilience::deadline_stage(2s),
                                      retry_policy{}.max_attempts(3).backoff(backoff::constant(100us)),
                                      resilience::timeout(1ms));
  for (int i = 0; i < calls; ++i) {
    auto op = [&, work = std::chrono::microseconds(i % 7 * 400)]() -> asio::awaitable<boost::system::result<int>> {
      starts.fetch_add(1);
      asio::steady_timer t(co_await asio::this_coro::executor, work);
      auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
      co_return 1;
    };
    asio::co_spawn(asio::make_strand(pool), p(op), [&](std::exception_ptr e, boost::system::result<int> r) {
      completions.fetch_add(1);
      if (!e && r) values.fetch_add(1);
      if (!e && !r && r.error() == resilience::error::timeout) timeouts.fetch_add(1);
    });
  }
  pool.join();
  BOOST_TEST(completions.load() == calls);
  BOOST_TEST(values.load() + timeouts.load() == calls);
  BOOST_TEST(starts.load() >= calls);
}

BOOST_AUTO_TEST_SUITE_END()
