// resilience/async_run.hpp: a stage's call through any completion token,
// with the cancellation a coroutine caller has.
#include "support.hpp"

#include <resilience/async_run.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <future>
#include <optional>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using resilience::test::extremes::virtual_calls;
using int_result = boost::system::result<int>;

BOOST_FIXTURE_TEST_SUITE(async_run, virtual_calls)

BOOST_AUTO_TEST_CASE(a_callback_gets_the_calls_result_once) {
  const auto policy =
      resilience::retry_policy{}.max_attempts(3).backoff(resilience::backoff::constant(10ms).with_jitter(resilience::jitter::none)).clock(clock);
  int times = 0;
  std::optional<int_result> got;
  resilience::async_run(io.get_executor(), policy, failing(2), [&](std::exception_ptr e, int_result r) {
    BOOST_TEST(!e);
    ++times;
    got = r;
  });
  clock.run(io);
  BOOST_TEST(times == 1);
  BOOST_REQUIRE(got);
  BOOST_TEST(**got == 7, "the third attempt's answer");
  BOOST_TEST(calls.size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_future_holds_the_result_and_a_library_error_in_its_channel) {
  resilience::basic_circuit_breaker<resilience::testing::manual_clock> breaker(
      resilience::breaker_options{}.consecutive_failures(1), clock);
  std::future<int_result> first = resilience::async_run(io.get_executor(), breaker, failing(1), asio::use_future);
  clock.run(io);
  io.restart();
  BOOST_TEST((first.get().error() == asio::error::connection_reset));
  std::future<int_result> refused = resilience::async_run(io.get_executor(), breaker, failing(0), asio::use_future);
  clock.run(io);
  BOOST_TEST((refused.get().error() == resilience::error::circuit_open), "open: refused, in T's error channel");
}

BOOST_AUTO_TEST_CASE(deferred_starts_nothing_until_it_is_launched) {
  const auto call = resilience::pipeline(resilience::timeout(1s)).clock(clock);
  auto later = resilience::async_run(io.get_executor(), call, taking(10ms), asio::deferred);
  clock.run(io);
  io.restart();
  BOOST_TEST(calls.empty(), "not started");
  std::optional<int_result> got;
  std::move(later)([&](std::exception_ptr, int_result r) { got = r; });
  clock.run(io);
  BOOST_REQUIRE(got);
  BOOST_TEST(**got == 7);
  BOOST_TEST(calls.size() == 1u);
}

BOOST_AUTO_TEST_CASE(use_awaitable_makes_it_a_coroutine_call_with_a_context) {
  const auto call = resilience::pipeline(resilience::timeout(1s)).clock(clock);
  resilience::context parent;
  parent.deadline = clock.now() + 50ms;  // tighter than the timeout: its reason wins
  const auto done = run([&]() -> asio::awaitable<int_result> {
    co_return co_await resilience::async_run(co_await asio::this_coro::executor, call, taking(1s), parent,
                                             asio::use_awaitable);
  }());
  BOOST_REQUIRE(done.value);
  BOOST_TEST((done.value->error() == resilience::error::deadline_exceeded));
  BOOST_TEST((elapsed() == 50ms));
}

// Cancelling through the token is cancelling the caller: final, aborted,
// and the op stops at once.
BOOST_AUTO_TEST_CASE(the_tokens_cancellation_slot_cancels_the_call) {
  const auto policy =
      resilience::retry_policy{}.max_attempts(5).backoff(resilience::backoff::constant(1s).with_jitter(resilience::jitter::none)).clock(clock);
  asio::cancellation_signal cancel;
  std::optional<int_result> got;
  resilience::async_run(io.get_executor(), policy, taking(1min),
                        asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, int_result r) {
                          BOOST_TEST(!e);
                          got = r;
                        }));
  io.poll();
  BOOST_REQUIRE(calls.size() == 1u);
  cancel.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_REQUIRE(got);
  BOOST_TEST((got->error() == asio::error::operation_aborted));
  BOOST_TEST(calls.size() == 1u, "not retried");
  BOOST_TEST((elapsed() == 0s), "ended at once, not at the op's end");
}

BOOST_AUTO_TEST_SUITE_END()
