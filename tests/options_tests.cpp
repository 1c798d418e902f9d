// One table per options type over the extreme values of each field. A row
// either names the field its std::invalid_argument must name, or is accepted;
// an accepted row is then run on virtual time, where it must end once, on
// time, within its bounds and without overflow (UBSan aborts on any).
#include "support.hpp"

#include <resilience/adaptive_timeout.hpp>
#include <resilience/backoff.hpp>
#include <resilience/deadline.hpp>
#include <resilience/error.hpp>
#include <resilience/random.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::backoff;
using resilience::duration;
using resilience::jitter;
using resilience::latency_tracker;
using resilience::latency_tracker_options;
using resilience::retry_policy;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::spawn;

namespace {

constexpr duration tick{1};
constexpr duration dmax = duration::max();
constexpr duration dmin = duration::min();
constexpr double inf = std::numeric_limits<double>::infinity();
const double not_a_number = std::numeric_limits<double>::quiet_NaN();
constexpr double dbl_max = std::numeric_limits<double>::max();
constexpr double denorm = std::numeric_limits<double>::denorm_min();

// The field a row's std::invalid_argument must name; none: it is accepted.
using rejects = std::optional<std::string>;
const rejects accepted = std::nullopt;

// Calls make() and checks the verdict: the value if it was (rightly)
// accepted. Any other exception, or a verdict not met, fails the row.
template <class Make>
auto enter(const std::string& row, Make make, const rejects& expected) -> std::optional<decltype(make())> {
  try {
    auto value = make();
    if (expected) {
      BOOST_ERROR(row << ": accepted; expected std::invalid_argument naming " << *expected);
      return std::nullopt;
    }
    return value;
  } catch (const std::invalid_argument& e) {
    if (!expected) {
      BOOST_ERROR(row << ": rejected, expected accepted: " << e.what());
    } else {
      BOOST_TEST(std::string(e.what()).find(*expected) != std::string::npos,
                 row << ": the message names " << *expected << ": " << e.what());
    }
  } catch (const std::exception& e) {
    BOOST_ERROR(row << ": threw " << typeid(e).name() << " (" << e.what() << "), not std::invalid_argument");
  }
  return std::nullopt;
}

time_point add(time_point t, duration d) { return resilience::saturating_add(t, d); }

// Virtual time, and ops that take some of it.
struct virtual_time {
  asio::io_context io;
  manual_clock clock;
  std::vector<time_point> calls;

  // Takes `d`, then answers 7; a cancellation ends it with its error.
  auto taking(duration d) {
    return [this, d]() -> asio::awaitable<boost::system::result<int>> {
      calls.push_back(clock.now());
      auto timer = clock.make_timer(co_await asio::this_coro::executor);
      timer.expires_after(d);
      auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
      co_return 7;
    };
  }

  // Fails at once with connection_reset `failures` times, then answers 7.
  auto failing(std::size_t failures) {
    return [this, failures]() -> asio::awaitable<boost::system::result<int>> {
      calls.push_back(clock.now());
      if (calls.size() <= failures) co_return error_code(asio::error::connection_reset);
      co_return 7;
    };
  }

  // Runs one call to its end on virtual time.
  template <class Awaitable>
  completion<boost::system::result<int>> run(Awaitable a) {
    completion<boost::system::result<int>> done;
    spawn(io, std::move(a), done);
    clock.run(io);
    io.restart();
    return done;
  }

  duration elapsed() const { return clock.now() - time_point{}; }
};

// What a call through a bound should end with: 7 after `work` if the bound
// is later, else `reason` at the bound.
void check_bounded_call(const std::string& row, virtual_time& vt, const completion<boost::system::result<int>>& done,
                        duration work, std::optional<duration> bound, error_code reason) {
  BOOST_TEST_REQUIRE(done.times == 1, row << ": the call ends once");
  BOOST_TEST_REQUIRE(!done.exception, row);
  if (!bound || *bound > work) {
    BOOST_TEST(done.value->has_value(), row << ": " << done.value->error().message());
    BOOST_TEST((vt.elapsed() == work), row);
  } else if (*bound < work) {
    BOOST_TEST((done.value->error() == reason), row << ": " << done.value->error().message());
    BOOST_TEST((vt.elapsed() == *bound), row);
  }
}

}  // namespace

// -- backoff: each factory, then with_jitter of each kind -----------------

BOOST_AUTO_TEST_CASE(backoff_over_extreme_values) {
  struct row {
    const char* what;
    std::function<backoff()> make;
    rejects verdict;
  };
  const row rows[] = {
      {"constant(0)", [] { return backoff::constant(0s); }, accepted},
      {"constant(1 tick)", [] { return backoff::constant(tick); }, accepted},
      {"constant(max)", [] { return backoff::constant(dmax); }, accepted},
      {"constant(-1 tick)", [] { return backoff::constant(-tick); }, "delay"},
      {"constant(min)", [] { return backoff::constant(dmin); }, "delay"},

      {"linear(0, 0)", [] { return backoff::linear(0s, 0s); }, accepted},
      {"linear(0, 1 tick)", [] { return backoff::linear(0s, tick); }, accepted},
      {"linear(0, max)", [] { return backoff::linear(0s, dmax); }, accepted},
      {"linear(0, 1 tick, 0)", [] { return backoff::linear(0s, tick, 0s); }, accepted},
      {"linear(1 tick, 1 tick, 1 tick)", [] { return backoff::linear(tick, tick, tick); }, accepted},
      {"linear(1 tick, max, max)", [] { return backoff::linear(tick, dmax, dmax); }, accepted},
      {"linear(max, 0)", [] { return backoff::linear(dmax, 0s); }, accepted},
      {"linear(max, max)", [] { return backoff::linear(dmax, dmax); }, accepted},
      {"linear(-1 tick, 1s)", [] { return backoff::linear(-tick, 1s); }, "initial"},
      {"linear(min, 1s)", [] { return backoff::linear(dmin, 1s); }, "initial"},
      {"linear(0, -1 tick)", [] { return backoff::linear(0s, -tick); }, "step"},
      {"linear(0, min)", [] { return backoff::linear(0s, dmin); }, "step"},
      {"linear(1s, 1s, 1s - 1 tick)", [] { return backoff::linear(1s, 1s, 1s - tick); }, "cap"},
      {"linear(0, 1s, -1 tick)", [] { return backoff::linear(0s, 1s, -tick); }, "cap"},
      {"linear(0, 1s, min)", [] { return backoff::linear(0s, 1s, dmin); }, "cap"},

      {"exponential(0)", [] { return backoff::exponential(0s); }, "base"},
      {"exponential(-1 tick)", [] { return backoff::exponential(-tick); }, "base"},
      {"exponential(min)", [] { return backoff::exponential(dmin); }, "base"},
      {"exponential(1 tick, 2, no_cap)", [] { return backoff::exponential(tick, 2.0, backoff::no_cap); }, accepted},
      {"exponential(1 tick, 2, 1 tick)", [] { return backoff::exponential(tick, 2.0, tick); }, accepted},
      {"exponential(max, 2, max)", [] { return backoff::exponential(dmax, 2.0, dmax); }, accepted},
      {"exponential(1s, 1)", [] { return backoff::exponential(1s, 1.0); }, accepted},
      {"exponential(1s, 1 + epsilon)",
       [] { return backoff::exponential(1s, 1.0 + std::numeric_limits<double>::epsilon()); }, accepted},
      {"exponential(1s, 1e300, no_cap)", [] { return backoff::exponential(1s, 1e300, backoff::no_cap); }, accepted},
      {"exponential(1 tick, double max, no_cap)", [] { return backoff::exponential(tick, dbl_max, backoff::no_cap); },
       accepted},
      {"exponential(1s, 2, 1s)", [] { return backoff::exponential(1s, 2.0, 1s); }, accepted},
      {"exponential(1s, 0)", [] { return backoff::exponential(1s, 0.0); }, "factor"},
      {"exponential(1s, 0.5)", [] { return backoff::exponential(1s, 0.5); }, "factor"},
      {"exponential(1s, 1 - epsilon)",
       [] { return backoff::exponential(1s, 1.0 - std::numeric_limits<double>::epsilon()); }, "factor"},
      {"exponential(1s, -2)", [] { return backoff::exponential(1s, -2.0); }, "factor"},
      {"exponential(1s, NaN)", [] { return backoff::exponential(1s, not_a_number); }, "factor"},
      {"exponential(1s, inf)", [] { return backoff::exponential(1s, inf); }, "factor"},
      {"exponential(1s, -inf)", [] { return backoff::exponential(1s, -inf); }, "factor"},
      {"exponential(1s, 2, 0)", [] { return backoff::exponential(1s, 2.0, 0s); }, "cap"},
      {"exponential(1s, 2, -1 tick)", [] { return backoff::exponential(1s, 2.0, -tick); }, "cap"},
      {"exponential(1s, 2, min)", [] { return backoff::exponential(1s, 2.0, dmin); }, "cap"},

      {"with_jitter(5)", [] { return backoff::constant(1s).with_jitter(static_cast<jitter>(5)); }, "jitter"},
      {"with_jitter(255)", [] { return backoff::exponential(1s).with_jitter(static_cast<jitter>(255)); }, "jitter"},
  };
  const std::uint64_t retries[] = {0, 1, 2, 3, 64, 1000, UINT32_MAX, std::uint64_t{UINT32_MAX} + 1, UINT64_MAX};
  for (const row& r : rows) {
    const auto made = enter(r.what, r.make, r.verdict);
    if (!made) continue;
    const backoff schedule = *made;
    // The nominal schedule: never past the cap, never shrinking, and at the
    // cap at the end of time if it grows at all.
    duration previous = duration::zero();
    for (const std::uint64_t n : retries) {
      const duration d = schedule.nominal(n);
      BOOST_TEST((d >= previous && d <= schedule.cap()), r.what << ": nominal(" << n << ")");
      previous = d;
    }
    const bool grows = schedule.step() > duration::zero() || schedule.factor() > 1.0;
    if (grows) BOOST_TEST((schedule.nominal(UINT64_MAX) == schedule.cap()), r.what << ": saturates at the cap");

    for (const jitter j : {jitter::none, jitter::full, jitter::equal, jitter::decorrelated_clamped, jitter::decorrelated_v2}) {
      const std::string what = std::string(r.what) + ".with_jitter(" + resilience::to_string(j) + ")";
      const bool decorrelated = j == jitter::decorrelated_clamped || j == jitter::decorrelated_v2;
      const rejects verdict = decorrelated && schedule.first() == duration::zero()
                                  ? rejects(schedule.kind() == backoff::shape::constant ? "delay" : "initial")
                                  : accepted;
      const auto jittered = enter(what, [&] { return schedule.with_jitter(j); }, verdict);
      if (!jittered) continue;

      // 300 delays: each within what its kind allows.
      resilience::delay_sequence seq{*jittered};
      const auto random = resilience::random_source::seeded(1);
      for (std::uint64_t n = 1; n <= 300; ++n) {
        const resilience::delay d = seq.next(random);
        BOOST_TEST_REQUIRE((d.nominal == schedule.nominal(n)), what << ": retry " << n);
        bool ok = d.actual >= duration::zero() && d.actual <= schedule.cap();
        if (j == jitter::none) ok = ok && d.actual == d.nominal;
        if (j == jitter::full) ok = ok && d.actual <= d.nominal;
        if (j == jitter::equal) ok = ok && d.actual >= d.nominal / 2 - tick && d.actual <= d.nominal;
        if (j == jitter::decorrelated_clamped) ok = ok && d.actual >= schedule.first();
        BOOST_TEST_REQUIRE(ok, what << ": retry " << n << ": " << d.actual.count() << " ticks");
      }

      // Four attempts on virtual time: they end, and each wait is the delay
      // the policy reported, saturating at the end of time.
      virtual_time vt;
      std::vector<duration> waits;
      const auto policy = retry_policy{}
                              .max_attempts(4)
                              .backoff(*jittered)
                              .random(resilience::random_source::seeded(2))
                              .clock(vt.clock)
                              .on_retry([&](const auto& e) { waits.push_back(e.delay); });
      const auto done = vt.run(resilience::co_retry(vt.failing(100), policy));
      BOOST_TEST_REQUIRE(done.times == 1, what);
      BOOST_TEST_REQUIRE((vt.calls.size() >= 1u && vt.calls.size() <= 4u), what);
      BOOST_TEST_REQUIRE(waits.size() == vt.calls.size() - 1, what);
      // Fewer calls only when the next wait would have ended at the end of
      // time (no jitter lengthens a delay past its nominal one).
      if (vt.calls.size() < 4u)
        BOOST_TEST((add(vt.calls.back(), schedule.nominal(vt.calls.size())) == time_point::max()), what);
      for (std::size_t i = 0; i < waits.size(); ++i) {
        BOOST_TEST((vt.calls[i + 1] == add(vt.calls[i], waits[i])), what << ": wait " << i);
      }
    }
  }
}

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
    virtual_time vt;
    const auto stage = resilience::adaptive_timeout(*tracker).clock(vt.clock);
    const duration limit = stage.limit();
    const auto done = vt.run(stage(vt.taking(1ms)));
    check_bounded_call(r.what, vt, done, 1ms, limit, resilience::error::timeout);
  }
}

// -- retry_policy: each setter --------------------------------------------

BOOST_AUTO_TEST_CASE(retry_policy_setters_over_extreme_values) {
  const retry_policy p;
  struct row {
    const char* what;
    std::function<retry_policy()> make;
    rejects verdict;
    std::size_t calls;  // of an op that fails 5 times, then succeeds
  };
  const row rows[] = {
      {"max_attempts(0)", [&] { return p.max_attempts(0); }, "max_attempts", 0},
      {"max_attempts(1)", [&] { return p.max_attempts(1); }, accepted, 1},
      {"max_attempts(UINT32_MAX)", [&] { return p.max_attempts(UINT32_MAX); }, accepted, 6},

      {"time_limit(0)", [&] { return p.time_limit(0s); }, "time_limit", 0},
      {"time_limit(-1 tick)", [&] { return p.time_limit(-tick); }, "time_limit", 0},
      {"time_limit(min)", [&] { return p.time_limit(dmin); }, "time_limit", 0},
      // Shorter than any wait: gives up after the first attempt.
      {"time_limit(1 tick)", [&] { return p.time_limit(tick); }, accepted, 1},
      // max() means none.
      {"time_limit(max)", [&] { return p.max_attempts(10).time_limit(dmax); }, accepted, 6},

      {"backoff(constant(0))", [&] { return p.max_attempts(10).backoff(backoff::constant(0s)); }, accepted, 6},
      // A wait that would end at the end of time is "forever": the call
      // gives up instead of starting it.
      {"backoff(constant(max))", [&] { return p.max_attempts(10).backoff(backoff::constant(dmax)); }, accepted, 1},
      {"backoff(constant(max)), time_limit(1h)",
       [&] { return p.backoff(backoff::constant(dmax)).time_limit(1h); }, accepted, 1},
      {"backoff(linear(max, max))", [&] { return p.backoff(backoff::linear(dmax, dmax)); }, accepted, 1},
      // 1 tick, then a delay that saturates at max: forever.
      {"backoff(exponential(1 tick, double max, no_cap))",
       [&] { return p.max_attempts(UINT32_MAX).backoff(backoff::exponential(tick, dbl_max, backoff::no_cap)); },
       accepted, 2},

      {"jitter(none)", [&] { return p.jitter(jitter::none); }, accepted, 3},
      {"jitter(decorrelated_clamped)", [&] { return p.jitter(jitter::decorrelated_clamped); }, accepted, 3},
      {"jitter(decorrelated_v2)", [&] { return p.jitter(jitter::decorrelated_v2); }, accepted, 3},
      {"jitter(5)", [&] { return p.jitter(static_cast<jitter>(5)); }, "jitter", 0},
      {"linear(0, 10ms), jitter(decorrelated_clamped)",
       [&] { return p.backoff(backoff::linear(0s, 10ms)).jitter(jitter::decorrelated_clamped); }, "initial", 0},
      {"constant(0), jitter(decorrelated_v2)",
       [&] { return p.backoff(backoff::constant(0s)).jitter(jitter::decorrelated_v2); }, "delay", 0},
      // backoff() replaces the jitter too: the zero schedule has none.
      {"jitter(decorrelated_clamped), linear(0, 10ms)",
       [&] { return p.jitter(jitter::decorrelated_clamped).backoff(backoff::linear(0s, 10ms)); }, accepted, 3},
  };
  for (const row& r : rows) {
    const auto policy = enter(r.what, r.make, r.verdict);
    if (!policy) continue;
    virtual_time vt;
    std::vector<duration> waits;
    std::vector<std::string> lines;  // the logger formats the extreme delays too
    const auto on_clock = policy->random(resilience::random_source::seeded(3))
                              .logger([&](std::string_view line) { lines.emplace_back(line); })
                              .clock(vt.clock)
                              .on_retry([&](const auto& e) { waits.push_back(e.delay); });
    const auto done = vt.run(resilience::co_retry(vt.failing(5), on_clock));
    BOOST_TEST_REQUIRE(done.times == 1, r.what);
    BOOST_TEST_REQUIRE(!done.exception, r.what);
    BOOST_TEST(vt.calls.size() == r.calls, r.what);
    BOOST_TEST(done.value->has_value() == (r.calls == 6), r.what);
    BOOST_TEST(waits.size() == vt.calls.size() - 1, r.what);
    BOOST_TEST(lines.size() == waits.size(), r.what);
    for (std::size_t i = 0; i + 1 < vt.calls.size(); ++i) {
      BOOST_TEST((vt.calls[i + 1] == add(vt.calls[i], waits[i])), r.what << ": wait " << i);
    }
  }
}

// -- timeout(d) -------------------------------------------------------------

BOOST_AUTO_TEST_CASE(timeout_over_extreme_values) {
  struct row {
    const char* what;
    duration d;
    rejects verdict;
  };
  const row rows[] = {
      {"timeout(0)", 0s, "duration"},
      {"timeout(-1 tick)", -tick, "duration"},
      {"timeout(min)", dmin, "duration"},
      {"timeout(1 tick)", tick, accepted},
      {"timeout(1h)", 1h, accepted},
      {"timeout(max)", dmax, accepted},
  };
  for (const row& r : rows) {
    const auto stage = enter(r.what, [&] { return resilience::timeout(r.d); }, r.verdict);
    if (!stage) continue;
    BOOST_TEST((stage->limit() == r.d), r.what);
    virtual_time vt;
    const auto on_clock = stage->clock(vt.clock);
    check_bounded_call(r.what, vt, vt.run(on_clock(vt.taking(1ms))), 1ms, r.d, resilience::error::timeout);
  }
}

// -- deadline_stage(d), deadline::after(d) -----------------------------------

BOOST_AUTO_TEST_CASE(deadline_over_extreme_values) {
  const error_code exceeded = resilience::error::deadline_exceeded;
  struct row {
    const char* what;
    duration d;
    rejects stage_verdict;  // deadline_stage(d): a budget per call
    rejects after_verdict;  // deadline::after(d): a point in time
  };
  const row rows[] = {
      {"0", 0s, "budget", accepted},
      {"-1 tick", -tick, "budget", "duration"},
      {"min", dmin, "budget", "duration"},
      {"1 tick", tick, accepted, accepted},
      {"1h", 1h, accepted, accepted},
      {"max", dmax, accepted, accepted},
  };
  for (const row& r : rows) {
    const std::string relative = std::string("deadline_stage(") + r.what + ")";
    if (const auto stage = enter(relative, [&] { return resilience::deadline_stage(r.d); }, r.stage_verdict)) {
      BOOST_TEST((stage->budget() == r.d), relative);
      virtual_time vt;
      const auto on_clock = stage->clock(vt.clock);
      check_bounded_call(relative, vt, vt.run(on_clock(vt.taking(1ms))), 1ms, r.d, exceeded);
    }

    const std::string absolute = std::string("deadline::after(") + r.what + ")";
    virtual_time vt;
    vt.clock.advance(1s);  // a start away from zero
    const auto at = enter(absolute, [&] { return resilience::deadline::after(r.d, vt.clock); }, r.after_verdict);
    if (!at) continue;
    BOOST_TEST((at->at() == add(vt.clock.now(), r.d)), absolute << ": saturates at the end of time");
    BOOST_TEST(at->is_set() == (r.d != dmax), absolute << ": max() means none");
    const resilience::basic_deadline_stage<manual_clock> stage(*at, vt.clock);
    const time_point start = vt.clock.now();
    const auto done = vt.run(stage(vt.taking(1ms)));
    BOOST_TEST_REQUIRE(done.times == 1, absolute);
    if (r.d < 1ms) {
      BOOST_TEST((done.value->error() == exceeded), absolute << ": " << done.value->error().message());
      BOOST_TEST((vt.clock.now() - start == r.d), absolute);
      BOOST_TEST(vt.calls.size() == (r.d == 0s ? 0u : 1u), absolute << ": a deadline already passed calls nothing");
    } else {
      BOOST_TEST(done.value->has_value(), absolute);
      BOOST_TEST((vt.clock.now() - start == 1ms), absolute);
    }
  }
}

BOOST_AUTO_TEST_CASE(saturating_add_covers_the_whole_range) {
  using resilience::saturating_add;
  const time_point max = time_point::max(), min = time_point::min(), zero{};
  BOOST_TEST((saturating_add(zero, duration::max()) == max));
  BOOST_TEST((saturating_add(max, duration(1)) == max));
  BOOST_TEST((saturating_add(min, duration::max()) == zero + (duration::max() + min.time_since_epoch())));
  BOOST_TEST((saturating_add(time_point(-1h), duration::max()) == time_point(duration::max() - 1h)));  // no overflow
  BOOST_TEST((saturating_add(min, duration(-1)) == min));
  BOOST_TEST((saturating_add(zero, duration::min()) == time_point(duration::min())));
  BOOST_TEST((saturating_add(time_point(1h), -30min) == time_point(30min)));
}
