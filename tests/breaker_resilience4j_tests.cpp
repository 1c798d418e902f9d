// Resilience4j's circuit-breaker tests, ported to a breaker configured with
// resilience4j_rules(): each case names the test it ports. Their manual state
// transitions become what drives them here: failures open the breaker,
// virtual time and poll() end the break. What cannot be ported is listed in
// docs/strategies/circuit-breaker.md.
#include "support.hpp"

#include <resilience/circuit_breaker.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <utility>
#include <string>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::breaker_options;
using resilience::duration;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::fail;
using resilience::test::name;
using resilience::test::spawn;
using resilience::test::succeed;

namespace {

using breaker = resilience::basic_circuit_breaker<manual_clock>;
constexpr duration tick{1};

// CircuitBreakerStateMachineTest's setUp: 50% failures or 50% calls slower
// than 4 s, of at least 5 calls in a 20 s window of 1 s buckets; a 5 s
// break; 4 calls in half-open. Its 1 s maxWaitDurationInHalfOpenState only
// where a case tests it: here a slow call takes its time on the clock.
struct r4j_fixture {
  asio::io_context io;
  manual_clock clock;
  std::vector<std::string> transitions;

  breaker_options options() {
    return breaker_options{}
        .failure_ratio(0.5)
        .slow_calls(4s, 0.5)
        .time_window(20s, 20)
        .minimum_calls(5)
        .open_duration(5s)
        .resilience4j_rules(4)
        .on_state_change([this](const resilience::state_change& e) {
          transitions.push_back(name(e.from) + ">" + name(e.to));
        });
  }

  // A call that takes `d` on the clock.
  void call(breaker& b, duration d, bool failed) {
    auto p = b.try_acquire();
    BOOST_REQUIRE(p);
    clock.advance(d);
    p.record(failed);
  }
  // Resilience4j's transitionToOpenState(), by five failures.
  void open(breaker& b) {
    fail(b, 5);
    BOOST_REQUIRE(name(b.state()) == "open");
  }
  // transitionToHalfOpenState(): the break strictly elapsed, then poll().
  void half_open(breaker& b) {
    clock.advance(b.time_until_probe());
    b.poll();
    BOOST_REQUIRE(name(b.state()) == "half_open");
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(breaker_resilience4j, r4j_fixture)

// shouldThrowCallNotPermittedExceptionWhenStateIsOpen, ...WhenStateIsForcedOpen
BOOST_AUTO_TEST_CASE(open_and_forced_open_refuse_and_count_it) {
  breaker b(options(), clock);
  open(b);
  BOOST_TEST(!b.try_acquire());
  BOOST_TEST(b.metrics().rejections == 1u);
  breaker forced(options(), clock);
  forced.isolate();
  BOOST_TEST(!forced.try_acquire());
  BOOST_TEST(forced.metrics().rejections == 1u);
}

// shouldOnlyPermitFourCallsInHalfOpenState, shouldIncreaseCounterOnReleasePermission,
// shouldThrowCallNotPermittedExceptionWhenNotFurtherTestCallsArePermitted
BOOST_AUTO_TEST_CASE(half_open_permits_four_calls_and_a_released_one_comes_back) {
  breaker b(options(), clock);
  open(b);
  half_open(b);
  std::vector<resilience::breaker_permit> probes;
  for (int i = 0; i < 4; ++i) {
    probes.push_back(b.try_acquire());
    BOOST_TEST(probes.back().is_probe());
  }
  BOOST_TEST(!b.try_acquire());
  BOOST_TEST(!b.try_acquire());
  BOOST_TEST(b.metrics().rejections == 2u);
  probes.back().release();
  BOOST_TEST(b.try_acquire().is_probe(), "a released permit is permitted again");
}

// shouldOpenAfterFailureRateThresholdExceeded2: a time-based window, one call a second.
BOOST_AUTO_TEST_CASE(opens_at_exactly_half_of_a_time_window) {
  breaker b(options(), clock);
  for (const bool failed : {false, false, false, true, true}) {
    call(b, 0s, failed);
    clock.advance(1s);
  }
  BOOST_TEST(name(b.state()) == "closed", "2 of 5: 40%");
  fail(b);
  BOOST_TEST(name(b.state()) == "open", "3 of 6: 50%, at the threshold");
}

// shouldOpenAfterFailureRateThresholdExceeded: the fifth call, a success,
// brings the window to its minimum at 60% and opens it.
BOOST_AUTO_TEST_CASE(a_success_that_reaches_the_minimum_opens_it) {
  breaker b(options(), clock);
  fail(b, 3);
  succeed(b);
  BOOST_TEST(name(b.state()) == "closed");
  BOOST_TEST(b.metrics().calls == 4u);
  BOOST_TEST(b.metrics().failures == 3u);
  succeed(b);
  BOOST_TEST(name(b.state()) == "open");
  const auto m = b.metrics();
  BOOST_TEST(m.calls == 5u);
  BOOST_TEST(m.failures == 3u);
  BOOST_TEST(m.failure_ratio == 0.6);
  BOOST_TEST(!b.try_acquire());
  BOOST_TEST(b.metrics().rejections == 1u);
}

// shouldOpenAfterSlowCallRateThresholdExceeded(UsingMockClock): 3 of 5 calls
// over 4 s, while 2 of 5 failed.
BOOST_AUTO_TEST_CASE(opens_on_the_slow_call_rate) {
  breaker b(options(), clock);
  call(b, 5s, true);
  call(b, 5s, false);
  call(b, 100ms, true);
  call(b, 100ms, false);
  BOOST_TEST(name(b.state()) == "closed");
  call(b, 5s, false);
  BOOST_TEST(name(b.state()) == "open");
  const auto m = b.metrics();
  BOOST_TEST(m.calls == 5u);
  BOOST_TEST(m.slow_calls == 3u);
  BOOST_TEST(m.slow_call_ratio == 0.6);
}

// shouldTransitionToHalfOpenAfterWaitDuration, and its OpenState's
// clock.instant().isAfter(retryAfterWaitDuration): at exactly 5 s it is
// still open.
BOOST_AUTO_TEST_CASE(half_open_once_the_wait_has_strictly_elapsed) {
  breaker b(options(), clock);
  open(b);
  BOOST_TEST(!b.try_acquire());
  clock.advance(3s);
  BOOST_TEST(!b.try_acquire());
  BOOST_TEST(b.metrics().rejections == 2u);
  clock.advance(2s);
  BOOST_TEST(!b.try_acquire(), "the wait has not strictly elapsed");
  BOOST_TEST(b.time_until_probe() == tick);
  b.poll();
  BOOST_TEST(name(b.state()) == "open");
  clock.advance(tick);
  BOOST_TEST(b.try_acquire().is_probe());
  BOOST_TEST(name(b.state()) == "half_open");

  // Ours: a probe at the break's end.
  breaker ours(options().probe_strictly_after_break(false), clock);
  open(ours);
  clock.advance(5s);
  BOOST_TEST(ours.try_acquire().is_probe());
}

// shouldTransitionToHalfOpenAfterWaitInterval: IntervalFunction.ofExponentialBackoff(5000),
// 5 s then 7.5 s; a reopening from half-open counts as the next attempt.
BOOST_AUTO_TEST_CASE(the_wait_grows_with_each_opening) {
  breaker b(options().open_duration([](std::uint32_t n) {
    return std::chrono::duration_cast<duration>(5s * std::pow(1.5, n - 1));
  }),
            clock);
  open(b);
  clock.advance(3s);
  BOOST_TEST(!b.try_acquire());
  clock.advance(3s);
  std::vector<resilience::breaker_permit> probes;
  for (int i = 0; i < 4; ++i) probes.push_back(b.try_acquire());
  for (auto& p : probes) p.record_failure();  // back to open: the second opening
  BOOST_TEST(name(b.state()) == "open");
  clock.advance(6s);
  BOOST_TEST(!b.try_acquire(), "7.5 s now");
  clock.advance(5s);
  BOOST_TEST(b.try_acquire().is_probe());
}

// shouldTransitionBackToOpenStateWhenFailureRateIsAboveThreshold: 3 of 4 probes failed.
BOOST_AUTO_TEST_CASE(half_open_reopens_on_its_failure_rate) {
  breaker b(options(), clock);
  open(b);
  half_open(b);
  for (const bool failed : {true, true, false}) {
    call(b, 0s, failed);
    BOOST_TEST(name(b.state()) == "half_open", "no verdict before the fourth");
  }
  call(b, 0s, true);
  BOOST_TEST(name(b.state()) == "open");
}

// shouldTransitionBackToOpenStateWhenSlowCallRateIsAboveThreshold: 3 of 4
// probes slow, none failed.
BOOST_AUTO_TEST_CASE(half_open_reopens_on_its_slow_call_rate) {
  breaker b(options(), clock);
  open(b);
  half_open(b);
  call(b, 5s, false);
  call(b, 5s, false);
  call(b, 5s, false);
  call(b, 1s, false);
  BOOST_TEST(name(b.state()) == "open");
}

// shouldTransitionBackToClosedStateWhenFailureIsBelowThreshold: 1 of 4
// failed; closed, with a fresh window.
BOOST_AUTO_TEST_CASE(half_open_closes_below_both_rates) {
  breaker b(options(), clock);
  open(b);
  half_open(b);
  for (const bool failed : {true, false, false, false}) call(b, 0s, failed);
  BOOST_TEST(name(b.state()) == "closed");
  BOOST_TEST(b.metrics().calls == 0u);
  succeed(b);
  BOOST_TEST(b.metrics().calls == 1u);
}

// The slow-call rate and the failure rate are judged apart (CircuitBreakerMetrics
// checkIfThresholdsExceeded): with Resilience4j's default slowCallRateThreshold
// of 100, 2 slow probes of 4 close it; ours would count them as failed.
BOOST_AUTO_TEST_CASE(slow_probes_are_judged_by_the_slow_call_rate_only) {
  breaker b(options().slow_calls(4s, 1.0), clock);
  open(b);
  half_open(b);
  for (const auto d : {5s, 5s, 0s, 0s}) call(b, d, false);
  BOOST_TEST(name(b.state()) == "closed");
}

// A breaker on slow calls alone (failureRateThreshold 100, or none here):
// failures do not open it, nor reopen it from half-open.
BOOST_AUTO_TEST_CASE(a_slow_call_only_breaker) {
  for (const bool with_failure_ratio : {false, true}) {
    BOOST_TEST_CONTEXT("failure ratio 1.0: " << with_failure_ratio) {
      auto o = options().no_failure_ratio().slow_calls(4s, 0.5).count_window(10);
      if (with_failure_ratio) o = o.failure_ratio(1.0);
      breaker b(o, clock);
      fail(b, 4);
      succeed(b);
      BOOST_TEST(name(b.state()) == "closed", "80% failed");
      for (int i = 0; i < 5 && name(b.state()) == "closed"; ++i) call(b, 5s, false);
      BOOST_REQUIRE(name(b.state()) == "open");
      half_open(b);
      for (const auto d : {5s, 5s, 0s, 0s}) call(b, d, false);  // 2 of 4 slow: 50%
      BOOST_TEST(name(b.state()) == "open");
      half_open(b);
      for (const bool failed : {false, true, true, true}) call(b, failed ? 0s : 5s, failed);  // 75% failed, 25% slow
      BOOST_TEST(name(b.state()) == "closed");
    }
  }
}

// Resilience4j's half-open window has a minimum of min(minimumNumberOfCalls,
// permitted calls): with a minimum of 2, the second recorded call decides.
BOOST_AUTO_TEST_CASE(half_open_decides_at_the_minimum_of_calls) {
  for (const bool second_fails : {false, true}) {
    breaker b(options().minimum_calls(2), clock);
    fail(b, 2);
    BOOST_REQUIRE(name(b.state()) == "open");
    half_open(b);
    auto late = b.try_acquire();
    call(b, 0s, false);
    BOOST_TEST(name(b.state()) == "half_open");
    call(b, 0s, second_fails);
    BOOST_TEST(name(b.state()) == (second_fails ? "open" : "closed"));
    late.record_failure();  // of the half-open period: dropped
    BOOST_TEST(name(b.state()) == (second_fails ? "open" : "closed"));
  }
}

// shouldReleasePermissionWhenExceptionIgnored: an ignored exception releases
// its permit (release() here) and is not counted.
BOOST_AUTO_TEST_CASE(an_ignored_probe_is_not_counted) {
  breaker b(options(), clock);
  open(b);
  half_open(b);
  for (int i = 0; i < 3; ++i) succeed(b);
  b.try_acquire().release();
  BOOST_TEST(name(b.state()) == "half_open");
  fail(b);
  BOOST_TEST(name(b.state()) == "closed", "1 of 4 failed");
  BOOST_TEST(b.metrics().calls == 0u);
}

// shouldIgnoreExceptionsAndThenTransitionToClosed
BOOST_AUTO_TEST_CASE(ignored_probes_then_four_successes_close_it) {
  breaker b(options(), clock);
  open(b);
  half_open(b);
  for (int i = 0; i < 4; ++i) b.try_acquire().release();
  BOOST_TEST(name(b.state()) == "half_open");
  for (int i = 0; i < 3; ++i) succeed(b);
  BOOST_TEST(name(b.state()) == "half_open");
  succeed(b);
  BOOST_TEST(name(b.state()) == "closed");
}

// shouldResetMetrics, shouldResetClosedState, shouldResetToClosedState
BOOST_AUTO_TEST_CASE(reset_closes_it_and_clears_the_window) {
  breaker b(options(), clock);
  succeed(b);
  fail(b);
  BOOST_TEST(b.metrics().calls == 2u);
  BOOST_TEST(b.metrics().failures == 1u);
  b.reset();
  BOOST_TEST(b.metrics().calls == 0u);
  open(b);
  b.reset();
  BOOST_TEST(name(b.state()) == "closed");
}

// shouldDisableCircuitBreaker, shouldForceOpenCircuitBreaker
BOOST_AUTO_TEST_CASE(disabled_records_nothing_and_forced_open_never_half_opens) {
  breaker b(options(), clock);
  b.disable();
  for (int i = 0; i < 5; ++i) fail(b);
  BOOST_TEST(name(b.state()) == "disabled");
  BOOST_TEST(b.metrics().calls == 0u);
  b.isolate();
  BOOST_TEST(!b.try_acquire());
  clock.advance(6s);
  BOOST_TEST(!b.try_acquire());
  BOOST_TEST(name(b.state()) == "isolated");
  BOOST_TEST(b.metrics().rejections == 2u);
}

// shouldRecordMetricsInMetricsOnlyState: 3 of 5 failed, counted, never opened.
BOOST_AUTO_TEST_CASE(metrics_only_records_without_opening) {
  breaker b(options(), clock);
  b.metrics_only();
  transitions.clear();
  fail(b, 3);
  succeed(b);
  succeed(b);
  fail(b);
  BOOST_TEST(name(b.state()) == "metrics_only");
  BOOST_TEST(transitions.empty());
  BOOST_TEST(b.metrics().calls == 6u);
  BOOST_TEST(b.metrics().failures == 4u);
}

// circuitBreakerDoesNotPublishStateTransitionEventsForInternalTransitions
BOOST_AUTO_TEST_CASE(a_transition_to_the_same_state_publishes_nothing) {
  breaker b(options(), clock);
  b.isolate();
  b.isolate();
  b.disable();
  b.disable();
  b.metrics_only();
  b.metrics_only();
  b.reset();
  b.reset();
  BOOST_TEST(transitions == (std::vector<std::string>{"closed>isolated", "isolated>disabled", "disabled>metrics_only",
                                                      "metrics_only>closed"}),
             boost::test_tools::per_element());
}

// circuitBreakerTransitionsToOpenAfterWaitDurationInHalfOpenState: with
// maxWaitDurationInHalfOpenState 1 s. Without it (their default, 0), the
// half-open state waits for its calls however long.
BOOST_AUTO_TEST_CASE(half_open_limit_only_when_set) {
  breaker limited(options().half_open_limit(1s), clock);
  open(limited);
  half_open(limited);
  clock.advance(2s);
  limited.poll();
  BOOST_TEST(name(limited.state()) == "open");

  breaker b(options(), clock);
  BOOST_TEST((b.options().half_open_limit() == duration::max()));
  open(b);
  half_open(b);
  auto probe = b.try_acquire();
  clock.advance(24h);
  b.poll();
  BOOST_TEST(name(b.state()) == "half_open");
  probe.record_success();
}

// CircuitBreakerAutoTransitionStateMachineTest.testAutoTransition: a 2 s
// wait, then the scheduled transition; here poll() from the application's timer.
BOOST_AUTO_TEST_CASE(poll_makes_the_automatic_transition) {
  breaker b(options().open_duration(2s), clock);
  open(b);
  clock.advance(2s);
  b.poll();
  BOOST_TEST(name(b.state()) == "open");
  clock.advance(tick);
  b.poll();
  BOOST_TEST(name(b.state()) == "half_open");
  BOOST_TEST(b.metrics().probes_in_flight == 0u, "no call was made");
}

// CircuitBreakerMetricsTest.testCircuitBreakerMetrics: a count window of 10
// with a minimum of 10; 12 calls recorded, the last 10 kept.
BOOST_AUTO_TEST_CASE(a_count_window_keeps_the_last_calls) {
  breaker b(breaker_options{}.failure_ratio(0.5).count_window(10).minimum_calls(10).resilience4j_rules(), clock);
  b.metrics_only();
  succeed(b);
  succeed(b);
  fail(b, 2);
  BOOST_TEST(b.metrics().calls == 4u);
  BOOST_TEST(b.metrics().failures == 2u);
  fail(b, 4);
  for (int i = 0; i < 4; ++i) succeed(b);
  BOOST_TEST(b.metrics().calls == 10u);
  BOOST_TEST(b.metrics().failures == 6u);
  BOOST_TEST(b.metrics().failure_ratio == 0.6);
  for (int i = 0; i < 3; ++i) succeed(b);
  BOOST_TEST(b.metrics().failure_ratio == 0.3);

  // The same calls in a closed breaker: it opens at the success that leaves 6 of 10 failed.
  breaker closed(breaker_options{}.failure_ratio(0.5).count_window(10).minimum_calls(10).resilience4j_rules(), clock);
  succeed(closed);
  succeed(closed);
  fail(closed, 6);
  succeed(closed);
  BOOST_TEST(name(closed.state()) == "closed");
  succeed(closed);
  BOOST_TEST(name(closed.state()) == "open");
}

// FixedSizeSlidingWindowMetricsTest.testSlidingWindowMetrics, ...testSlowCallsPercentage
BOOST_AUTO_TEST_CASE(a_count_window_of_four) {
  breaker b(breaker_options{}.failure_ratio(1.0).slow_calls(4s, 1.0).count_window(4).resilience4j_rules(), clock);
  b.metrics_only();
  const double ratios[] = {1.0, 0.5, 1.0 / 3, 0.25, 0.0};
  for (int i = 0; i < 5; ++i) {
    call(b, 0s, i == 0);
    BOOST_TEST(b.metrics().calls == std::uint64_t(std::min(i + 1, 4)));
    BOOST_TEST(b.metrics().failure_ratio == ratios[i]);
  }
  b.reset();
  b.metrics_only();
  call(b, 10s, false);
  call(b, 10s, true);
  for (int i = 0; i < 2; ++i) call(b, 100ms, false);
  BOOST_TEST(b.metrics().slow_calls == 2u);
  BOOST_TEST(b.metrics().slow_call_ratio == 0.5);
}

// SlidingTimeWindowMetricsTest.testSlidingTimeWindowMetrics: a 5 s window in
// 1 s buckets; a bucket leaves it whole, 5 s after it began.
BOOST_AUTO_TEST_CASE(a_time_window_of_five_seconds) {
  breaker b(breaker_options{}.failure_ratio(1.0).time_window(5s, 5).minimum_calls(100).resilience4j_rules(), clock);
  const auto counts = [&] { return std::pair{b.metrics().calls, b.metrics().failures}; };
  using c = std::pair<std::uint64_t, std::uint64_t>;
  fail(b);
  clock.advance(100ms);
  succeed(b);
  clock.advance(100ms);
  succeed(b);
  BOOST_TEST((counts() == c{3, 1}));
  const c after[] = {{4, 1}, {5, 1}, {6, 2}, {7, 2}, {5, 1}, {5, 1}};
  for (int i = 0; i < 6; ++i) {
    clock.advance(1s);
    call(b, 0s, i == 2);
    BOOST_TEST_CONTEXT("second " << i + 1) { BOOST_TEST((counts() == after[i])); }
  }
  clock.advance(5s);
  succeed(b);
  BOOST_TEST((counts() == c{1, 0}));
}

// SlidingTimeWindowMetricsTest.shouldClearSlidingTimeWindowMetrics: a window
// read without new calls empties itself as time passes.
BOOST_AUTO_TEST_CASE(a_time_window_empties_as_time_passes) {
  breaker b(breaker_options{}.failure_ratio(1.0).slow_calls(500ms, 1.0).time_window(5s, 5).minimum_calls(100)
                .resilience4j_rules(),
            clock);
  auto slow = b.try_acquire();
  fail(b);
  clock.advance(100ms);
  succeed(b);
  clock.advance(700ms);
  slow.record_failure();
  BOOST_TEST(b.metrics().calls == 3u);
  BOOST_TEST(b.metrics().failures == 2u);
  BOOST_TEST(b.metrics().slow_calls == 1u);
  clock.advance(4s);
  BOOST_TEST(b.metrics().calls == 3u);
  clock.advance(1s);
  BOOST_TEST(b.metrics().calls == 0u);
  BOOST_TEST(b.metrics().failure_ratio == 0.0);
}

// CircuitBreakerExceptionHandlingTest: recordException(predicate) is the
// classifier; an exception it does not record counts as a success.
BOOST_AUTO_TEST_CASE(the_classifier_is_the_record_predicate) {
  breaker b(options(), clock);
  const error_code business = asio::error::invalid_argument;
  auto stage = b.stage([&](const resilience::outcome<error_code>& o) { return o.failed() && o.error() != business; });
  error_code next;
  const auto op = [&next]() -> asio::awaitable<error_code> { co_return next; };
  for (const error_code e : {error_code(asio::error::connection_reset), business}) {
    next = e;
    completion<error_code> done;
    spawn(io, stage(op), done);
    clock.run(io);
    BOOST_TEST((done.value == e));
  }
  BOOST_TEST(b.metrics().calls == 2u);
  BOOST_TEST(b.metrics().failures == 1u);
}

// CircuitBreakerConfigTest: what it refuses, what it allows, and the rules'
// defaults.
BOOST_AUTO_TEST_CASE(configuration) {
  using resilience::test::throws_naming;
  const breaker_options o;
  throws_naming([&] { (void)o.failure_ratio(0); }, "failure_ratio");      // zeroFailureRateThresholdShouldFail
  throws_naming([&] { (void)o.failure_ratio(1.01); }, "failure_ratio");   // failureRateThresholdAboveHundredShouldFail
  throws_naming([&] { (void)o.slow_calls(1s, 0); }, "slow_calls");        // zeroSlowCallRateThresholdShouldFail
  throws_naming([&] { (void)o.slow_calls(1s, 1.01); }, "slow_calls");     // slowCallRateThresholdAboveHundredShouldFail
  throws_naming([&] { (void)o.slow_calls(0s, 1.0); }, "slow_calls");      // zeroSlowCallDurationThresholdShouldFail
  throws_naming([&] { (void)o.resilience4j_rules(0); }, "half_open_probes");  // zeroPermittedNumberOfCallsInHalfOpenStateShouldFail
  throws_naming([&] { (void)o.count_window(0); }, "count_window");        // zeroSlidingWindowSizeShouldFail
  throws_naming([&] { (void)o.minimum_calls(0); }, "minimum_calls");      // zeroMinimumNumberOfCallsShouldFail
  throws_naming([&] { (void)o.half_open_limit(-1ms); }, "half_open_limit");  // maxWaitDurationInHalfOpenStateLessThanSecondShouldFail
  // shouldReduceMinimumNumberOfCallsToSlidingWindowSize: a contradiction here, not a silent reduction.
  throws_naming([&] { breaker(o.count_window(5).minimum_calls(6).resilience4j_rules(), clock); }, "minimum_calls");
  // shouldAllowHighMinimumNumberOfCallsWhenSlidingWindowIsTimeBased
  BOOST_TEST(breaker(o.time_window(10s, 10).minimum_calls(100).resilience4j_rules(), clock).options().minimum_calls() ==
             100u);
  // A breaker with neither rate to judge its half-open calls by.
  throws_naming([&] { breaker(o.no_failure_ratio().consecutive_failures(1).resilience4j_rules(), clock); },
                "half_open_judged_by_ratio");

  const auto r = o.resilience4j_rules();
  BOOST_TEST(r.judged_half_open_probes() == 10u);
  BOOST_TEST(r.half_open_permits() == 10u);
  BOOST_TEST((r.strict_slow_threshold() && r.judges_every_call() && r.probes_strictly_after_break()));
  BOOST_TEST((r.half_open_limit() == duration::max()), "maxWaitDurationInHalfOpenState 0: none");
  BOOST_TEST((o.half_open_limit(3s).resilience4j_rules().half_open_limit() == 3s), "a limit set stays");
  BOOST_TEST((o.resilience4j_rules().half_open_limit(3s).half_open_limit() == 3s));
  BOOST_TEST((o.half_open_limit() == 60s), "ours, unchanged");
}

BOOST_AUTO_TEST_SUITE_END()
