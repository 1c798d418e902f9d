// Adaptive client-side throttling: the rejection probability against the
// formula, the sliding window on virtual time, recovery, k, seeded draws, the
// stage in a pipeline with retry and cancellation (a destroyed execution
// context: lifecycle_tests.cpp), and exact counts recorded from several
// threads.
#include "support.hpp"

#include <resilience/adaptive_throttle.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::adaptive_throttle_options;
using resilience::duration;
using resilience::throttle_counts;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::names;
using resilience::test::spawn;

namespace {

using throttle = resilience::basic_adaptive_throttle<manual_clock>;
const error_code throttled = resilience::error::throttled;
using resilience::test::aborted;
const error_code unavailable = boost::system::errc::make_error_code(boost::system::errc::resource_unavailable_try_again);

// The formula, written out independently of the library.
double expected_probability(double requests, double accepts, double k = 2.0) {
  const double p = (requests - k * accepts) / (requests + 1);
  return p > 0 ? p : 0.0;
}

struct throttle_fixture {
  asio::io_context io;
  manual_clock clock;
  int calls = 0;  // ops actually started
  std::vector<resilience::throttle_event> events;

  adaptive_throttle_options options(std::uint64_t seed = 7) {
    return adaptive_throttle_options{}
        .random(resilience::random_source::seeded(seed))
        .on_throttled([this](const resilience::throttle_event& e) { events.push_back(e); });
  }

  // An op that answers `result` at once.
  auto op(error_code result) {
    return [this, result]() -> asio::awaitable<error_code> {
      ++calls;
      co_return result;
    };
  }

  // Runs one call through `stage` to its end and returns its result.
  template <class Stage>
  error_code call(const Stage& stage, error_code result) {
    completion<error_code> done;
    spawn(io, stage(op(result)), done);
    clock.run(io);
    io.restart();
    BOOST_REQUIRE(done.times == 1);
    BOOST_REQUIRE(done.value);
    return *done.value;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(throttling_probability, throttle_fixture)

BOOST_AUTO_TEST_CASE(a_healthy_backend_is_never_throttled) {
  throttle t(options(), clock);
  for (int i = 0; i < 2000; ++i) {
    BOOST_REQUIRE(call(t, error_code{}) == error_code{});
    if (i % 100 == 0) clock.advance(1s);
  }
  BOOST_TEST(calls == 2000);
  BOOST_TEST(t.rejections() == 0u);
  BOOST_TEST(events.empty());
  BOOST_TEST(t.rejection_probability() == 0.0);
  BOOST_TEST(t.counts().requests == 2000u);
  BOOST_TEST(t.counts().accepts == 2000u);
}

BOOST_AUTO_TEST_CASE(half_the_calls_accepted_is_not_throttled_with_k_2) {
  throttle t(options(), clock);
  for (int i = 0; i < 500; ++i) BOOST_REQUIRE(call(t, i % 2 ? unavailable : error_code{}) != throttled);
  BOOST_TEST(calls == 500);
  BOOST_TEST(t.rejection_probability() == 0.0, "requests = 2 x accepts must not throttle with k = 2");
}

BOOST_AUTO_TEST_CASE(a_failing_backend_raises_the_probability_to_the_formula) {
  throttle t(options(), clock);
  for (int i = 0; i < 10; ++i) BOOST_REQUIRE(call(t, error_code{}) == error_code{});
  // 10 requests, 10 accepts: 20 failures still leave requests <= 2 accepts.
  for (int i = 0; i < 10; ++i) BOOST_REQUIRE(call(t, unavailable) == unavailable);
  BOOST_TEST(t.rejection_probability() == 0.0);
  BOOST_TEST(t.rejections() == 0u);
  // From here each call is judged: rejected ones count as requests too.
  int throttled_calls = 0;
  for (int i = 0; i < 200; ++i) {
    const throttle_counts before = t.counts();
    const double p = t.rejection_probability();
    BOOST_REQUIRE(p == expected_probability(static_cast<double>(before.requests), static_cast<double>(before.accepts)));
    const int calls_before = calls;
    const error_code r = call(t, unavailable);
    if (r == throttled) {
      ++throttled_calls;
      BOOST_REQUIRE(calls == calls_before);  // the op was not called
      BOOST_REQUIRE(!events.empty());
      BOOST_REQUIRE(events.back().probability == p);
      BOOST_REQUIRE(events.back().requests == before.requests);
      BOOST_REQUIRE(events.back().accepts == before.accepts);
    } else {
      BOOST_REQUIRE(r == unavailable);
      BOOST_REQUIRE(calls == calls_before + 1);
    }
    BOOST_REQUIRE(t.counts().requests == before.requests + 1);  // a rejection is a request
    BOOST_REQUIRE(t.counts().accepts == before.accepts);
  }
  BOOST_TEST(t.counts().requests == 220u);
  BOOST_TEST(t.counts().accepts == 10u);
  BOOST_TEST(t.rejection_probability() == (220.0 - 20.0) / 221.0);
  BOOST_TEST(t.rejections() == static_cast<std::uint64_t>(throttled_calls));
  BOOST_TEST(events.size() == static_cast<std::size_t>(throttled_calls));
  // With p climbing from 0 to 0.9, most of the later calls are shed.
  BOOST_TEST(throttled_calls > 100);
  BOOST_TEST(throttled_calls < 200);
}

BOOST_AUTO_TEST_CASE(recorded_counts_give_the_formula_exactly) {
  throttle t(options(), clock);
  for (int i = 0; i < 37; ++i) t.record(i < 5);
  BOOST_TEST(t.counts().requests == 37u);
  BOOST_TEST(t.counts().accepts == 5u);
  BOOST_TEST(t.rejection_probability() == (37.0 - 10.0) / 38.0);
}

BOOST_AUTO_TEST_CASE(k_sets_how_many_requests_an_accept_allows) {
  const auto fill = [](const throttle& t) {
    for (int i = 0; i < 100; ++i) t.record(i < 40);  // 100 requests, 40 accepts
  };
  throttle k1(options().k(1), clock), k2(options(), clock), k1_5(options().k(1.5), clock), k3(options().k(3), clock);
  fill(k1);
  fill(k2);
  fill(k1_5);
  fill(k3);
  BOOST_TEST(k1.rejection_probability() == 60.0 / 101.0);
  BOOST_TEST(k1_5.rejection_probability() == 40.0 / 101.0);
  BOOST_TEST(k2.rejection_probability() == 20.0 / 101.0);
  BOOST_TEST(k3.rejection_probability() == 0.0);
  BOOST_TEST(k1.rejection_probability() == expected_probability(100, 40, 1.0));
  BOOST_TEST(k1_5.rejection_probability() == expected_probability(100, 40, 1.5));
}

BOOST_AUTO_TEST_CASE(an_op_that_throws_is_a_request_not_an_accept) {
  throttle t(options(), clock);
  completion<int> done;
  spawn(io, t([]() -> asio::awaitable<int> {
          throw std::runtime_error("down");
          co_return 1;
        }),
        done);
  clock.run(io);
  BOOST_CHECK_THROW(resilience::test::rethrow(done), std::runtime_error);
  BOOST_TEST(t.counts().requests == 1u);
  BOOST_TEST(t.counts().accepts == 0u);
}

BOOST_AUTO_TEST_CASE(a_rejected_call_without_error_channel_throws_system_error) {
  throttle t(options(), clock);
  for (int i = 0; i < 100000; ++i) t.record(false);  // p = 100000/100001
  completion<int> done;
  spawn(io, t([&]() -> asio::awaitable<int> {
          ++calls;
          co_return 1;
        }),
        done);
  clock.run(io);
  BOOST_TEST(calls == 0);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == throttled; });
  // void too.
  completion<void> nothing;
  spawn(io, t([&]() -> asio::awaitable<void> {
          ++calls;
          co_return;
        }),
        nothing);
  io.restart();
  clock.run(io);
  BOOST_TEST(calls == 0);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(nothing), boost::system::system_error,
                        [](const auto& e) { return e.code() == throttled; });
}

BOOST_AUTO_TEST_CASE(on_throttled_that_throws_becomes_the_outcome) {
  throttle t(adaptive_throttle_options{}
                 .random(resilience::random_source::seeded(1))
                 .on_throttled([](const resilience::throttle_event&) { throw std::logic_error("shed"); }),
             clock);
  for (int i = 0; i < 100000; ++i) t.record(false);
  completion<error_code> done;
  spawn(io, t(op(error_code{})), done);
  clock.run(io);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::logic_error,
                        [](const auto& e) { return std::string(e.what()) == "shed"; });
  BOOST_TEST(calls == 0);
  BOOST_TEST(t.counts().requests == 100001u, "the rejection was not counted");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(throttling_window, throttle_fixture)

BOOST_AUTO_TEST_CASE(counts_leave_the_window_a_bucket_at_a_time) {
  // 12 buckets of 10 s.
  throttle t(options().window(120s), clock);
  for (int i = 0; i < 30; ++i) t.record(false);  // bucket [0, 10 s)
  clock.advance(60s);
  for (int i = 0; i < 20; ++i) t.record(false);  // bucket [60 s, 70 s)
  BOOST_TEST(t.counts().requests == 50u);
  clock.advance_to(resilience::time_point{} + 120s - 1ns);
  BOOST_TEST(t.counts().requests == 50u, "the first bucket left before the window passed");
  clock.advance(1ns);
  BOOST_TEST(t.counts().requests == 20u, "the first bucket outlived the window");
  BOOST_TEST(t.rejection_probability() == 20.0 / 21.0);
  clock.advance_to(resilience::time_point{} + 180s);
  BOOST_TEST(t.counts().requests == 0u);
  BOOST_TEST(t.rejection_probability() == 0.0);
}

BOOST_AUTO_TEST_CASE(a_slot_reused_a_turn_later_starts_from_zero) {
  throttle t(options().window(120s), clock);
  for (int i = 0; i < 30; ++i) t.record(i % 3 == 0);
  clock.advance(125s);  // the same slot of the ring, one turn later
  t.record(true);
  BOOST_TEST(t.counts().requests == 1u);
  BOOST_TEST(t.counts().accepts == 1u);
  // Long idle: many turns, every old count gone.
  clock.advance(24h);
  BOOST_TEST(t.counts().requests == 0u);
  t.record(false);
  BOOST_TEST(t.counts().requests == 1u);
  BOOST_TEST(t.counts().accepts == 0u);
}

BOOST_AUTO_TEST_CASE(a_recovered_backend_is_no_longer_throttled) {
  throttle t(options().window(60s), clock);
  // An outage: every call fails; the throttle sheds most of them.
  for (int i = 0; i < 300; ++i) {
    BOOST_REQUIRE(call(t, unavailable) != error_code{});
    clock.advance(100ms);
  }
  BOOST_TEST(t.rejection_probability() > 0.9);
  const int sent_during_outage = calls;
  BOOST_TEST(sent_during_outage < 100, "the throttle did not shed load during the outage");
  // The backend is back. Calls that get through are accepted; rejections
  // still count as requests, so p first falls slowly, then to zero once the
  // accepts outweigh them: the excess over p = 1 roughly doubles each window.
  int throttled_after = 0;
  int steps = 0;
  while (t.rejection_probability() > 0 && steps < 6000) {  // 10 windows at most
    if (call(t, error_code{}) == throttled) ++throttled_after;
    clock.advance(100ms);
    ++steps;
  }
  BOOST_TEST_MESSAGE("recovered after " << steps / 10 << " s, " << throttled_after << " calls throttled");
  BOOST_TEST(t.rejection_probability() == 0.0);
  BOOST_TEST(throttled_after > 0);
  // Once recovered, nothing is rejected any more.
  const auto before = t.rejections();
  for (int i = 0; i < 500; ++i) BOOST_REQUIRE(call(t, error_code{}) == error_code{});
  BOOST_TEST(t.rejections() == before);
}

// Admission keeps the sum of the older buckets once per bucket: it must see
// the same window as counts() while the ring turns.
BOOST_AUTO_TEST_CASE(admission_sees_the_window_as_it_turns) {
  throttle t(options().window(120s), clock);
  for (int step = 0; step < 60; ++step) {
    clock.advance(7s);
    for (int i = 0; i < 5; ++i) t.record(i == 0);
    const throttle_counts before = t.counts();
    const auto rejected_before = events.size();
    while (events.size() == rejected_before) (void)t.try_admit();  // admitted calls record nothing
    BOOST_REQUIRE(events.back().requests == before.requests);
    BOOST_REQUIRE(events.back().accepts == before.accepts);
    BOOST_REQUIRE(events.back().probability ==
                  expected_probability(static_cast<double>(before.requests), static_cast<double>(before.accepts)));
  }
  BOOST_TEST(t.rejections() == 60u);
}

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_rejections) {
  const auto pattern = [this](std::uint64_t seed) {
    throttle t(options(seed), clock);
    std::string seen;
    for (int i = 0; i < 300; ++i) seen += call(t, unavailable) == throttled ? 'x' : '.';
    return seen;
  };
  const std::string a = pattern(42);
  BOOST_TEST(a == pattern(42));
  BOOST_TEST(a != pattern(43), "two seeds gave the same 300 draws");
  BOOST_TEST(a.find('x') != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(throttling_stage, throttle_fixture)

BOOST_AUTO_TEST_CASE(a_throttled_call_is_not_retried_by_default) {
  throttle t(options(), clock);
  for (int i = 0; i < 100000; ++i) t.record(false);  // p > 0.9999
  resilience::retry_token_budget budget{10, 0.1};
  for (int i = 0; i < 3; ++i) budget.record(true);  // 7 tokens left
  const auto call_backend =
      resilience::pipeline(resilience::retry_policy{}.max_attempts(4).clock(clock).budget(budget), t);
  BOOST_TEST(call(call_backend, unavailable) == throttled);
  BOOST_TEST(calls == 0);
  BOOST_TEST(t.rejections() == 1u, "the throttled attempt was retried");
  BOOST_TEST(budget.tokens() == 7.0, "a throttled attempt was reported to the retry budget");
  // A failure that reached the backend is still retried, and every attempt is judged.
  throttle healthy(options(), clock);
  for (int i = 0; i < 100; ++i) healthy.record(true);
  const auto retrying = resilience::pipeline(resilience::retry_policy{}.max_attempts(4).clock(clock), healthy);
  BOOST_TEST(call(retrying, unavailable) == unavailable);
  BOOST_TEST(calls == 4);
  BOOST_TEST(healthy.counts().requests == 104u);
  BOOST_TEST(healthy.rejections() == 0u);
}

BOOST_AUTO_TEST_CASE(a_policy_may_still_ask_to_retry_throttled_calls) {
  throttle t(options(), clock);
  for (int i = 0; i < 100000; ++i) t.record(false);
  const auto call_backend = resilience::pipeline(
      resilience::retry_policy{}.max_attempts(3).clock(clock).retry_if(resilience::retry_on_errors{throttled}), t);
  BOOST_TEST(call(call_backend, unavailable) == throttled);
  BOOST_TEST(t.rejections() == 3u);
}

BOOST_AUTO_TEST_CASE(a_stage_with_its_own_accepted_classifier) {
  throttle t(options(), clock);
  const error_code not_found = boost::system::errc::make_error_code(boost::system::errc::no_such_file_or_directory);
  // A "not found" is the backend's considered answer: an accept.
  const auto lenient = t.stage([&](const resilience::outcome<error_code>& o) {
    return !o.failed() || o.error() == not_found;
  });
  for (int i = 0; i < 100; ++i) BOOST_REQUIRE(call(lenient, not_found) == not_found);
  BOOST_TEST(t.counts().accepts == 100u);
  BOOST_TEST(t.rejection_probability() == 0.0);
  // The two-argument shape, reading the context.
  std::uint32_t seen_attempt = 0;
  const auto with_context = t.stage([&](const resilience::outcome<error_code>& o, const resilience::context& ctx) {
    seen_attempt = ctx.attempt;
    return !o.failed();
  });
  const auto call_backend = resilience::pipeline(resilience::retry_policy{}.max_attempts(2).clock(clock), with_context);
  BOOST_TEST(call(call_backend, unavailable) == unavailable);
  BOOST_TEST(seen_attempt == 2u);
  BOOST_TEST(t.counts().requests == 102u);
  BOOST_TEST(t.counts().accepts == 100u);
}

BOOST_AUTO_TEST_CASE(a_classifier_that_throws_counts_a_request_and_ends_the_call) {
  throttle t(options(), clock);
  const auto stage = t.stage([](const resilience::outcome<error_code>&) -> bool { throw std::domain_error("judge"); });
  completion<error_code> done;
  spawn(io, stage(op(error_code{})), done);
  clock.run(io);
  BOOST_CHECK_THROW(resilience::test::rethrow(done), std::domain_error);
  BOOST_TEST(t.counts().requests == 1u);
  BOOST_TEST(t.counts().accepts == 0u);
}

BOOST_AUTO_TEST_CASE(in_a_pipeline_the_throttle_shares_the_clock_check) {
  throttle t(options(), clock);
  manual_clock other;
  BOOST_CHECK_THROW(resilience::pipeline(resilience::retry_policy{}.clock(other), t), std::invalid_argument);
  BOOST_CHECK_THROW(resilience::pipeline(resilience::retry_policy{}.clock(other), t.stage()), std::invalid_argument);
  BOOST_CHECK_NO_THROW(resilience::pipeline(resilience::retry_policy{}.clock(clock), t.stage()));
}

// The throttle's one suspension point is the op: a cancellation there ends
// the call with operation_aborted and counts for nothing.
BOOST_AUTO_TEST_CASE(a_call_cancelled_while_its_op_runs_counts_for_nothing) {
  throttle t(options(), clock);
  t.record(true);
  completion<error_code> done;
  asio::cancellation_signal signal;
  using resilience::test::live;
  spawn(io,
        t([this]() -> asio::awaitable<error_code> {
          live frame(live::ops);
          ++calls;
          auto timer = clock.make_timer(co_await asio::this_coro::executor);
          timer.expires_after(1h);
          auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
          co_return ec;
        }),
        done, &signal);
  while (io.poll() != 0) {
  }
  BOOST_REQUIRE(calls == 1);
  signal.emit(asio::cancellation_type::terminal);
  io.restart();
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == aborted));
  BOOST_TEST(live::ops == 0, "the op's frame outlived the cancelled call");
  BOOST_TEST(t.counts().requests == 1u, "a cancelled call was counted as a request");
  BOOST_TEST(t.counts().accepts == 1u);
}

BOOST_AUTO_TEST_CASE(a_cancelled_call_that_throws_operation_aborted_counts_for_nothing) {
  throttle t(options(), clock);
  completion<int> done;
  asio::cancellation_signal signal;
  spawn(io,
        t([this]() -> asio::awaitable<int> {
          auto timer = clock.make_timer(co_await asio::this_coro::executor);
          timer.expires_after(1h);
          co_await timer.async_wait(asio::use_awaitable);  // throws operation_aborted
          co_return 1;
        }),
        done, &signal);
  while (io.poll() != 0) {
  }
  signal.emit(asio::cancellation_type::terminal);
  io.restart();
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == aborted; });
  BOOST_TEST(t.counts().requests == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(throttling_threads)

// Time stands still, so every record lands in one bucket: the counts must
// be exact, however the threads interleave.
BOOST_AUTO_TEST_CASE(records_from_several_threads_are_counted_exactly) {
  manual_clock clock;
  const throttle t(adaptive_throttle_options{}, clock);
  // Accepts well ahead of requests: nothing is ever rejected, whatever a
  // reader sees of records in flight.
  for (int i = 0; i < 1000; ++i) t.record(true);
  constexpr int threads = 4;
  constexpr int per_thread = 50000;
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    workers.emplace_back([&t, w] {
      for (int i = 0; i < per_thread; ++i) {
        if (t.try_admit()) t.record((i + w) % 4 != 0);  // 3 in 4 accepted
      }
    });
  }
  for (auto& w : workers) w.join();
  BOOST_TEST(t.rejections() == 0u);
  BOOST_TEST(t.counts().requests == static_cast<std::uint64_t>(1000 + threads * per_thread));
  BOOST_TEST(t.counts().accepts == static_cast<std::uint64_t>(1000 + threads * per_thread * 3 / 4));
}

// Across a bucket boundary crossed while threads record: every count lands
// in one of the two buckets, none is lost or doubled.
BOOST_AUTO_TEST_CASE(records_across_a_bucket_boundary_are_not_lost) {
  manual_clock clock;
  const throttle t(adaptive_throttle_options{}.window(120s), clock);
  clock.advance(9s);
  constexpr int threads = 3;
  constexpr int per_thread = 40000;
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w) {
    workers.emplace_back([&t] {
      for (int i = 0; i < per_thread; ++i) t.record(false);
    });
  }
  clock.advance(2s);  // into the next bucket, while they run
  for (auto& w : workers) w.join();
  BOOST_TEST(t.counts().requests == static_cast<std::uint64_t>(threads * per_thread));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(throttling_options)

BOOST_AUTO_TEST_CASE(bad_values_throw_naming_the_field) {
  BOOST_CHECK_EXCEPTION(adaptive_throttle_options{}.k(0.99), std::invalid_argument, names("options::k"));
  BOOST_CHECK_EXCEPTION(adaptive_throttle_options{}.k(0), std::invalid_argument, names("options::k"));
  BOOST_CHECK_EXCEPTION(adaptive_throttle_options{}.k(std::numeric_limits<double>::infinity()), std::invalid_argument,
                        names("options::k"));
  BOOST_CHECK_EXCEPTION(adaptive_throttle_options{}.k(std::numeric_limits<double>::quiet_NaN()),
                        std::invalid_argument, names("options::k"));
  BOOST_CHECK_EXCEPTION(adaptive_throttle_options{}.window(0s), std::invalid_argument, names("window"));
  BOOST_CHECK_EXCEPTION(adaptive_throttle_options{}.window(-1s), std::invalid_argument, names("window"));
  BOOST_CHECK_EXCEPTION(adaptive_throttle_options{}.window(999us), std::invalid_argument, names("window"));
  BOOST_CHECK_EXCEPTION(adaptive_throttle_options{}.window(25h), std::invalid_argument, names("window"));
}

BOOST_AUTO_TEST_CASE(defaults_and_good_values) {
  const adaptive_throttle_options d;
  BOOST_TEST(d.k() == 2.0);
  BOOST_TEST((d.window() == std::chrono::minutes(2)));
  BOOST_TEST(!d.random().is_seeded());
  const auto o = d.k(1).window(1ms).window(24h).random(resilience::random_source::seeded(3));
  BOOST_TEST(o.k() == 1.0);
  BOOST_TEST((o.window() == std::chrono::hours(24)));
  BOOST_TEST(o.random().is_seeded());
  BOOST_TEST(d.k() == 2.0, "a setter changed the value it was called on");
}

BOOST_AUTO_TEST_SUITE_END()
