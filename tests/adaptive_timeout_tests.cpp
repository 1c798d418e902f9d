#include "support.hpp"

#include <resilience/adaptive_timeout.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::basic_adaptive_timeout;
using resilience::duration;
using resilience::latency_tracker;
using resilience::latency_tracker_options;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::spawn;
using namespace resilience::test::extremes;

namespace {

// Options that make the arithmetic visible: every sample counts at once,
// bounds far from the samples, no deviation term.
latency_tracker_options plain() {
  return latency_tracker_options{}.window(100).min_samples(1).bounds(1ns, 1h).deviations(0).initial(1s);
}

// Records 1, 2, ..., 100 ms in a scrambled order: the estimate must not
// depend on arrival order.
void record_1_to_100_ms(const latency_tracker& tracker) {
  for (int i = 0; i < 100; ++i) tracker.record(std::chrono::milliseconds((i * 37) % 100 + 1));
}

// The population standard deviation of 1..100 ms: sqrt((100^2 - 1) / 12) ms.
const double stddev_1_to_100_ns = std::sqrt(9999.0 / 12.0) * 1e6;

bool names(const std::invalid_argument& e, const std::string& field) {
  return std::string(e.what()).find(field) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(latency_tracker_estimates)

BOOST_AUTO_TEST_CASE(nearest_rank_percentiles_of_1_to_100_ms) {
  const std::vector<std::pair<double, duration>> expected{
      {50, 50ms}, {90, 90ms}, {99, 99ms}, {100, 100ms}, {99.5, 100ms}, {1, 1ms}, {0.5, 1ms}, {12.3, 13ms}};
  for (const auto& [p, value] : expected) {
    const latency_tracker tracker(plain().percentile(p));
    record_1_to_100_ms(tracker);
    BOOST_TEST((tracker.stats().percentile == value), "p" << p);
    BOOST_TEST((tracker.current() == value), "p" << p << " with k = 0 is the limit");
  }
}

BOOST_AUTO_TEST_CASE(nearest_rank_on_a_window_that_does_not_divide_evenly) {
  // Three samples: p50 is rank ceil(1.5) = 2, p66.7 rank ceil(2.001) = 3,
  // p66.6 rank ceil(1.998) = 2.
  for (const auto& [p, value] : std::vector<std::pair<double, duration>>{{50, 20ms}, {66.7, 30ms}, {66.6, 20ms}}) {
    const latency_tracker tracker(plain().percentile(p));
    for (const auto d : {30ms, 10ms, 20ms}) tracker.record(d);
    BOOST_TEST((tracker.stats().percentile == value), "p" << p);
  }
}

BOOST_AUTO_TEST_CASE(population_stddev_of_1_to_100_ms) {
  const latency_tracker tracker(plain());
  record_1_to_100_ms(tracker);
  const auto stats = tracker.stats();
  BOOST_TEST(stats.samples == 100u);
  BOOST_TEST(std::abs(static_cast<double>(stats.stddev.count()) - stddev_1_to_100_ns) <= 1.0,
             stats.stddev.count() << " ns");
}

BOOST_AUTO_TEST_CASE(one_sample_or_equal_samples_have_no_deviation) {
  const latency_tracker tracker(plain().deviations(3));
  tracker.record(40ms);
  BOOST_TEST((tracker.stats().stddev == 0ns));
  BOOST_TEST((tracker.current() == 40ms));
  tracker.record(40ms);
  BOOST_TEST((tracker.current() == 40ms));
}

BOOST_AUTO_TEST_CASE(the_limit_is_the_percentile_plus_k_stddevs) {
  const latency_tracker tracker(plain().percentile(90).deviations(2));
  record_1_to_100_ms(tracker);
  const auto expected = std::llround(90e6 + 2 * stddev_1_to_100_ns);  // about 147.73 ms
  BOOST_TEST(std::abs(tracker.current().count() - expected) <= 1, tracker.current().count() << " ns");
  BOOST_TEST((tracker.stats().limit == tracker.current()));
}

BOOST_AUTO_TEST_CASE(the_limit_is_clamped_to_max) {
  const latency_tracker tracker(plain().percentile(90).deviations(2).bounds(10ms, 120ms));
  record_1_to_100_ms(tracker);
  BOOST_TEST((tracker.current() == 120ms));
  BOOST_TEST((tracker.stats().percentile == 90ms), "the statistics themselves are not clamped");
}

BOOST_AUTO_TEST_CASE(the_limit_is_clamped_to_min) {
  const latency_tracker tracker(plain().bounds(5ms, 1s).deviations(1));
  for (int i = 0; i < 10; ++i) tracker.record(1ms);
  BOOST_TEST((tracker.current() == 5ms));
}

BOOST_AUTO_TEST_CASE(a_huge_deviation_term_saturates_at_max) {
  const latency_tracker tracker(plain().deviations(1e12).bounds(1ms, duration::max()));
  tracker.record(1ms);
  tracker.record(1h);
  BOOST_TEST((tracker.current() == duration::max()));
}

BOOST_AUTO_TEST_CASE(the_initial_limit_holds_until_min_samples) {
  const latency_tracker tracker(plain().initial(300ms).min_samples(5));
  BOOST_TEST((tracker.current() == 300ms));
  for (int i = 0; i < 4; ++i) tracker.record(10ms);
  BOOST_TEST((tracker.current() == 300ms), "4 samples of 5");
  BOOST_TEST(tracker.stats().samples == 4u, "yet they are kept");
  tracker.record(10ms);
  BOOST_TEST((tracker.current() == 10ms));
}

BOOST_AUTO_TEST_CASE(the_initial_limit_is_clamped_too) {
  BOOST_TEST((latency_tracker(plain().initial(5s).bounds(10ms, 1s)).current() == 1s));
  BOOST_TEST((latency_tracker(plain().initial(1ms).bounds(10ms, 1s)).current() == 10ms));
}

BOOST_AUTO_TEST_CASE(the_window_slides_and_forgets_old_samples) {
  const latency_tracker tracker(plain().window(5).percentile(100));
  for (int i = 0; i < 5; ++i) tracker.record(100ms);
  BOOST_TEST((tracker.current() == 100ms));
  for (int i = 0; i < 4; ++i) tracker.record(10ms);
  BOOST_TEST((tracker.current() == 100ms), "one 100 ms sample is still in the window");
  tracker.record(10ms);
  BOOST_TEST((tracker.current() == 10ms), "the last one is forgotten");
  BOOST_TEST(tracker.stats().samples == 5u);
  BOOST_TEST((tracker.stats().stddev == 0ns));
}

BOOST_AUTO_TEST_CASE(the_window_forgets_in_arrival_order_not_in_value_order) {
  const latency_tracker tracker(plain().window(3).percentile(100));
  for (const auto d : {50ms, 10ms, 20ms}) tracker.record(d);
  BOOST_TEST((tracker.current() == 50ms));
  tracker.record(5ms);  // evicts 50 ms, the oldest, though it is the largest
  BOOST_TEST((tracker.current() == 20ms));
  tracker.record(5ms);  // evicts 10 ms
  tracker.record(5ms);  // evicts 20 ms
  BOOST_TEST((tracker.current() == 5ms));
}

BOOST_AUTO_TEST_CASE(negative_latencies_count_as_zero) {
  const latency_tracker tracker(plain().bounds(1ns, 1s));
  tracker.record(-5ms);
  BOOST_TEST((tracker.stats().percentile == 0ns));
  BOOST_TEST((tracker.current() == 1ns));
}

BOOST_AUTO_TEST_CASE(copies_share_one_window) {
  const latency_tracker a(plain().percentile(100));
  const latency_tracker b = a;
  a.record(10ms);
  b.record(30ms);
  BOOST_TEST(a.stats().samples == 2u);
  BOOST_TEST((a.current() == 30ms));
  BOOST_TEST((b.current() == 30ms));
}

BOOST_AUTO_TEST_CASE(bad_options_are_rejected_naming_the_field) {
  const latency_tracker_options o;
  BOOST_CHECK_EXCEPTION(o.window(0), std::invalid_argument, [](const auto& e) { return names(e, "window"); });
  for (const double p : {0.0, -1.0, 100.5, std::nan("")}) {
    BOOST_CHECK_EXCEPTION(o.percentile(p), std::invalid_argument, [](const auto& e) { return names(e, "percentile"); });
  }
  for (const double k : {-0.5, std::numeric_limits<double>::infinity(), std::nan("")}) {
    BOOST_CHECK_EXCEPTION(o.deviations(k), std::invalid_argument, [](const auto& e) { return names(e, "deviations"); });
  }
  BOOST_CHECK_EXCEPTION(o.bounds(0ms, 1s), std::invalid_argument, [](const auto& e) { return names(e, "min"); });
  BOOST_CHECK_EXCEPTION(o.bounds(2s, 1s), std::invalid_argument, [](const auto& e) { return names(e, "max"); });
  BOOST_CHECK_EXCEPTION(o.initial(-1ms), std::invalid_argument, [](const auto& e) { return names(e, "initial"); });
  BOOST_CHECK_EXCEPTION(o.min_samples(0), std::invalid_argument,
                        [](const auto& e) { return names(e, "min_samples"); });
  BOOST_CHECK_EXCEPTION(latency_tracker(o.window(5).min_samples(6)), std::invalid_argument, [](const auto& e) {
    return names(e, "min_samples (6)") && names(e, "window (5)");
  });
  BOOST_CHECK_NO_THROW(latency_tracker(o.window(5).min_samples(5)));
  BOOST_CHECK_NO_THROW(o.bounds(1s, 1s).percentile(100).deviations(0));
  BOOST_CHECK_EXCEPTION(resilience::adaptive_timeout(latency_tracker{}).cancellation(asio::cancellation_type::none),
                        std::invalid_argument, [](const auto& e) { return names(e, "cancellation"); });
}

BOOST_AUTO_TEST_CASE(a_window_too_large_is_rejected_at_the_option) {
  // Once accepted, these made the tracker throw length_error or bad_alloc
  // from inside std::vector.
  const latency_tracker_options o;
  constexpr std::size_t max = latency_tracker_options::max_window;
  for (const std::size_t w : {max + 1, std::size_t{1} << 40, std::size_t{1} << 60, SIZE_MAX}) {
    BOOST_CHECK_EXCEPTION(o.window(w), std::invalid_argument, [](const auto& e) {
      return names(e, "window") && names(e, "65536");
    });
  }
  for (const std::size_t n : {max + 1, SIZE_MAX}) {
    BOOST_CHECK_EXCEPTION(o.min_samples(n), std::invalid_argument,
                          [](const auto& e) { return names(e, "min_samples"); });
  }
  // The largest window works, and a full min_samples of it too.
  const latency_tracker tracker(plain().window(max).min_samples(max).percentile(100));
  BOOST_TEST(tracker.options().window() == max);
  tracker.record(5ms);
  BOOST_TEST((tracker.current() == 1s), "still the initial limit: 1 sample of 65536");
  BOOST_TEST(tracker.stats().samples == 1u);
}

BOOST_AUTO_TEST_CASE(options_are_values) {
  const auto a = latency_tracker_options{}.window(7);
  const auto b = a.window(3).min_samples(2);
  BOOST_TEST(a.window() == 7u);
  BOOST_TEST(b.window() == 3u);
  BOOST_TEST(a.min_samples() == latency_tracker_options{}.min_samples());
  BOOST_TEST((a != b));
  BOOST_TEST((latency_tracker(b).options() == b));
  // The defaults make a working tracker.
  BOOST_TEST((latency_tracker{}.current() == latency_tracker_options{}.initial()));
}

BOOST_AUTO_TEST_CASE(concurrent_records_keep_the_window_consistent) {
  const latency_tracker tracker(plain().window(64).percentile(100));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tracker, t] {
      for (int i = 0; i < 2000; ++i) {
        tracker.record(std::chrono::milliseconds(1 + (i + t) % 50));
        (void)tracker.current();
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto stats = tracker.stats();
  BOOST_TEST(stats.samples == 64u);
  BOOST_TEST((stats.limit >= 1ms && stats.limit <= 50ms));
  BOOST_TEST((stats.limit == tracker.current()));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// A virtual-time fixture: an io_context, a manual clock, and ops that take a
// set amount of virtual time.
struct virtual_time {
  asio::io_context io;
  manual_clock clock;

  basic_adaptive_timeout<manual_clock> stage(const latency_tracker& tracker) const {
    return resilience::adaptive_timeout(tracker).clock(clock);
  }

  // Sleeps for `d`, then returns 7, or `failure` if one is given. A
  // cancellation ends the sleep and is returned as the error.
  auto taking(duration d, error_code failure = {}) {
    return [this, d, failure]() -> asio::awaitable<boost::system::result<int>> {
      auto timer = clock.make_timer(co_await asio::this_coro::executor);
      timer.expires_after(d);
      auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
      if (failure) co_return failure;
      co_return 7;
    };
  }

  // Runs one call of `op` through `timeout` to completion on virtual time.
  template <class Stage, class Op>
  completion<boost::system::result<int>> call(const Stage& timeout, Op op,
                                              const resilience::context& ctx = {}) {
    completion<boost::system::result<int>> done;
    spawn(io, timeout.run(std::move(op), ctx), done);
    clock.run(io);
    io.restart();
    return done;
  }

  // Like taking(), but deaf to cancellation: it always sleeps the whole `d`.
  auto ignoring_cancellation(duration d, error_code failure = {}) {
    return [this, d, failure]() -> asio::awaitable<boost::system::result<int>> {
      auto timer = clock.make_timer(co_await asio::this_coro::executor);
      timer.expires_after(d);
      co_await timer.async_wait(
          asio::bind_cancellation_slot(asio::cancellation_slot(), asio::as_tuple(asio::use_awaitable)));
      if (failure) co_return failure;
      co_return 7;
    };
  }

  duration elapsed() const { return clock.now() - time_point{}; }
};

// A tracker whose limit is 100 ms until it has a sample, then follows them.
latency_tracker starting_at_100ms() {
  return latency_tracker(latency_tracker_options{}.initial(100ms).min_samples(1).bounds(10ms, 10s).percentile(100));
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(adaptive_timeout_stage, virtual_time)

BOOST_AUTO_TEST_CASE(a_call_within_the_limit_succeeds_and_is_recorded) {
  const latency_tracker tracker = starting_at_100ms();
  const auto timeout = stage(tracker);
  BOOST_TEST((timeout.limit() == 100ms));
  const auto done = call(timeout, taking(50ms));
  BOOST_REQUIRE(done.times == 1);
  BOOST_TEST(done.value->value() == 7);
  BOOST_TEST((elapsed() == 50ms));
  BOOST_TEST(tracker.stats().samples == 1u);
  BOOST_TEST((tracker.stats().percentile == 50ms));
  BOOST_TEST((timeout.limit() == 50ms), "the next call gets the new estimate");
}

BOOST_AUTO_TEST_CASE(a_call_past_the_limit_times_out_and_raises_the_estimate) {
  const latency_tracker tracker(
      latency_tracker_options{}.min_samples(1).bounds(10ms, 10s).percentile(100).deviations(1));
  tracker.record(40ms);
  tracker.record(60ms);
  BOOST_REQUIRE((tracker.current() == 70ms));  // 60 ms + 1 * 10 ms
  const auto timeout = stage(tracker);
  const auto done = call(timeout, taking(500ms));
  BOOST_REQUIRE(done.times == 1);
  BOOST_TEST((done.value->error() == resilience::error::timeout));
  BOOST_TEST((elapsed() == 70ms), "ended at the limit, not when the op would have");
  const auto stats = tracker.stats();
  BOOST_TEST(stats.samples == 3u);
  BOOST_TEST((stats.percentile == 70ms), "the timeout recorded the limit itself");
  BOOST_TEST((tracker.current() > 70ms));
}

BOOST_AUTO_TEST_CASE(a_run_of_timeouts_climbs_to_max) {
  const latency_tracker tracker(
      latency_tracker_options{}.window(4).min_samples(2).bounds(10ms, 2s).percentile(100).deviations(2));
  tracker.record(50ms);
  tracker.record(60ms);
  const auto timeout = stage(tracker);
  duration previous = tracker.current();
  int calls = 0;
  while (tracker.current() < 2s && calls < 100) {
    const auto done = call(timeout, taking(1h));
    BOOST_REQUIRE((done.value->error() == resilience::error::timeout));
    BOOST_TEST((tracker.current() >= previous), "call " << calls);
    previous = tracker.current();
    ++calls;
  }
  BOOST_TEST((tracker.current() == 2s));
  BOOST_TEST(calls < 100);
}

BOOST_AUTO_TEST_CASE(ordinary_failures_record_their_latency) {
  const latency_tracker tracker = starting_at_100ms();
  const auto timeout = stage(tracker);
  const auto done = call(timeout, taking(30ms, asio::error::connection_reset));
  BOOST_TEST((done.value->error() == asio::error::connection_reset));
  BOOST_TEST((tracker.stats().percentile == 30ms));
}

BOOST_AUTO_TEST_CASE(exceptions_pass_through_and_record_their_latency) {
  const latency_tracker tracker = starting_at_100ms();
  const auto timeout = stage(tracker);
  auto throwing = [this]() -> asio::awaitable<int> {
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(20ms);
    co_await timer.async_wait(asio::use_awaitable);
    throw std::runtime_error("broken");
  };
  completion<int> done;
  spawn(io, timeout.run(throwing), done);
  clock.run(io);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "broken"; });
  BOOST_TEST((tracker.stats().percentile == 20ms));
}

BOOST_AUTO_TEST_CASE(a_timeout_without_an_error_channel_is_thrown_and_records_the_limit) {
  const latency_tracker tracker = starting_at_100ms();
  const auto timeout = stage(tracker);
  auto slow = [this]() -> asio::awaitable<void> {
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(1h);
    co_await timer.async_wait(asio::use_awaitable);
  };
  completion<void> done;
  spawn(io, timeout(slow), done);
  clock.run(io);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), boost::system::system_error,
                        [](const auto& e) { return e.code() == resilience::error::timeout; });
  BOOST_TEST((elapsed() == 100ms));
  BOOST_TEST((tracker.stats().percentile == 100ms));
}

BOOST_AUTO_TEST_CASE(a_late_failure_records_the_limit_and_a_late_success_its_latency) {
  // Both ops ignore the cancellation and end at 150 ms, past the 100 ms limit.
  const latency_tracker tracker = starting_at_100ms();
  const auto timeout = stage(tracker);
  const auto failed = call(timeout, ignoring_cancellation(150ms, asio::error::connection_reset));
  BOOST_TEST((failed.value->error() == resilience::error::timeout));
  BOOST_TEST((elapsed() == 150ms), "the op is waited for, never detached");
  BOOST_TEST((tracker.stats().percentile == 100ms), "a timeout records the limit");

  const latency_tracker fresh = starting_at_100ms();
  const auto succeeded = call(stage(fresh), ignoring_cancellation(150ms));
  BOOST_TEST(succeeded.value->value() == 7, "the work was done: its success wins");
  BOOST_TEST((fresh.stats().percentile == 150ms), "a success records what it took");
}

BOOST_AUTO_TEST_CASE(an_early_timeout_reported_by_the_op_is_an_ordinary_failure) {
  // An inner stage's timeout, say: its latency is known, so it is recorded
  // as is rather than as this stage's limit.
  const latency_tracker tracker = starting_at_100ms();
  const auto timeout = stage(tracker);
  const auto done = call(timeout, taking(20ms, resilience::error::timeout));
  BOOST_TEST((done.value->error() == resilience::error::timeout));
  BOOST_TEST((tracker.stats().percentile == 20ms));
}

BOOST_AUTO_TEST_CASE(a_cancelled_call_records_nothing) {
  const latency_tracker tracker = starting_at_100ms();
  const auto timeout = stage(tracker);
  asio::cancellation_signal signal;
  completion<boost::system::result<int>> done;
  spawn(io, timeout.run(taking(80ms)), done, &signal);
  clock.run_for(io, 20ms);
  signal.emit(asio::cancellation_type::terminal);
  clock.run(io);
  BOOST_REQUIRE(done.times == 1);
  BOOST_TEST((done.value->error() == asio::error::operation_aborted));
  BOOST_TEST(tracker.stats().samples == 0u);
  BOOST_TEST((tracker.current() == 100ms));
}

BOOST_AUTO_TEST_CASE(a_call_cut_short_by_the_deadline_records_nothing) {
  const latency_tracker tracker = starting_at_100ms();
  const auto timeout = stage(tracker);
  resilience::context ctx;
  ctx.deadline = time_point(30ms);
  const auto done = call(timeout, taking(80ms), ctx);
  BOOST_TEST((done.value->error() == resilience::error::deadline_exceeded));
  BOOST_TEST((elapsed() == 30ms));
  BOOST_TEST(tracker.stats().samples == 0u);
}

BOOST_AUTO_TEST_CASE(each_call_reads_the_limit_when_it_starts) {
  const latency_tracker tracker = starting_at_100ms();
  const auto timeout = stage(tracker);
  BOOST_TEST(call(timeout, taking(50ms)).value->value() == 7);
  // The limit is now 50 ms: an op of 80 ms, fine a moment ago, times out.
  const auto done = call(timeout, taking(80ms));
  BOOST_TEST((done.value->error() == resilience::error::timeout));
  BOOST_TEST((elapsed() == 100ms));  // 50 ms, then 50 ms more
}

BOOST_AUTO_TEST_SUITE_END()

// -- latency_tracker_options: each setter, then the tracker ---------------

BOOST_AUTO_TEST_CASE(latency_tracker_options_over_extreme_values) {
  constexpr std::size_t max_window = latency_tracker_options::max_window;
  const latency_tracker_options o;
  struct row {
    std::string what;
    std::function<latency_tracker_options()> make;
    rejects at_option;   // the setter's verdict
    rejects at_tracker;  // the checks across fields, made by the tracker
  };
  const std::vector<row> rows = {
      {"window(0)", [&] { return o.window(0); }, "window", accepted},
      {"window(1)", [&] { return o.window(1).min_samples(1); }, accepted, accepted},
      {"window(1), min_samples 10", [&] { return o.window(1); }, accepted, "min_samples"},
      {"window(max_window)", [&] { return o.window(max_window); }, accepted, accepted},
      {"window(max_window + 1)", [&] { return o.window(max_window + 1); }, "window", accepted},
      {"window(2^60)", [&] { return o.window(std::size_t{1} << 60); }, "window", accepted},
      {"window(SIZE_MAX)", [&] { return o.window(SIZE_MAX); }, "window", accepted},

      {"percentile(0)", [&] { return o.percentile(0.0); }, "percentile", accepted},
      {"percentile(-0.0)", [&] { return o.percentile(-0.0); }, "percentile", accepted},
      {"percentile(denorm_min)", [&] { return o.percentile(denorm); }, accepted, accepted},
      {"percentile(100)", [&] { return o.percentile(100.0); }, accepted, accepted},
      {"percentile(100 + ulp)", [&] { return o.percentile(std::nextafter(100.0, 200.0)); }, "percentile", accepted},
      {"percentile(-1)", [&] { return o.percentile(-1.0); }, "percentile", accepted},
      {"percentile(double max)", [&] { return o.percentile(dbl_max); }, "percentile", accepted},
      {"percentile(inf)", [&] { return o.percentile(inf); }, "percentile", accepted},
      {"percentile(-inf)", [&] { return o.percentile(-inf); }, "percentile", accepted},
      {"percentile(NaN)", [&] { return o.percentile(not_a_number); }, "percentile", accepted},

      {"deviations(0)", [&] { return o.deviations(0.0); }, accepted, accepted},
      {"deviations(-0.0)", [&] { return o.deviations(-0.0); }, accepted, accepted},
      {"deviations(denorm_min)", [&] { return o.deviations(denorm); }, accepted, accepted},
      {"deviations(double max)", [&] { return o.deviations(dbl_max); }, accepted, accepted},
      {"deviations(-denorm_min)", [&] { return o.deviations(-denorm); }, "deviations", accepted},
      {"deviations(-1)", [&] { return o.deviations(-1.0); }, "deviations", accepted},
      {"deviations(inf)", [&] { return o.deviations(inf); }, "deviations", accepted},
      {"deviations(NaN)", [&] { return o.deviations(not_a_number); }, "deviations", accepted},

      {"bounds(1 tick, 1 tick)", [&] { return o.bounds(tick, tick); }, accepted, accepted},
      {"bounds(1 tick, max)", [&] { return o.bounds(tick, dmax); }, accepted, accepted},
      {"bounds(max, max)", [&] { return o.bounds(dmax, dmax); }, accepted, accepted},
      {"bounds(0, 1s)", [&] { return o.bounds(0s, 1s); }, "min", accepted},
      {"bounds(-1 tick, 1s)", [&] { return o.bounds(-tick, 1s); }, "min", accepted},
      {"bounds(min, max)", [&] { return o.bounds(dmin, dmax); }, "min", accepted},
      {"bounds(1s, 1s - 1 tick)", [&] { return o.bounds(1s, 1s - tick); }, "max", accepted},
      {"bounds(1s, 0)", [&] { return o.bounds(1s, 0s); }, "max", accepted},
      {"bounds(1s, min)", [&] { return o.bounds(1s, dmin); }, "max", accepted},

      {"initial(1 tick)", [&] { return o.initial(tick); }, accepted, accepted},
      {"initial(max)", [&] { return o.initial(dmax); }, accepted, accepted},
      {"initial(0)", [&] { return o.initial(0s); }, "initial", accepted},
      {"initial(-1 tick)", [&] { return o.initial(-tick); }, "initial", accepted},
      {"initial(min)", [&] { return o.initial(dmin); }, "initial", accepted},

      {"min_samples(0)", [&] { return o.min_samples(0); }, "min_samples", accepted},
      {"min_samples(1)", [&] { return o.min_samples(1); }, accepted, accepted},
      {"min_samples(window)", [&] { return o.min_samples(o.window()); }, accepted, accepted},
      {"min_samples(window + 1)", [&] { return o.min_samples(o.window() + 1); }, accepted, "min_samples"},
      {"min_samples(max_window)", [&] { return o.window(max_window).min_samples(max_window); }, accepted, accepted},
      {"min_samples(max_window + 1)", [&] { return o.min_samples(max_window + 1); }, "min_samples", accepted},
      {"min_samples(SIZE_MAX)", [&] { return o.min_samples(SIZE_MAX); }, "min_samples", accepted},

      {"everything at its largest",
       [&] {
         return o.window(max_window)
             .percentile(100)
             .deviations(dbl_max)
             .bounds(dmax, dmax)
             .initial(dmax)
             .min_samples(1);
       },
       accepted, accepted},
      {"everything at its smallest",
       [&] { return o.window(1).percentile(denorm).deviations(0).bounds(tick, tick).initial(tick).min_samples(1); },
       accepted, accepted},
  };
  // Latencies at and past the ends of a duration, small and huge in turn.
  const duration latencies[] = {0s, tick, -tick, dmin, dmax, 1ms, dmax, 0s, dmax - tick, 1h};
  for (const row& r : rows) {
    const auto options = enter(r.what, r.make, r.at_option);
    if (!options) continue;
    const auto tracker = enter(r.what + " (tracker)", [&] { return latency_tracker(*options); }, r.at_tracker);
    if (!tracker) continue;

    for (const duration latency : latencies) {
      tracker->record(latency);
      const auto stats = tracker->stats();
      BOOST_TEST_REQUIRE((stats.limit >= options->min() && stats.limit <= options->max()), r.what);
      BOOST_TEST_REQUIRE((stats.limit == tracker->current()), r.what);
      BOOST_TEST_REQUIRE((stats.percentile >= 0s && stats.stddev >= 0s), r.what);
      BOOST_TEST_REQUIRE(stats.samples <= options->window(), r.what);
    }

    // One call through the stage: it ends at the limit or when the op does.
    virtual_calls vt;
    const auto stage = resilience::adaptive_timeout(*tracker).clock(vt.clock);
    const duration limit = stage.limit();
    const auto done = vt.run(stage(vt.taking(1ms)));
    check_bounded_call(r.what, vt, done, 1ms, limit, resilience::error::timeout);
  }
}
