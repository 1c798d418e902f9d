// Retry budgets: the token throttle and the ratio budget, their settings, a
// refusal's log line and event, sharing across threads; as gRFC A6 counts
// them (a success gives tokens back, a failure the policy retries takes one,
// a failure it does not retry neither); and a server-named wait (pushback)
// restarts the backoff schedule.
#include "support.hpp"

#include <resilience/hedging.hpp>
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::attempt_verdict;
using resilience::co_retry;
using resilience::duration;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::refused;
using resilience::test::reset;
using resilience::test::spawn;
using result = boost::system::result<int>;

namespace {

const error_code transient = asio::error::connection_reset;
const error_code permanent = asio::error::access_denied;

// connection_reset is worth retrying; anything else is not.
struct resets_only {
  bool operator()(const resilience::outcome<result>& o) const { return o.error() == transient; }
};

struct virtual_time {
  asio::io_context io;
  manual_clock clock;
  std::vector<time_point> attempts;

  auto op(error_code fails_with) {
    return [this, fails_with]() -> asio::awaitable<result> {
      attempts.push_back(clock.now());
      if (fails_with) co_return fails_with;
      co_return 42;
    };
  }
  auto policy() const {
    return resilience::retry_policy{}
        .max_attempts(3)
        .backoff(resilience::backoff::exponential(100ms, 2.0, 10s))
        .jitter(resilience::jitter::none)
        .retry_if(resets_only{})
        .clock(clock);
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(retry_budget_accounting, virtual_time)

BOOST_AUTO_TEST_CASE(a_throttle_counts_three_verdicts) {
  resilience::retry_token_budget t{10, 0.5};
  for (int i = 0; i < 4; ++i) t.record(attempt_verdict::retryable_failure);
  BOOST_TEST(t.tokens() == 6.0);
  t.record(attempt_verdict::final_failure);
  BOOST_TEST(t.tokens() == 6.0, "a failure not worth retrying says nothing of retrying");
  t.record(attempt_verdict::success);
  BOOST_TEST(t.tokens() == 6.5);
}

// Before: a 403-like failure the policy does not retry was counted as a
// success, and a client whose calls mostly failed that way kept its tokens.
BOOST_AUTO_TEST_CASE(a_failure_the_policy_does_not_retry_neither_takes_nor_gives_tokens) {
  resilience::retry_token_budget throttle{10, 0.5};
  for (int i = 0; i < 4; ++i) throttle.record(attempt_verdict::retryable_failure);
  const auto p = policy().budget(throttle);
  for (int call = 0; call < 5; ++call) {
    completion<result> done;
    spawn(io, resilience::co_retry(op(permanent), p), done);
    clock.run(io);
    BOOST_TEST((done.value->error() == permanent));
  }
  BOOST_TEST(attempts.size() == 5u, "not retried");
  BOOST_TEST(throttle.tokens() == 6.0);

  completion<result> ok;
  spawn(io, resilience::co_retry(op({}), p), ok);
  clock.run(io);
  BOOST_TEST(throttle.tokens() == 6.5, "a success gives token_ratio back");

  completion<result> failing;
  spawn(io, resilience::co_retry(op(transient), p), failing);
  clock.run(io);
  BOOST_TEST(attempts.size() == 6u + 2u, "the first attempt and one retry: then 4.5 tokens is not above half");
  BOOST_TEST(throttle.tokens() == 4.5);
}

BOOST_AUTO_TEST_CASE(hedging_counts_a_final_failure_as_neither) {
  resilience::retry_token_budget throttle{10, 0.5};
  for (int i = 0; i < 4; ++i) throttle.record(attempt_verdict::retryable_failure);
  const auto p = resilience::hedging_policy{}
                     .max_attempts(2)
                     .delay(1s)
                     .non_fatal_if(resets_only{})
                     .clock(clock)
                     .budget(throttle);
  completion<result> done;
  spawn(io, p(op(permanent)), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == permanent));
  BOOST_TEST(throttle.tokens() == 6.0);
}

// A user's budget of the older shape, record(bool failed, bool first), is
// still accepted; a final failure reaches it as "not failed".
BOOST_AUTO_TEST_CASE(a_budget_of_the_boolean_shape_is_still_accepted) {
  struct counting {
    int failed = 0, other = 0;
    void record(bool f, bool) noexcept { ++(f ? failed : other); }
    bool try_retry() noexcept { return true; }
  } budget;
  static_assert(resilience::retry_budget<counting>);
  completion<result> done;
  spawn(io, resilience::co_retry(op(permanent), policy().budget(budget)), done);
  clock.run(io);
  BOOST_TEST(budget.failed == 0);
  BOOST_TEST(budget.other == 1);
}

// gRFC A6: after a pushback ("retry in n ms") the backoff starts again from
// its initial delay, instead of going on from where it had grown to (which a
// plain retry_delay::after keeps doing).
BOOST_AUTO_TEST_CASE(a_server_named_wait_restarts_the_backoff) {
  int failures = 0;
  auto flaky = [&]() -> asio::awaitable<result> {
    attempts.push_back(clock.now());
    if (++failures <= 4) co_return transient;
    co_return 42;
  };
  std::vector<duration> waits;
  const auto p = policy()
                     .max_attempts(6)
                     .delay_generator([&](const resilience::outcome<result>&, const resilience::context& ctx) {
                       return ctx.attempt == 2 ? resilience::retry_delay::pushback(5s) : resilience::retry_delay::backoff();
                     })
                     .on_retry([&](const auto& e) { waits.push_back(e.delay); });
  completion<result> done;
  spawn(io, resilience::co_retry(flaky, p), done);
  clock.run(io);
  BOOST_TEST(done.value->value() == 42);
  BOOST_TEST((waits == std::vector<duration>{100ms, 5s, 100ms, 200ms}));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {
struct budget_fixture : resilience::test::retry_time {
  auto always_failing() {
    return [this]() -> asio::awaitable<boost::system::result<int>> {
      attempts.push_back(clock.now());
      co_return reset;
    };
  }
  auto always_succeeding() {
    return [this]() -> asio::awaitable<boost::system::result<int>> {
      attempts.push_back(clock.now());
      co_return 1;
    };
  }
};
}  // namespace

BOOST_FIXTURE_TEST_SUITE(retry_budgets, budget_fixture)

BOOST_AUTO_TEST_CASE(a_throttle_rejects_bad_settings) {
  BOOST_CHECK_THROW(resilience::retry_token_budget(0, 0.1), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::retry_token_budget(1001, 0.1), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::retry_token_budget(10, 0.0), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::retry_token_budget(10, -1.0), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::retry_token_budget(10, std::nan("")), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::retry_token_budget(10, 0.0001), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::retry_token_budget(10, 11.0), std::invalid_argument);
  BOOST_CHECK_NO_THROW(resilience::retry_token_budget(1000, 0.125));
  BOOST_CHECK_NO_THROW(resilience::retry_token_budget(1, 1.0));
}

BOOST_AUTO_TEST_CASE(a_throttle_counts_tokens_as_grpc_does) {
  resilience::retry_token_budget t{10, 0.5};
  BOOST_TEST(t.tokens() == 10.0);
  for (int i = 0; i < 4; ++i) t.record(true);
  BOOST_TEST(t.try_retry(), "6 tokens is above half of 10");
  t.record(true);
  BOOST_TEST(!t.try_retry(), "5 is not above half");
  BOOST_TEST(t.refusals() == 1u);
  t.record(false);
  BOOST_TEST(t.tokens() == 5.5);
  BOOST_TEST(t.try_retry());
  for (int i = 0; i < 100; ++i) t.record(false);
  BOOST_TEST(t.tokens() == 10.0, "capped at the maximum");
  for (int i = 0; i < 100; ++i) t.record(true);
  BOOST_TEST(t.tokens() == 0.0, "never below zero");
}

BOOST_AUTO_TEST_CASE(a_throttle_stops_retries_when_most_attempts_fail) {
  resilience::retry_token_budget throttle{10, 0.1};
  const auto p = policy().max_attempts(3).budget(throttle);
  std::vector<int> attempts_per_call;
  for (int call = 0; call < 5; ++call) {
    const std::size_t before = attempts.size();
    completion<boost::system::result<int>> done;
    spawn(io, co_retry(always_failing(), p), done);
    clock.run(io);
    BOOST_TEST((done.value->error() == reset));
    attempts_per_call.push_back(static_cast<int>(attempts.size() - before));
  }
  // 10 -> 9 -> 8 -> 7 tokens (3 attempts); 6 -> 5, refused; then 1 attempt each.
  BOOST_TEST(attempts_per_call == (std::vector<int>{3, 2, 1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(throttle.refusals() == 4u);
  // 8 failed attempts left 2 tokens; successes earn retries back, 0.1 each.
  for (int i = 0; i < 40; ++i) {
    completion<boost::system::result<int>> done;
    spawn(io, co_retry(always_succeeding(), p), done);
    clock.run(io);
  }
  BOOST_TEST(throttle.tokens() == 6.0);
}

BOOST_AUTO_TEST_CASE(a_ratio_budget_allows_its_share_of_calls) {
  resilience::basic_retry_ratio_budget<manual_clock> budget{
      resilience::retry_ratio_budget_options{}.ratio(0.1).min_retries_per_second(0).window(60s), clock};
  const auto p = policy().max_attempts(2).budget(budget);  // 100 calls, each 100 ms: all within the window
  int retried = 0;
  for (int call = 0; call < 100; ++call) {
    const std::size_t before = attempts.size();
    completion<boost::system::result<int>> done;
    spawn(io, co_retry(always_failing(), p), done);
    clock.run(io);
    retried += static_cast<int>(attempts.size() - before) - 1;
  }
  BOOST_TEST(retried == 10, "10% of 100 calls");
  BOOST_TEST(budget.refusals() == 90u);
}

BOOST_AUTO_TEST_CASE(a_ratio_budget_forgets_calls_past_its_window_and_grants_a_minimum_rate) {
  resilience::basic_retry_ratio_budget<manual_clock> budget{
      resilience::retry_ratio_budget_options{}.ratio(0.5).min_retries_per_second(1).window(2s), clock};
  // The minimum: one retry in any second, not a reserve of two to spend at once.
  BOOST_TEST(budget.try_retry());
  BOOST_TEST(!budget.try_retry());
  clock.advance(1s);
  BOOST_TEST(budget.try_retry(), "a second later, the minimum again");
  BOOST_TEST(!budget.try_retry());
  for (int call = 0; call < 6; ++call) budget.record(true, true);
  BOOST_TEST(budget.try_retry(), "six calls earn three retries: one more than made");
  BOOST_TEST(!budget.try_retry(), "past the ratio, and this second's minimum spent");
  clock.advance(2s);
  BOOST_TEST(budget.try_retry(), "a new window: the old calls and retries no longer count");
  BOOST_TEST(!budget.try_retry());
}

// Finagle's floor is a reserve of the rate times the window (100 retries at
// the defaults) that an outage's first moments spend at once.
BOOST_AUTO_TEST_CASE(a_ratio_budget_s_floor_is_a_rate_an_outage_cannot_spend_at_once) {
  resilience::basic_retry_ratio_budget<manual_clock> budget{resilience::retry_ratio_budget_options{}, clock};
  const auto granted = [&] {
    int n = 0;
    while (n < 1000 && budget.try_retry()) ++n;
    return n;
  };
  BOOST_TEST(granted() == 10, "ten in this second, not ten seconds' worth");
  clock.advance(1s);
  BOOST_TEST(granted() == 10);
  for (int call = 0; call < 500; ++call) budget.record(true, true);
  BOOST_TEST(granted() == 30, "10% of 500 calls, less the 20 retries already made in the window");
  BOOST_TEST(budget.refusals() == 3u);
}

// The load a retry adds lands when it is sent: a wait (a Retry-After of a
// second) may end in an outage the decision to retry could not see.
BOOST_AUTO_TEST_CASE(the_budget_is_asked_when_the_wait_ends) {
  struct timed_budget {
    manual_clock* clock;
    std::vector<time_point> asked;
    void record(attempt_verdict, bool) noexcept {}
    bool try_retry() noexcept {
      asked.push_back(clock->now());
      return false;
    }
  } budget{&clock, {}};
  const time_point start = clock.now();
  completion<result> done;
  spawn(io, co_retry(always_failing(), policy().budget(budget)), done);
  clock.run(io);
  BOOST_TEST(attempts.size() == 1u);
  BOOST_REQUIRE(budget.asked.size() == 1u);
  BOOST_TEST((budget.asked[0] - start == 100ms), "after the first backoff");
  BOOST_TEST((done.value->error() == reset), "the last outcome, as a refusal before the wait gave");
}

// A budget that can tell without taking (both built-in ones can) refuses a
// retry before its wait, when the budget is spent already; one it could
// allow then is taken when the wait ends, and refused if spent meanwhile.
BOOST_AUTO_TEST_CASE(a_budget_that_can_tell_refuses_before_the_wait_and_takes_after_it) {
  resilience::basic_retry_ratio_budget<manual_clock> budget{
      resilience::retry_ratio_budget_options{}.ratio(0.5).min_retries_per_second(0).window(10s), clock};
  std::vector<time_point> refused_at;
  const auto p = policy().max_attempts(2).budget(budget).on_budget_refused(
      [&](const resilience::budget_refusal&) { refused_at.push_back(clock.now()); });
  // One call made: half a retry, not enough for one.
  completion<boost::system::result<int>> first;
  spawn(io, co_retry(always_failing(), p), first);
  clock.run(io);
  BOOST_TEST(attempts.size() == 1u);
  BOOST_TEST((refused_at == std::vector{time_point{}}), "at once, before a wait");
  // Two calls started together: each could retry when it decided (three
  // calls earn one and a half), one takes it after the wait, the other
  // finds it taken.
  completion<boost::system::result<int>> a, b;
  spawn(io, co_retry(always_failing(), p), a);
  spawn(io, co_retry(always_failing(), p), b);
  clock.run(io);
  BOOST_TEST(attempts.size() == 4u, "two first attempts and one retry");
  BOOST_REQUIRE(refused_at.size() == 2u);
  BOOST_TEST((refused_at[1] == time_point{} + 100ms), "after the wait");
  BOOST_TEST(budget.refusals() == 2u);
}

// A first attempt refused here (an open breaker) is still a call the
// application made: without it, an outage the breaker cut short leaves the
// window thin, and the next ordinary burst's retries find it spent. It moves
// no token, and a budget of the boolean shape is not told.
BOOST_AUTO_TEST_CASE(a_first_attempt_an_open_breaker_refuses_is_a_call_for_the_ratio_budget) {
  resilience::basic_retry_ratio_budget<manual_clock> ratio{
      resilience::retry_ratio_budget_options{}.ratio(0.5).min_retries_per_second(0).window(10s), clock};
  resilience::retry_token_budget tokens{10, 0.5};
  for (int i = 0; i < 4; ++i) tokens.record(attempt_verdict::retryable_failure);
  struct counting {
    int told = 0;
    void record(bool, bool) noexcept { ++told; }
    bool try_retry() noexcept { return true; }
  } boolean;
  const auto refused_calls = [&](auto& budget) {
    for (int call = 0; call < 4; ++call) {
      completion<result> done;
      const auto refused = [this]() -> asio::awaitable<result> {
        attempts.push_back(clock.now());
        co_return resilience::error::circuit_open;
      };
      spawn(io, co_retry(refused, policy().max_attempts(2).budget(budget)), done);
      clock.run(io);
      BOOST_TEST((done.value->error() == resilience::error::circuit_open));
    }
  };
  refused_calls(ratio);
  refused_calls(tokens);
  refused_calls(boolean);
  BOOST_TEST(attempts.size() == 12u, "a refusal here is not retried");
  BOOST_TEST(tokens.tokens() == 6.0, "neither a success nor a failure");
  BOOST_TEST(boolean.told == 0);
  completion<result> done;
  spawn(io, co_retry(always_failing(), policy().max_attempts(2).budget(ratio)), done);
  clock.run(io);
  BOOST_TEST(attempts.size() == 14u, "five calls earn two and a half retries");
  BOOST_TEST(ratio.refusals() == 0u);
}

BOOST_AUTO_TEST_CASE(a_ratio_budget_rejects_bad_settings) {
  using resilience::retry_ratio_budget_options;
  BOOST_CHECK_THROW(retry_ratio_budget_options{}.ratio(0), std::invalid_argument);
  BOOST_CHECK_THROW(retry_ratio_budget_options{}.ratio(-0.1), std::invalid_argument);
  BOOST_CHECK_THROW(retry_ratio_budget_options{}.ratio(std::nan("")), std::invalid_argument);
  BOOST_CHECK_THROW(retry_ratio_budget_options{}.ratio(11), std::invalid_argument);
  BOOST_CHECK_THROW(retry_ratio_budget_options{}.window(0s), std::invalid_argument);
  BOOST_CHECK_THROW(retry_ratio_budget_options{}.window(-1s), std::invalid_argument);
  BOOST_CHECK_THROW(retry_ratio_budget_options{}.window(duration::max()), std::invalid_argument);
  BOOST_CHECK_NO_THROW(retry_ratio_budget_options{}.window(1ms).ratio(10).min_retries_per_second(UINT32_MAX));
}

BOOST_AUTO_TEST_CASE(a_refusal_is_logged_and_ends_the_call_with_its_last_outcome) {
  resilience::retry_token_budget throttle{2, 1.0};
  throttle.record(true);  // 1 token: not above half of 2
  std::vector<std::string> lines;
  const auto p = policy().budget(throttle).logger([&](std::string_view l) { lines.emplace_back(l); });
  completion<boost::system::result<int>> done;
  spawn(io, co_retry(failing({refused}), p), done);
  clock.run(io);
  BOOST_TEST(calls() == 1);
  BOOST_TEST((done.value->error() == refused));
  BOOST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0].find("retry budget exhausted") != std::string::npos, lines[0]);
}

BOOST_AUTO_TEST_CASE(a_refusal_is_an_event_and_can_end_the_call_with_its_own_error) {
  resilience::retry_token_budget throttle{2, 1.0};
  throttle.record(true);
  std::vector<resilience::budget_refusal> seen;
  std::vector<std::string> failures;
  const auto p = policy().max_attempts(4).budget(throttle).on_budget_refused([&](const resilience::budget_refusal& r) {
    seen.push_back(r);
    failures.emplace_back(r.failure);
  });
  {
    completion<boost::system::result<int>> done;
    spawn(io, co_retry(always_failing(), p), done);
    clock.run(io);
    BOOST_TEST((done.value->error() == reset), "by default the last outcome stands");
  }
  {
    completion<boost::system::result<int>> done;
    spawn(io, co_retry(always_failing(), p.budget_refusal_as_error()), done);
    clock.run(io);
    BOOST_TEST((done.value->error() == resilience::error::retry_budget_exhausted));
  }
  {
    // Set before the budget: attaching the budget keeps it.
    completion<int> done;
    const auto thrower = [this]() -> asio::awaitable<int> {
      attempts.push_back(clock.now());
      throw std::runtime_error("boom");
      co_return 0;
    };
    spawn(io, co_retry(thrower, policy().budget_refusal_as_error().budget(throttle)), done);
    clock.run(io);
    BOOST_REQUIRE(done.exception);
    BOOST_CHECK_EXCEPTION(std::rethrow_exception(done.exception), boost::system::system_error,
                          [](const auto& e) { return e.code() == resilience::error::retry_budget_exhausted; });
  }
  BOOST_REQUIRE(seen.size() == 2u);
  BOOST_TEST(seen[0].attempt == 1u);
  BOOST_TEST(seen[0].max_attempts == 4u);
  BOOST_TEST(failures[0].find(reset.message()) != std::string::npos, failures[0]);
  BOOST_TEST(attempts.size() == 3u, "one attempt each: no retry was allowed");
}

BOOST_AUTO_TEST_CASE(a_ratio_budget_counts_every_call_from_many_threads) {
  resilience::basic_retry_ratio_budget<manual_clock> budget{
      resilience::retry_ratio_budget_options{}.ratio(0.5).min_retries_per_second(0).window(10s), clock};
  // Calls spread over per-thread shards; a retry sees them all.
  std::vector<std::thread> threads;
  for (int t = 0; t < 12; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) budget.record(false, true);
    });
  for (auto& t : threads) t.join();
  int granted = 0;
  while (budget.try_retry()) ++granted;
  BOOST_TEST(granted == 6000, "half of 12,000 calls");
}

BOOST_AUTO_TEST_SUITE_END()
