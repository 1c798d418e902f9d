// Retry budgets as gRFC A6 counts them: a success gives tokens back, a
// failure the policy retries takes one, a failure it does not retry neither;
// and a server-named wait (pushback) restarts the backoff schedule.
#include "support.hpp"

#include <resilience/hedging.hpp>
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <chrono>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::attempt_verdict;
using resilience::duration;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
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
  resilience::retry_throttle t{10, 0.5};
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
  resilience::retry_throttle throttle{10, 0.5};
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
  resilience::retry_throttle throttle{10, 0.5};
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
