// classifier.hpp and error.hpp: which failures the default classifiers
// select, and the one predicate (reached_no_server) that retries, breakers,
// budgets and hedges share for the calls refused here.
#include "support.hpp"

#include <resilience/circuit_breaker.hpp>
#include <resilience/classifier.hpp>
#include <resilience/error.hpp>
#include <resilience/fallback.hpp>
#include <resilience/hedging.hpp>
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <array>
#include <chrono>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::attempt_verdict;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::spawn;
using result = boost::system::result<int>;
using resilience::error;

namespace {

const std::array<error_code, 4> refusals{error::circuit_open, error::bulkhead_full, error::rate_limited,
                                         error::throttled};

resilience::outcome<result> failed_with(error_code ec) { return resilience::outcome<result>::from_error(ec); }

struct virtual_time {
  asio::io_context io;
  manual_clock clock;
  int calls = 0;

  auto refused_by(error_code ec) {
    return [this, ec]() -> asio::awaitable<result> {
      ++calls;
      co_return ec;
    };
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(reached_no_server)

BOOST_AUTO_TEST_CASE(names_the_four_refusals_here_and_nothing_else) {
  for (const auto& ec : refusals) BOOST_TEST(resilience::reached_no_server(ec), ec.message());
  for (const error_code ec : {error_code(error::timeout), error_code(error::deadline_exceeded),
                              error_code(error::retry_budget_exhausted), error_code(asio::error::operation_aborted),
                              error_code(asio::error::connection_refused), error_code()})
    BOOST_TEST(!resilience::reached_no_server(ec), ec.message());
  // The same number in another category is another error.
  BOOST_TEST(!resilience::reached_no_server(error_code(static_cast<int>(error::circuit_open),
                                                       boost::system::generic_category())));
}

BOOST_AUTO_TEST_CASE(any_failure_leaves_the_refusals_out_and_the_fallbacks_default_takes_them) {
  for (const auto& ec : refusals) {
    BOOST_TEST(!resilience::any_failure{}(failed_with(ec)), ec.message());
    BOOST_TEST(resilience::any_failure_or_refusal{}(failed_with(ec)), ec.message());
  }
  const auto reset = failed_with(asio::error::connection_reset);
  BOOST_TEST(resilience::any_failure{}(reset));
  BOOST_TEST(resilience::any_failure_or_refusal{}(reset));
  for (const auto& f : {resilience::any_failure{}}) {
    BOOST_TEST(!f(failed_with(asio::error::operation_aborted)));
    BOOST_TEST(!f(resilience::outcome<result>::from_value(1)));
  }
  BOOST_TEST(!resilience::any_failure_or_refusal{}(failed_with(asio::error::operation_aborted)));
  BOOST_TEST(!resilience::any_failure_or_refusal{}(resilience::outcome<result>::from_value(1)));
}

BOOST_FIXTURE_TEST_CASE(a_retry_neither_repeats_a_refusal_nor_tells_its_budget, virtual_time) {
  for (const auto& ec : {error_code(error::bulkhead_full), error_code(error::rate_limited)}) {
    resilience::retry_token_budget budget{10, 0.5};
    completion<result> done;
    calls = 0;
    spawn(io,
          resilience::co_retry(refused_by(ec), resilience::retry_policy{}.max_attempts(3).clock(clock).budget(budget)),
          done);
    clock.run(io);
    BOOST_TEST((done.value->error() == ec));
    BOOST_TEST(calls == 1, ec.message());
    BOOST_TEST(budget.tokens() == 10.0, "not told");
  }
}

BOOST_FIXTURE_TEST_CASE(a_hedge_refused_here_is_not_told_to_the_budget, virtual_time) {
  resilience::retry_token_budget budget{10, 0.5};
  for (int i = 0; i < 4; ++i) budget.record(attempt_verdict::retryable_failure);
  const auto p = resilience::hedging_policy{}.max_attempts(2).delay(1s).clock(clock).budget(budget);
  completion<result> done;
  spawn(io, p(refused_by(error::circuit_open)), done);
  clock.run(io);
  BOOST_TEST((done.value->error() == error::circuit_open));
  BOOST_TEST(budget.tokens() == 6.0, "neither a success nor a failure");
}

BOOST_FIXTURE_TEST_CASE(a_breaker_does_not_count_a_full_bulkhead_inside_it, virtual_time) {
  resilience::basic_circuit_breaker<manual_clock> breaker{
      resilience::breaker_options{}.failure_ratio(0.5).minimum_calls(2).count_window(10), clock};
  for (int i = 0; i < 10; ++i) {
    completion<result> done;
    spawn(io, breaker(refused_by(error::bulkhead_full)), done);
    clock.run(io);
    BOOST_TEST((done.value->error() == error::bulkhead_full));
  }
  BOOST_TEST((breaker.state() == resilience::circuit_state::closed));
  BOOST_TEST(calls == 10);
}

BOOST_FIXTURE_TEST_CASE(a_fallback_answers_for_an_open_breaker_by_default, virtual_time) {
  const auto fallback = resilience::fallback_value(7);
  completion<result> done;
  spawn(io, fallback(refused_by(error::circuit_open)), done);
  clock.run(io);
  BOOST_TEST(done.value->value() == 7);
}

BOOST_AUTO_TEST_SUITE_END()
