// The deadline: values read on a clock, the stage that bounds a call by one
// (from a budget or from an inbound request), nested deadlines, and its
// inputs over their extreme values.
#include "support.hpp"

#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using boost::system::error_code;
using resilience::duration;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::deadline_error;
using resilience::test::spawn;
using namespace resilience::test::extremes;

namespace {
using virtual_time = resilience::test::timed_stages;
}  // namespace

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
      virtual_calls vt;
      const auto on_clock = stage->clock(vt.clock);
      check_bounded_call(relative, vt, vt.run(on_clock(vt.taking(1ms))), 1ms, r.d, exceeded);
    }

    const std::string absolute = std::string("deadline::after(") + r.what + ")";
    virtual_calls vt;
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
