// Events (event.hpp): every stage of a pipeline reports to the sink its
// pipeline, or its caller, names; the innermost sink wins; a breaker's
// transitions go to the call that made them; typed hooks still run; the
// success path reports nothing.
#include "support.hpp"

#include <resilience/adaptive_throttle.hpp>
#include <resilience/bulkhead.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/deadline.hpp>
#include <resilience/fallback.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/rate_limiter.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using resilience::event;
using resilience::event_kind;
using resilience::test::extremes::virtual_calls;

namespace {

struct recorded final : resilience::event_sink {
  std::vector<event> seen;
  void on_event(const event& e) noexcept override { seen.push_back(e); }
  // The names of the events seen, in order, space-separated.
  std::string kinds() const {
    std::string k;
    for (const auto& e : seen) k += std::string(k.empty() ? "" : " ") + e.name();
    return k;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(events, virtual_calls)

BOOST_AUTO_TEST_CASE(a_pipeline_reports_its_retries_timeouts_and_breaker_to_its_sink) {
  recorded sink;
  resilience::basic_circuit_breaker<resilience::testing::manual_clock> breaker(
      resilience::breaker_options{}.consecutive_failures(3).open_duration(10s), clock);
  int typed_retries = 0;
  const auto call = resilience::pipeline(resilience::retry_policy{}
                                             .max_attempts(4)
                                             .backoff(resilience::backoff::constant(100ms).with_jitter(resilience::jitter::none))
                                             .on_retry([&](const auto&) { ++typed_retries; }),
                                         breaker, resilience::timeout(50ms))
                        .clock(clock)
                        .events(sink);
  // Two failures, a timeout, then the breaker is open for the fourth attempt.
  int n = 0;
  const auto done = run(call([&]() -> boost::asio::awaitable<boost::system::result<int>> {
    if (++n <= 2) co_return boost::system::error_code(boost::asio::error::connection_reset);
    co_return co_await taking(1s)();
  }));
  BOOST_TEST_REQUIRE(done.times == 1);
  BOOST_TEST((done.value->error() == resilience::error::circuit_open));
  BOOST_TEST(sink.kinds() == "on_retry on_retry on_timeout on_circuit_opened on_retry on_circuit_rejected");
  BOOST_TEST(typed_retries == 3, "the typed hook runs as well");
  BOOST_REQUIRE(sink.seen.size() == 6u);
  BOOST_TEST(sink.seen[0].attempt == 1u);
  BOOST_TEST(sink.seen[1].attempt == 2u);
  BOOST_TEST((sink.seen[0].delay == 100ms));
  BOOST_TEST((sink.seen[0].outcome == resilience::call_outcome::error));
  BOOST_TEST((sink.seen[0].error == boost::asio::error::connection_reset));
  BOOST_TEST((sink.seen[2].error == resilience::error::timeout));
  BOOST_TEST(sink.seen[2].attempt == 3u);
  BOOST_TEST(!sink.seen[3].outcome, "a transition is about no call");
  BOOST_TEST((sink.seen[3].delay == 10s), "how long it opens for");
  BOOST_TEST((sink.seen[5].error == resilience::error::circuit_open));
  BOOST_TEST(std::string(sink.seen[5].strategy()) == "circuit_breaker");
}

BOOST_AUTO_TEST_CASE(a_call_that_succeeds_reports_nothing) {
  recorded sink;
  resilience::basic_circuit_breaker<resilience::testing::manual_clock> breaker(resilience::breaker_options{}, clock);
  const auto call =
      resilience::pipeline(resilience::retry_policy{}, breaker, resilience::timeout(50ms)).clock(clock).events(sink);
  const auto done = run(call(taking(10ms)));
  BOOST_TEST(done.value->has_value());
  BOOST_TEST(sink.seen.empty());
}

BOOST_AUTO_TEST_CASE(the_callers_sink_is_used_when_the_pipeline_has_none_and_the_innermost_wins) {
  recorded outer, inner, callers;
  const auto inner_call = resilience::pipeline(resilience::timeout(50ms)).clock(clock).events(inner);
  const auto outer_call = resilience::pipeline(resilience::retry_policy{}
                                                   .max_attempts(2)
                                                   .backoff(resilience::backoff::constant(1ms).with_jitter(resilience::jitter::none)),
                                               inner_call)
                              .clock(clock)
                              .events(outer);
  auto done = run(outer_call(taking(1s)));
  BOOST_TEST((done.value->error() == resilience::error::timeout));
  BOOST_TEST(outer.kinds() == "on_retry");
  BOOST_TEST(inner.kinds() == "on_timeout on_timeout");

  // No sink of its own: the caller's context names one.
  const auto plain = resilience::pipeline(resilience::timeout(50ms)).clock(clock);
  resilience::context ctx;
  ctx.events = &callers;
  done = run(plain(taking(1s), ctx));
  BOOST_TEST(callers.kinds() == "on_timeout");
}

BOOST_AUTO_TEST_CASE(refusals_by_a_bulkhead_a_limiter_and_a_throttle_are_reported) {
  recorded sink;
  resilience::basic_bulkhead<resilience::testing::manual_clock> pool(
      resilience::bulkhead_options{}.max_concurrent(1).max_queue(0), clock);
  const auto bulkheaded = resilience::pipeline(pool).events(sink);
  completion<boost::system::result<int>> first, second;
  spawn(io, bulkheaded(taking(1s)), first);
  spawn(io, bulkheaded(taking(1s)), second);
  clock.run(io);
  io.restart();
  BOOST_TEST((second.value->error() == resilience::error::bulkhead_full));

  resilience::basic_rate_limiter<resilience::testing::manual_clock> limiter(
      resilience::rate_limiter_options{}.token_bucket(1, 1s), clock);
  const auto limited = resilience::pipeline(limiter).events(sink);
  run(limited(taking(1ms)));
  const auto refused = run(limited(taking(1ms)));
  BOOST_TEST((refused.value->error() == resilience::error::rate_limited));

  // A throttle that has seen only rejections refuses almost every call.
  resilience::basic_adaptive_throttle<resilience::testing::manual_clock> throttle(
      resilience::adaptive_throttle_options{}.k(1.1), clock);
  const auto throttled = resilience::pipeline(throttle).events(sink);
  for (int i = 0; i < 50; ++i) run(throttled(failing(1000)));
  BOOST_REQUIRE(sink.seen.size() >= 3u);
  BOOST_TEST((sink.seen[0].kind == event_kind::bulkhead_queue_full));
  BOOST_TEST((sink.seen[1].kind == event_kind::rate_limited));
  BOOST_TEST((sink.seen[1].delay > resilience::duration::zero()), "when a permit may be free");
  BOOST_TEST((sink.seen.back().kind == event_kind::throttled));
  for (const auto& e : sink.seen) BOOST_TEST((e.outcome == resilience::call_outcome::error));
}

BOOST_AUTO_TEST_CASE(a_fallback_reports_the_outcome_it_replaced) {
  recorded sink;
  const auto call = resilience::pipeline(resilience::fallback_value(boost::system::result<int>(-1))).events(sink);
  const auto done = run(call(failing(1)));
  BOOST_TEST(**done.value == -1);
  BOOST_REQUIRE(sink.seen.size() == 1u);
  BOOST_TEST((sink.seen[0].kind == event_kind::fallback));
  BOOST_TEST((sink.seen[0].error == boost::asio::error::connection_reset));
}

// The kind table is one list: every kind has its own name within its
// strategy, and nothing falls through to "unknown".
BOOST_AUTO_TEST_CASE(every_kind_has_a_name_and_a_strategy_of_its_own) {
  std::set<std::pair<std::string, std::string>> names;
  for (std::size_t k = 0; k < resilience::event_kind_count; ++k) {
    const auto kind = static_cast<event_kind>(k);
    const std::string name = resilience::to_string(kind), strategy = resilience::strategy_of(kind);
    BOOST_TEST(name.rfind("on_", 0) == 0u, name);
    BOOST_TEST(strategy != "unknown", name);
    BOOST_TEST(names.emplace(strategy, name).second, strategy << " " << name << " twice");
  }
  static_assert(std::string_view(resilience::to_string(event_kind::slow_client)) == "on_slow_client");
  static_assert(std::string_view(resilience::strategy_of(event_kind::fleet_resumed)) == "fleet_rate_limiter");
}

// An inner timeout clamped to a deadline that an outer stage's own timer
// watches leaves the expiry to that stage: one deadline, one event.
BOOST_AUTO_TEST_CASE(a_deadline_is_reported_once_by_the_bound_that_watches_it) {
  recorded sink;
  const auto inner = resilience::timeout(5s).clock(clock);
  const auto outer = resilience::deadline_stage(1s).clock(clock);
  resilience::context ctx;
  ctx.events = &sink;
  const auto done = run(outer([&](const resilience::context& c) { return inner(taking(1min), c); }, ctx));
  BOOST_TEST((done.value->error() == resilience::error::deadline_exceeded));
  BOOST_TEST(sink.kinds() == "on_deadline");

  // A timeout whose own limit is the tighter one reports its own expiry.
  recorded own;
  ctx.events = &own;
  const auto tight = resilience::timeout(100ms).clock(clock);
  run(outer([&](const resilience::context& c) { return tight(taking(1min), c); }, ctx));
  BOOST_TEST(own.kinds() == "on_timeout");

  // A pipeline keeps the deadline without a timer of its own (the timeout
  // inside is clamped to it): the timeout reports it, once.
  recorded piped;
  const auto call = resilience::pipeline(resilience::deadline_stage(resilience::deadline(clock.now() + 1s)),
                                         resilience::timeout(5s))
                        .clock(clock)
                        .events(piped);
  const auto piped_done = run(call(taking(1min)));
  BOOST_TEST((piped_done.value->error() == resilience::error::deadline_exceeded));
  BOOST_TEST(piped.kinds() == "on_deadline");
}

// A typed hook that throws: the sink still sees the event, and the call
// ends with what the hook threw.
BOOST_AUTO_TEST_CASE(a_hook_that_throws_does_not_keep_the_event_from_the_sink) {
  recorded sink;
  resilience::basic_bulkhead<resilience::testing::manual_clock> pool(
      resilience::bulkhead_options{}.max_concurrent(1).on_rejected(
          [](const resilience::bulkhead_rejection&) { throw std::runtime_error("hook"); }),
      clock);
  resilience::basic_rate_limiter<resilience::testing::manual_clock> limiter(
      resilience::rate_limiter_options{}.token_bucket(1, 1s).on_rejected(
          [](const resilience::rate_limit_rejection&) { throw std::runtime_error("hook"); }),
      clock);
  resilience::basic_circuit_breaker<resilience::testing::manual_clock> breaker(
      resilience::breaker_options{}.consecutive_failures(1).open_duration(10s).on_state_change(
          [](const resilience::state_change&) { throw std::runtime_error("hook"); }),
      clock);
  resilience::basic_adaptive_throttle<resilience::testing::manual_clock> throttle(
      resilience::adaptive_throttle_options{}.k(1.0).on_throttled(
          [](const resilience::throttle_event&) { throw std::runtime_error("hook"); }),
      clock);
  const auto threw = [](const auto& done) {
    if (!done.exception) return false;
    try {
      std::rethrow_exception(done.exception);
    } catch (const std::runtime_error& e) {
      return std::string(e.what()) == "hook";
    } catch (...) {
      return false;
    }
  };

  completion<boost::system::result<int>> holder, refused;
  spawn(io, resilience::pipeline(pool).events(sink)(taking(1s)), holder);
  spawn(io, resilience::pipeline(pool).events(sink)(taking(1s)), refused);
  clock.run(io);
  io.restart();
  BOOST_TEST(threw(refused));
  BOOST_TEST(sink.kinds() == "on_bulkhead_queue_full");

  sink.seen.clear();
  run(resilience::pipeline(limiter).events(sink)(taking(1ms)));
  BOOST_TEST(threw(run(resilience::pipeline(limiter).events(sink)(taking(1ms)))));
  BOOST_TEST(sink.kinds() == "on_rate_limited");

  sink.seen.clear();
  BOOST_TEST(threw(run(resilience::pipeline(breaker).events(sink)(failing(1000)))));
  BOOST_TEST(sink.kinds() == "on_circuit_opened");

  sink.seen.clear();
  bool thrown = false;
  for (int i = 0; i < 50 && !thrown; ++i) thrown = threw(run(resilience::pipeline(throttle).events(sink)(failing(1000))));
  BOOST_TEST(thrown);
  BOOST_TEST(sink.kinds() == "on_throttled");
}

BOOST_AUTO_TEST_SUITE_END()
