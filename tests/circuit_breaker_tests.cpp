#include "support.hpp"

#include <resilience/circuit_breaker.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::breaker_options;
using resilience::circuit_state;
using resilience::duration;
using resilience::time_point;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::fail;
using resilience::test::name;
using resilience::test::spawn;
using resilience::test::succeed;

namespace {

using breaker = resilience::basic_circuit_breaker<manual_clock>;
using result = boost::system::result<int>;

// Virtual time, and every event a breaker reports, as text.
struct breaker_fixture {
  asio::io_context io;
  manual_clock clock;
  std::vector<std::string> events;
  std::vector<std::uint32_t> sequences;

  breaker_options options() {
    return breaker_options{}
        .consecutive_failures(3)
        .no_failure_ratio()
        .open_duration(1s)
        .successes_to_close(2)
        .half_open_limit(10s)
        .on_state_change([this](const resilience::state_change& e) {
          events.push_back(name(e.from) + ">" + name(e.to));
          sequences.push_back(e.sequence);
        })
        .on_rejection([this](const resilience::rejection& r) { events.push_back("rejected:" + name(r.state)); });
  }

  std::string transitions() const {
    std::string s;
    for (const auto& e : events)
      if (e.find('>') != std::string::npos) s += (s.empty() ? "" : " ") + e;
    return s;
  }
};

struct http_response {
  int status;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(breaker_transitions, breaker_fixture)

// Every transition, driven through the raw permit API. Script:
//   s success, f failure, n admitted then released (neither), x rejected,
//   w 1 s passes (the break), W 10 s pass (the half-open limit), p poll(),
//   I isolate(), R reset(), D disable(), M metrics_only().
// Options: 3 consecutive failures trip it; 2 probe successes close it.
BOOST_AUTO_TEST_CASE(transition_table) {
  struct row {
    const char* script;
    circuit_state state;
    const char* transitions;
  };
  const row rows[] = {
      {"sss", circuit_state::closed, ""},
      {"ffsff", circuit_state::closed, ""},
      {"fff", circuit_state::open, "closed>open"},
      {"fffxx", circuit_state::open, "closed>open"},
      {"fffws", circuit_state::half_open, "closed>open open>half_open"},
      {"fffwp", circuit_state::half_open, "closed>open open>half_open"},
      {"fffwss", circuit_state::closed, "closed>open open>half_open half_open>closed"},
      {"fffwnss", circuit_state::closed, "closed>open open>half_open half_open>closed"},
      {"fffwf", circuit_state::open, "closed>open open>half_open half_open>open"},
      {"fffwsfx", circuit_state::open, "closed>open open>half_open half_open>open"},
      {"fffwsWx", circuit_state::open, "closed>open open>half_open half_open>open"},
      {"fffwsWp", circuit_state::open, "closed>open open>half_open half_open>open"},
      {"fffwfws", circuit_state::half_open, "closed>open open>half_open half_open>open open>half_open"},
      {"fffwssfff", circuit_state::open, "closed>open open>half_open half_open>closed closed>open"},
      {"Ix", circuit_state::isolated, "closed>isolated"},
      {"fffIwx", circuit_state::isolated, "closed>open open>isolated"},
      {"fffwIx", circuit_state::isolated, "closed>open open>isolated"},
      {"fffwsIx", circuit_state::isolated, "closed>open open>half_open half_open>isolated"},
      {"IRs", circuit_state::closed, "closed>isolated isolated>closed"},
      {"fffRs", circuit_state::closed, "closed>open open>closed"},
      {"fffwsRs", circuit_state::closed, "closed>open open>half_open half_open>closed"},
      {"ffRff", circuit_state::closed, ""},
      {"Dffffff", circuit_state::disabled, "closed>disabled"},
      {"fffDs", circuit_state::disabled, "closed>open open>disabled"},
      {"DRfff", circuit_state::open, "closed>disabled disabled>closed closed>open"},
      {"Mffffff", circuit_state::metrics_only, "closed>metrics_only"},
      {"MRfff", circuit_state::open, "closed>metrics_only metrics_only>closed closed>open"},
      {"fffMs", circuit_state::metrics_only, "closed>open open>metrics_only"},
  };
  for (const row& r : rows) {
    BOOST_TEST_CONTEXT("script " << r.script) {
      events.clear();
      manual_clock fresh;
      clock = fresh;
      breaker b(options(), clock);
      for (const char* c = r.script; *c; ++c) {
        switch (*c) {
          case 's': succeed(b); break;
          case 'f': fail(b); break;
          case 'n': BOOST_REQUIRE(b.try_acquire()); break;
          case 'x': BOOST_TEST(!b.try_acquire()); break;
          case 'w': clock.advance(1s); break;
          case 'W': clock.advance(10s); break;
          case 'p': b.poll(); break;
          case 'I': b.isolate(); break;
          case 'R': b.reset(); break;
          case 'D': b.disable(); break;
          case 'M': b.metrics_only(); break;
        }
      }
      BOOST_TEST(name(b.state()) == name(r.state));
      BOOST_TEST(transitions() == r.transitions);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_success_ends_the_failure_run) {
  breaker b(options(), clock);
  fail(b, 2);
  BOOST_TEST(b.metrics().consecutive_failures == 2u);
  succeed(b);
  BOOST_TEST(b.metrics().consecutive_failures == 0u);
  fail(b, 2);
  BOOST_TEST(name(b.state()) == "closed");
  fail(b);
  BOOST_TEST(name(b.state()) == "open");
}

BOOST_AUTO_TEST_CASE(failure_ratio_waits_for_the_minimum_calls) {
  breaker b(breaker_options{}.count_window(10).failure_ratio(0.5).minimum_calls(6), clock);
  fail(b, 5);
  BOOST_TEST(name(b.state()) == "closed", "5 calls are fewer than the minimum of 6");
  succeed(b);
  BOOST_TEST(name(b.state()) == "closed", "a success never opens it");
  const auto m = b.metrics();
  BOOST_TEST(m.calls == 6u);
  BOOST_TEST(m.failures == 5u);
  BOOST_TEST(m.failure_ratio == 5.0 / 6.0);
  fail(b);
  BOOST_TEST(name(b.state()) == "open");
}

BOOST_AUTO_TEST_CASE(the_count_window_slides) {
  breaker b(breaker_options{}.count_window(4).failure_ratio(0.75).minimum_calls(4), clock);
  fail(b, 2);
  for (int i = 0; i < 4; ++i) succeed(b);
  BOOST_TEST(b.metrics().failures == 0u, "the two failures slid out");
  fail(b, 2);
  BOOST_TEST(name(b.state()) == "closed", "2 of the last 4");
  BOOST_TEST(b.metrics().calls == 4u);
  fail(b);
  BOOST_TEST(name(b.state()) == "open", "3 of the last 4");
}

// Successes wait in their thread's shard before they take a place in the
// ring: a failure recorded after them, on any thread, must still come after
// them, and the counts must include them.
BOOST_AUTO_TEST_CASE(successes_on_another_thread_come_before_a_later_failure) {
  breaker b(breaker_options{}.count_window(4).failure_ratio(0.75).minimum_calls(4), clock);
  const auto succeed_elsewhere = [&](int n) {
    bool admitted = true;
    std::thread([&] {
      for (int i = 0; i < n; ++i) {
        auto p = b.try_acquire();
        admitted = admitted && static_cast<bool>(p);
        p.record_success();
      }
    }).join();
    BOOST_REQUIRE(admitted);
  };
  fail(b, 3);
  succeed_elsewhere(2);
  BOOST_TEST(b.metrics().calls == 4u, "f f f s s: the last 4");
  BOOST_TEST(b.metrics().failures == 2u);
  fail(b);
  BOOST_TEST(name(b.state()) == "closed", "s s before f: f s s f, 2 of the last 4");
  succeed_elsewhere(1);
  fail(b);
  BOOST_TEST(name(b.state()) == "closed", "s f s f");
  BOOST_TEST(b.metrics().failures == 2u);
  fail(b);
  BOOST_TEST(name(b.state()) == "open", "f s f f");
}

BOOST_AUTO_TEST_CASE(pending_successes_push_the_oldest_calls_out) {
  breaker b(breaker_options{}.count_window(4).no_failure_ratio(), clock);
  fail(b, 4);
  BOOST_TEST(b.metrics().failures == 4u);
  std::thread([&] {
    for (int i = 0; i < 3; ++i) b.try_acquire().record_success();
  }).join();
  auto m = b.metrics();
  BOOST_TEST(m.calls == 4u);
  BOOST_TEST(m.failures == 1u);
  succeed(b);
  m = b.metrics();
  BOOST_TEST(m.calls == 4u);
  BOOST_TEST(m.failures == 0u);
  // A long run of successes, past the window and past a batch.
  for (int i = 0; i < 1000; ++i) succeed(b);
  fail(b);
  m = b.metrics();
  BOOST_TEST(m.calls == 4u);
  BOOST_TEST(m.failures == 1u);
}

BOOST_AUTO_TEST_CASE(a_large_count_window_slides) {
  // Past the ring kept inside the breaker: the ring's words on the heap, and
  // runs of successes that span several words and wrap around.
  breaker b(breaker_options{}.count_window(1000).failure_ratio(0.5).minimum_calls(1000), clock);
  for (int round = 0; round < 3; ++round) {
    fail(b, 499);
    for (int i = 0; i < 501; ++i) succeed(b);
    BOOST_TEST(b.metrics().failures == 499u);
    BOOST_TEST(b.metrics().calls == 1000u);
  }
  fail(b, 499);
  BOOST_TEST(name(b.state()) == "closed", "each pushed out an older failure");
  BOOST_TEST(b.metrics().failures == 499u);
  fail(b);
  BOOST_TEST(name(b.state()) == "open", "500 of 1000");
}

BOOST_AUTO_TEST_CASE(time_window_buckets_expire) {
  breaker b(breaker_options{}.time_window(10s, 10).failure_ratio(0.5).minimum_calls(4), clock);
  fail(b, 3);
  clock.advance(9500ms);
  BOOST_TEST(b.metrics().calls == 3u, "still inside the 10 s window");
  clock.advance(500ms);
  BOOST_TEST(b.metrics().calls == 0u, "the first bucket expired whole");
  fail(b);
  BOOST_TEST(name(b.state()) == "closed", "one call in the window");

  clock.advance(1s);
  fail(b, 2);
  clock.advance(3s);
  BOOST_TEST(b.metrics().calls == 3u);
  fail(b);
  BOOST_TEST(name(b.state()) == "open", "4 failures within 10 s");
}

BOOST_AUTO_TEST_CASE(the_time_window_reuses_buckets_after_a_long_quiet_time) {
  breaker b(breaker_options{}.time_window(2s, 2).failure_ratio(1.0).minimum_calls(3), clock);
  fail(b, 2);
  clock.advance(1h);
  succeed(b);
  fail(b);
  const auto m = b.metrics();
  BOOST_TEST(m.calls == 2u);
  BOOST_TEST(m.failures == 1u);
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_AUTO_TEST_CASE(slow_calls_trip_it) {
  breaker b(breaker_options{}.no_failure_ratio().slow_calls(100ms, 0.5).count_window(4).minimum_calls(4), clock);
  const auto call = [&](duration took) {
    auto p = b.try_acquire();
    BOOST_REQUIRE(p);
    clock.advance(took);
    p.record_success();
  };
  call(10ms);
  call(200ms);
  call(10ms);
  BOOST_TEST(name(b.state()) == "closed");
  call(100ms);  // at the threshold: slow
  const auto m = b.metrics();
  BOOST_TEST(m.slow_calls == 2u);
  BOOST_TEST(m.slow_call_ratio == 0.5);
  BOOST_TEST(name(b.state()) == "open");
}

BOOST_AUTO_TEST_CASE(a_slow_probe_counts_as_a_failure) {
  breaker b(breaker_options{}.consecutive_failures(1).slow_calls(100ms, 1.0).count_window(10).minimum_calls(10)
                .open_duration(1s),
            clock);
  fail(b);
  clock.advance(1s);
  auto p = b.try_acquire();
  BOOST_REQUIRE(p.is_probe());
  clock.advance(150ms);
  p.record_success();
  BOOST_TEST(name(b.state()) == "open");
}

// Resilience4j's rules, for settings ported from it.
BOOST_AUTO_TEST_CASE(with_resilience4j_rules_a_call_at_the_threshold_is_not_slow) {
  for (const bool strict : {false, true}) {
    breaker b(breaker_options{}.no_failure_ratio().slow_calls(100ms, 1.0).count_window(1).slow_only_above_threshold(strict),
              clock);
    auto p = b.try_acquire();
    clock.advance(100ms);
    p.record_success();
    BOOST_TEST_CONTEXT("strict: " << strict) { BOOST_TEST(name(b.state()) == (strict ? "closed" : "open")); }
    if (strict) {
      auto q = b.try_acquire();
      clock.advance(101ms);
      q.record_success();
      BOOST_TEST(name(b.state()) == "open", "longer than the threshold is slow");
    }
  }
}

// 3 failures, then the 4th call reaches minimum_calls with a success: 75% is
// past the threshold. Ours waits for the next failure; Resilience4j's opens.
BOOST_AUTO_TEST_CASE(judging_every_call_lets_a_success_open_a_window_past_its_threshold) {
  for (const bool every : {false, true}) {
    breaker b(breaker_options{}.failure_ratio(0.5).count_window(10).minimum_calls(4).judge_every_call(every), clock);
    fail(b, 3);
    BOOST_TEST(name(b.state()) == "closed", "below minimum_calls");
    succeed(b);
    BOOST_TEST_CONTEXT("every call: " << every) { BOOST_TEST(name(b.state()) == (every ? "open" : "closed")); }
  }
}

// Ten probes in all, judged together: 3 failures of 10 is below 50%, closed;
// ours would have reopened at the first failure.
BOOST_AUTO_TEST_CASE(half_open_probes_judged_by_their_failure_ratio) {
  for (const int failures : {3, 5}) {
    breaker b(breaker_options{}.consecutive_failures(1).failure_ratio(0.5).open_duration(1s).resilience4j_rules(10),
              clock);
    fail(b);
    clock.advance(b.time_until_probe());  // the break strictly elapsed
    std::vector<resilience::breaker_permit> probes;
    for (int i = 0; i < 10; ++i) {
      probes.push_back(b.try_acquire());
      BOOST_REQUIRE(probes.back().is_probe());
    }
    BOOST_TEST(!b.try_acquire(), "ten in all until the verdict");
    for (int i = 0; i < 10; ++i) {
      BOOST_TEST(name(b.state()) == "half_open", "no verdict before the tenth");
      if (i < failures) {
        probes[i].record_failure();
      } else {
        probes[i].record_success();
      }
    }
    BOOST_TEST_CONTEXT("failures: " << failures) {
      BOOST_TEST(name(b.state()) == (failures * 2 >= 10 ? "open" : "closed"));
    }
  }
  BOOST_CHECK_THROW(breaker(breaker_options{}.no_failure_ratio().consecutive_failures(1).half_open_judged_by_ratio(5)),
                    std::invalid_argument);
  BOOST_CHECK_THROW(breaker_options{}.half_open_judged_by_ratio(70000), std::invalid_argument);
}

// A probe given back unrecorded (neither) frees its place for another.
BOOST_AUTO_TEST_CASE(a_judged_probe_given_back_makes_room_for_another) {
  breaker b(breaker_options{}.consecutive_failures(1).open_duration(1s).half_open_judged_by_ratio(2), clock);
  fail(b);
  clock.advance(1s);
  {
    auto first = b.try_acquire();
    BOOST_REQUIRE(first.is_probe());
    auto second = b.try_acquire();
    BOOST_REQUIRE(second.is_probe());
    BOOST_TEST(!b.try_acquire());
  }  // both released unrecorded
  auto a = b.try_acquire();
  auto c = b.try_acquire();
  BOOST_REQUIRE(a.is_probe());
  BOOST_REQUIRE(c.is_probe());
  a.record_success();
  c.record_failure();  // 1 of 2 failed: at the 50% default, it reopens
  BOOST_TEST(name(b.state()) == "open");
}

BOOST_AUTO_TEST_CASE(open_duration_generator_grows_with_consecutive_openings) {
  std::vector<std::uint32_t> asked;
  breaker b(options().open_duration([&](std::uint32_t n) {
    asked.push_back(n);
    return std::chrono::seconds(n);
  }),
            clock);
  fail(b, 3);
  BOOST_TEST((b.time_until_probe() == 1s));
  clock.advance(400ms);
  BOOST_TEST((b.time_until_probe() == 600ms));
  clock.advance(600ms);
  fail(b);  // the probe fails: the second opening in a row
  BOOST_TEST((b.time_until_probe() == 2s));
  clock.advance(2s);
  fail(b);
  BOOST_TEST((b.time_until_probe() == 3s));
  clock.advance(3s);
  succeed(b);
  succeed(b);
  BOOST_TEST(name(b.state()) == "closed");
  fail(b, 3);
  BOOST_TEST((b.time_until_probe() == 1s), "closing starts the count again");
  BOOST_TEST(asked.back() == 1u);
}

BOOST_AUTO_TEST_CASE(exactly_n_probes_at_a_time) {
  breaker b(options().half_open_permits(3).successes_to_close(3), clock);
  fail(b, 3);
  clock.advance(1s);
  std::vector<resilience::breaker_permit> probes;
  for (int i = 0; i < 3; ++i) {
    probes.push_back(b.try_acquire());
    BOOST_REQUIRE(probes.back().is_probe());
  }
  BOOST_TEST(b.metrics().probes_in_flight == 3u);
  auto fourth = b.try_acquire();
  BOOST_TEST(!fourth);
  BOOST_TEST((fourth.retry_after() == duration::zero()));
  BOOST_TEST(events.back() == "rejected:half_open");

  probes[0].release();  // neither: the slot comes back, nothing counted
  BOOST_TEST(b.metrics().probes_in_flight == 2u);
  probes[0] = b.try_acquire();
  BOOST_REQUIRE(probes[0].is_probe());
  BOOST_TEST(!b.try_acquire());

  probes[0].record_success();
  probes[1].record_success();
  BOOST_TEST(name(b.state()) == "half_open");
  { auto dropped = std::move(probes[2]); }  // destroyed unrecorded: neither
  BOOST_TEST(b.metrics().probes_in_flight == 0u);
  succeed(b);
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_AUTO_TEST_CASE(a_call_admitted_before_a_transition_is_not_counted_after_it) {
  breaker b(options(), clock);
  auto straggler = b.try_acquire();
  fail(b, 3);
  clock.advance(1s);
  auto probe = b.try_acquire();
  BOOST_REQUIRE(probe.is_probe());
  straggler.record_failure();  // admitted while closed: not a probe's failure
  BOOST_TEST(name(b.state()) == "half_open");
  probe.record_success();
  succeed(b);
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_AUTO_TEST_CASE(a_hung_probe_cannot_keep_it_half_open) {
  breaker b(options(), clock);
  fail(b, 3);
  clock.advance(1s);
  auto hung = b.try_acquire();
  BOOST_REQUIRE(hung.is_probe());
  BOOST_TEST(!b.try_acquire());
  clock.advance(10s);
  BOOST_TEST(!b.try_acquire());
  BOOST_TEST(name(b.state()) == "open");
  clock.advance(1s);
  auto next = b.try_acquire();
  BOOST_TEST(next.is_probe());
  hung.record_success();  // from the earlier period: dropped
  BOOST_TEST(b.metrics().probes_in_flight == 1u);
}

BOOST_AUTO_TEST_CASE(callbacks_in_order) {
  breaker b(options(), clock);
  fail(b, 3);
  BOOST_TEST(!b.try_acquire());
  clock.advance(1s);
  succeed(b);
  succeed(b);
  const std::vector<std::string> expected{"closed>open", "rejected:open", "open>half_open", "half_open>closed"};
  BOOST_TEST(events == expected, boost::test_tools::per_element());
  const std::vector<std::uint32_t> seq{1, 2, 3};
  BOOST_TEST(sequences == seq, boost::test_tools::per_element());
  BOOST_TEST(b.metrics().transitions == 3u);
  BOOST_TEST(b.metrics().rejections == 1u);
}

BOOST_AUTO_TEST_CASE(manual_modes) {
  breaker b(options(), clock);
  b.isolate();
  auto r = b.try_acquire();
  BOOST_TEST(!r);
  BOOST_TEST((r.retry_after() == duration::max()));
  BOOST_TEST((b.time_until_probe() == duration::max()));
  clock.advance(1h);
  b.poll();
  BOOST_TEST(name(b.state()) == "isolated", "held open whatever the time");

  b.disable();
  fail(b, 10);
  BOOST_TEST(b.metrics().calls == 0u, "disabled records nothing");
  BOOST_TEST(b.metrics().consecutive_failures == 0u);

  b.metrics_only();
  fail(b, 10);
  BOOST_TEST(name(b.state()) == "metrics_only");
  BOOST_TEST(b.metrics().calls == 10u);
  BOOST_TEST(b.metrics().failure_ratio == 1.0);
  BOOST_TEST(b.metrics().consecutive_failures == 10u);

  b.reset();
  BOOST_TEST(name(b.state()) == "closed");
  BOOST_TEST(b.metrics().calls == 0u, "reset clears the window");
  BOOST_TEST(b.metrics().consecutive_failures == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(breaker_stage, breaker_fixture)

BOOST_AUTO_TEST_CASE(co_await_breaker_passes_results_through) {
  breaker b(options(), clock);
  int calls = 0;
  completion<int> value;
  spawn(io, b([&]() -> asio::awaitable<int> { co_return ++calls; }), value);
  completion<void> nothing;
  spawn(io, b([&](const resilience::context& ctx) -> asio::awaitable<void> {
          BOOST_TEST(ctx.attempt == 1u);
          ++calls;
          co_return;
        }),
        nothing);
  clock.run(io);
  BOOST_TEST(*value.value == 1);
  BOOST_TEST(nothing.done());
  BOOST_TEST(!static_cast<bool>(nothing.exception));
  BOOST_TEST(b.metrics().calls == 2u);
}

BOOST_AUTO_TEST_CASE(rejections_fail_fast_in_the_error_channel_or_as_circuit_open_error) {
  breaker b(options(), clock);
  fail(b, 3);
  clock.advance(250ms);
  int calls = 0;
  completion<result> in_channel;
  spawn(io, b([&]() -> asio::awaitable<result> { co_return ++calls; }), in_channel);
  completion<int> thrown;
  spawn(io, b([&]() -> asio::awaitable<int> { co_return ++calls; }), thrown);
  clock.run(io);
  BOOST_TEST(calls == 0);
  BOOST_TEST((in_channel.value->error() == resilience::error::circuit_open));
  try {
    resilience::test::rethrow(thrown);
  } catch (const resilience::circuit_open_error& e) {
    BOOST_TEST((e.code() == resilience::error::circuit_open));
    BOOST_TEST((e.retry_after() == 750ms));
    BOOST_TEST((b.time_until_probe() == 750ms));
  }
  BOOST_TEST(b.metrics().rejections == 2u);
}

BOOST_AUTO_TEST_CASE(the_classifier_decides_what_counts) {
  breaker b(options(), clock);
  const auto server_errors = [](const resilience::outcome<http_response>& o) {
    return o.failed() || o.value().status >= 500;
  };
  auto stage = b.stage(server_errors);
  int status = 404;
  const auto op = [&]() -> asio::awaitable<http_response> { co_return http_response{status}; };
  for (int i = 0; i < 5; ++i) {
    completion<http_response> done;
    spawn(io, stage(op), done);
    clock.run(io);
    BOOST_TEST(done.value->status == 404);
  }
  BOOST_TEST(name(b.state()) == "closed", "a 404 does not trip it");
  status = 503;
  for (int i = 0; i < 3; ++i) {
    completion<http_response> done;
    spawn(io, stage.run(op, resilience::context{}), done);
    clock.run(io);
  }
  BOOST_TEST(name(b.state()) == "open");
}

BOOST_AUTO_TEST_CASE(a_stage_of_a_pipeline) {
  breaker b(options(), clock);
  const auto retry = resilience::retry_policy{}
                         .max_attempts(4)
                         .backoff(resilience::backoff::constant(100ms))
                         .jitter(resilience::jitter::none)
                         .clock(clock);
  const auto call = resilience::pipeline(retry, b);  // the breaker is held by reference
  int calls = 0;
  completion<result> done;
  spawn(io, call([&](const resilience::context& ctx) -> asio::awaitable<result> {
          BOOST_TEST(ctx.attempt == static_cast<std::uint32_t>(calls + 1));
          ++calls;
          co_return error_code(asio::error::connection_reset);
        }),
        done);
  clock.run(io);
  BOOST_TEST(calls == 3, "the breaker opened after 3 failures; the 4th attempt never reached the op");
  BOOST_TEST((done.value->error() == resilience::error::circuit_open));
  BOOST_TEST(name(b.state()) == "open");
}

BOOST_AUTO_TEST_CASE(a_pipeline_takes_the_breakers_clock) {
  // The retry and the timeout are built on the steady clock; .clock(c) puts
  // them on the breaker's before any call runs.
  breaker b(options(), clock);
  const auto call = resilience::pipeline(resilience::retry_policy{}
                                             .max_attempts(4)
                                             .backoff(resilience::backoff::constant(100ms))
                                             .jitter(resilience::jitter::none),
                                         b, resilience::timeout(1s))
                        .clock(clock);
  int calls = 0;
  completion<result> done;
  spawn(io, call([&]() -> asio::awaitable<result> {
          ++calls;
          co_return error_code(asio::error::connection_reset);
        }),
        done);
  clock.run(io);
  BOOST_TEST(calls == 3);
  BOOST_TEST((done.value->error() == resilience::error::circuit_open));
  BOOST_TEST((clock.now() == time_point{} + 300ms), "three backoffs waited on the manual clock");
}

BOOST_FIXTURE_TEST_CASE(retry_waits_out_the_breaker_around_timed_attempts, breaker_fixture) {
  // pipeline(retry, breaker, attempt timeout): three attempts time out and
  // open the breaker at 500 ms; the fourth is rejected at once, and the retry
  // waits out the break instead of its own backoff; the probe at 1500 ms
  // succeeds, the dependency having recovered at 1 s.
  breaker b(options(), clock);
  const auto call = resilience::pipeline(resilience::retry_policy{}
                                             .max_attempts(6)
                                             .backoff(resilience::backoff::constant(100ms).with_jitter(resilience::jitter::none))
                                             .wait_out_open_circuit(b)
                                             .clock(clock),
                                         b, resilience::timeout(100ms).clock(clock));
  int calls = 0;
  auto answer_after = [&](duration work) {
    return [&, work]() -> asio::awaitable<result> {
      auto t = clock.make_timer(co_await asio::this_coro::executor);
      t.expires_after(work);
      auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return ec;
      co_return 7;
    };
  };
  auto down = answer_after(1h), up = answer_after(10ms);  // named: their coroutines refer to them
  completion<result> done;
  spawn(io, call([&] {
          ++calls;
          return clock.now() < time_point(1s) ? down() : up();
        }),
        done);
  clock.run(io);
  BOOST_TEST(done.value->value() == 7);
  BOOST_TEST(calls == 4, "the rejected attempt never reached the op");
  BOOST_TEST((clock.now() == time_point(1510ms)));
  BOOST_TEST(transitions() == "closed>open open>half_open");
}

BOOST_FIXTURE_TEST_CASE(a_transition_that_loses_its_race_publishes_nothing, breaker_fixture) {
  // Replays a race: a probe is released between the moment a transition
  // computes its period and its compare-and-swap, which then fails. The
  // open-duration generator runs at exactly that point, so it stands in for
  // the other thread. The half-open limit must still reopen the breaker.
  std::optional<resilience::breaker_permit> racing;
  breaker b{breaker_options{}
                .consecutive_failures(1)
                .half_open_permits(1)
                .half_open_limit(30s)
                .open_duration([&](std::uint32_t) {
                  if (racing) {
                    racing->release();
                    racing.reset();
                  }
                  return duration(10s);
                }),
            clock};
  fail(b);
  clock.advance(10s);
  racing.emplace(b.try_acquire());  // open -> half-open; this call is the probe
  BOOST_REQUIRE(racing->is_probe());
  clock.advance(31s);  // past the half-open limit
  auto late = b.try_acquire();
  BOOST_TEST(!late, "past the half-open limit the breaker reopens and rejects");
  BOOST_TEST(name(b.state()) == "open");
  clock.advance(10s);
  auto probe = b.try_acquire();
  BOOST_TEST(probe.is_probe(), "and after the new break a probe goes through again");
}

// Half-open with one probe, then one call that ends in the given way.
struct probe_fixture : breaker_fixture {
  breaker b{options(), clock};
  probe_fixture() {
    fail(b, 3);
    clock.advance(1s);
  }
};

BOOST_FIXTURE_TEST_CASE(an_exception_gives_the_permit_back_as_a_failure, probe_fixture) {
  completion<int> done;
  spawn(io, b([]() -> asio::awaitable<int> {
          throw std::runtime_error("boom");
          co_return 0;
        }),
        done);
  clock.run(io);
  BOOST_CHECK_THROW(resilience::test::rethrow(done), std::runtime_error);
  BOOST_TEST(name(b.state()) == "open");
}

BOOST_FIXTURE_TEST_CASE(a_timeout_gives_the_permit_back_as_a_failure, probe_fixture) {
  completion<result> in_channel;
  spawn(io, b([]() -> asio::awaitable<result> { co_return error_code(resilience::error::timeout); }), in_channel);
  clock.run(io);
  BOOST_TEST((in_channel.value->error() == resilience::error::timeout));
  BOOST_TEST(name(b.state()) == "open");

  clock.advance(1s);
  completion<int> thrown;
  spawn(io, b([]() -> asio::awaitable<int> {
          throw boost::system::system_error(resilience::error::timeout);
          co_return 0;
        }),
        thrown);
  clock.run(io);
  BOOST_TEST(static_cast<bool>(thrown.exception));
  BOOST_TEST(name(b.state()) == "open");
  BOOST_TEST(transitions() == "closed>open open>half_open half_open>open open>half_open half_open>open");
}

BOOST_FIXTURE_TEST_CASE(a_cancellation_gives_the_permit_back_as_neither, probe_fixture) {
  int calls = 0;
  const auto waits = [&]() -> asio::awaitable<int> {
    ++calls;
    auto t = clock.make_timer(co_await asio::this_coro::executor);
    t.expires_after(5s);
    co_await t.async_wait(asio::use_awaitable);  // throws operation_aborted when cancelled
    co_return 1;
  };
  asio::cancellation_signal signal;
  completion<int> done;
  spawn(io, b(waits), done, &signal);
  io.poll();
  BOOST_TEST(calls == 1);
  BOOST_TEST(b.metrics().probes_in_flight == 1u);
  BOOST_TEST(!b.try_acquire(), "the only probe permit is taken");
  signal.emit(asio::cancellation_type::terminal);
  io.poll();
  BOOST_TEST(done.done());
  BOOST_TEST(name(b.state()) == "half_open", "neither success nor failure");
  BOOST_TEST(b.metrics().probes_in_flight == 0u);

  // The permit came back: the next calls probe and close it.
  completion<int> next;
  spawn(io, b([]() -> asio::awaitable<int> { co_return 2; }), next);
  completion<int> last;
  spawn(io, b([]() -> asio::awaitable<int> { co_return 3; }), last);
  clock.run(io);
  BOOST_TEST(*next.value == 2);
  BOOST_TEST(*last.value == 3);
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_FIXTURE_TEST_CASE(an_op_reporting_cancellation_in_its_result_counts_as_neither, probe_fixture) {
  completion<result> done;
  spawn(io, b([]() -> asio::awaitable<result> { co_return error_code(asio::error::operation_aborted); }), done);
  clock.run(io);
  BOOST_TEST(name(b.state()) == "half_open");
  BOOST_TEST(b.metrics().probes_in_flight == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(breaker_concurrency)

// Threads and coroutines on a thread pool hammer one breaker with random
// outcomes while virtual time moves. Checked: never more than N probes in
// one half-open period; every transition reported once, with no gaps, and
// chaining from -> to.
BOOST_AUTO_TEST_CASE(stress_invariants) {
  constexpr std::uint32_t permits = 3;
  constexpr int threads = 3;
  constexpr int calls_per_thread = 20000;
  constexpr int coroutines = 3000;

  manual_clock clock;
  std::mutex mutex;  // the test's own bookkeeping only
  std::vector<resilience::state_change> changes;
  std::array<std::atomic<int>, 4096> in_period{};
  std::atomic<int> over_limit{0};
  std::atomic<int> probes_seen{0};

  breaker b(breaker_options{}
                .consecutive_failures(4)
                .count_window(32)
                .failure_ratio(0.5)
                .minimum_calls(8)
                .open_duration(2ms)
                .half_open_permits(permits)
                .successes_to_close(4)
                .half_open_limit(20ms)
                .on_state_change([&](const resilience::state_change& e) {
                  std::lock_guard lock(mutex);
                  changes.push_back(e);
                }),
            clock);

  const auto enter = [&](const resilience::breaker_permit& p) {
    if (!p.is_probe()) return;
    probes_seen.fetch_add(1);
    if (in_period[p.sequence() % in_period.size()].fetch_add(1) + 1 > static_cast<int>(permits)) over_limit.fetch_add(1);
  };
  const auto leave = [&](const resilience::breaker_permit& p) {
    if (p.is_probe()) in_period[p.sequence() % in_period.size()].fetch_sub(1);
  };

  asio::thread_pool pool(2);
  std::atomic<int> finished{0};
  for (int i = 0; i < coroutines; ++i) {
    asio::co_spawn(
        pool,
        [&, i]() -> asio::awaitable<void> {
          const auto op = [&, i]() -> asio::awaitable<result> {
            co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);  // interleave
            if (i % 3 == 0) throw std::runtime_error("down");
            if (i % 7 == 0) co_return error_code(asio::error::operation_aborted);
            co_return i;
          };
          try {
            co_await b(op);
          } catch (const std::exception&) {
          }
          finished.fetch_add(1);
        },
        asio::detached);
  }

  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 1);
      std::uniform_int_distribution<int> pick(0, 99);
      for (int i = 0; i < calls_per_thread; ++i) {
        if (t == 0 && i % 50 == 0) clock.advance(1ms);
        auto p = b.try_acquire();
        if (!p) continue;
        enter(p);
        const int roll = pick(rng);
        leave(p);
        if (roll < 45) {
          p.record_failure();
        } else if (roll < 95) {
          p.record_success();
        } else {
          p.release();
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  pool.join();

  BOOST_TEST(finished.load() == coroutines);
  BOOST_TEST(over_limit.load() == 0);
  BOOST_TEST(probes_seen.load() > 0, "the run went through half-open");
  const auto m = b.metrics();
  BOOST_TEST_MESSAGE("transitions " << m.transitions << ", probes " << probes_seen.load() << ", rejections "
                                    << m.rejections);
  BOOST_REQUIRE(changes.size() == m.transitions);
  std::sort(changes.begin(), changes.end(), [](const auto& a, const auto& c) { return a.sequence < c.sequence; });
  circuit_state state = circuit_state::closed;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    BOOST_TEST(changes[i].sequence == i + 1, "each transition once, none missing");
    BOOST_TEST((changes[i].from == state), "transition " << i + 1 << " starts where the last ended");
    state = changes[i].to;
  }
  BOOST_TEST((state == m.state));
  if (m.state == circuit_state::half_open) BOOST_TEST(m.probes_in_flight == 0u, "every permit came back");
}

BOOST_AUTO_TEST_SUITE_END()

// -- state that must stay right however long a breaker lives --

namespace {

// A clock that reads whatever it is set to, backwards and negative included.
struct settable_clock {
  std::shared_ptr<std::atomic<duration::rep>> ticks = std::make_shared<std::atomic<duration::rep>>(0);
  time_point now() const noexcept { return time_point(duration(ticks->load())); }
  void set(time_point t) const { ticks->store(t.time_since_epoch().count()); }
  template <class Executor>
  asio::steady_timer make_timer(const Executor& ex) const {
    return asio::steady_timer(ex);
  }
};

constexpr duration years(int n) { return std::chrono::hours(24 * 365) * n; }

// Options of the wrap tests: 3 failures in a row open it for 1 s; one probe
// success closes it; a probe hangs for 10 s at most.
breaker_options plain() {
  return breaker_options{}
      .consecutive_failures(3)
      .no_failure_ratio()
      .count_window(1)
      .minimum_calls(1)
      .open_duration(1s)
      .half_open_limit(10s);
}

// Trips `b`, then checks that the break lasts exactly 1 s and a probe closes it.
template <class Breaker, class Advance>
void trips_and_recovers(Breaker& b, Advance advance) {
  for (int i = 0; i < 3; ++i) b.try_acquire().record_failure();
  BOOST_REQUIRE(name(b.state()) == "open");
  BOOST_TEST((b.time_until_probe() == 1s));
  advance(999ms);
  auto early = b.try_acquire();
  BOOST_TEST(!early, "the break lasts open_duration");
  BOOST_TEST((early.retry_after() == 1ms));
  advance(1ms);
  auto probe = b.try_acquire();
  BOOST_TEST(probe.is_probe(), "and ends after it");
  probe.record_success();
  BOOST_TEST(name(b.state()) == "closed");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(breaker_wraparound)

BOOST_AUTO_TEST_CASE(any_number_of_transitions) {
  // Runs of reset() publish no deadline, so the last published one falls ever
  // further behind; isolate() cycles publish one each time.
  manual_clock clock;
  breaker b(plain(), clock);
  const auto advance = [&](duration d) { clock.advance(d); };
  std::uint64_t transitions = 0;
  for (int round = 0; round < 3; ++round) {
    BOOST_TEST_CONTEXT("round " << round) {
      b.isolate();
      for (int i = 0; i < 40000; ++i) b.reset();
      trips_and_recovers(b, advance);
      for (int i = 0; i < 40000; ++i) {
        b.isolate();
        b.reset();
      }
      trips_and_recovers(b, advance);
      transitions += 1 + 40000 + 3 + 80000 + 3;  // each trip: open, half_open, closed
      BOOST_TEST(b.metrics().transitions == transitions);
    }
  }
  // A hung probe still ends its half-open period after its limit.
  b.isolate();
  for (int i = 0; i < 70000; ++i) b.reset();
  for (int i = 0; i < 3; ++i) fail(b);
  clock.advance(1s);
  auto hung = b.try_acquire();
  BOOST_REQUIRE(hung.is_probe());
  clock.advance(10s);
  b.poll();
  BOOST_TEST(name(b.state()) == "open");
  hung.record_success();
  BOOST_TEST(name(b.state()) == "open", "the hung probe's period is over");
}

BOOST_AUTO_TEST_CASE(open_and_half_open_cycles) {
  // 100k breaks in a row, each ended by a failed probe.
  manual_clock clock;
  breaker b(plain(), clock);
  for (int i = 0; i < 3; ++i) fail(b);
  for (int i = 0; i < 100000; ++i) {
    clock.advance(1s);
    auto probe = b.try_acquire();
    BOOST_REQUIRE(probe.is_probe());
    probe.record_failure();
  }
  BOOST_TEST(b.metrics().transitions == 200001u);
  BOOST_TEST(name(b.state()) == "open");
  BOOST_TEST((b.time_until_probe() == 1s));
  clock.advance(1s);
  succeed(b);
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_AUTO_TEST_CASE(twenty_years_on) {
  manual_clock clock;
  breaker b(plain(), clock);
  clock.advance(years(20));
  trips_and_recovers(b, [&](duration d) { clock.advance(d); });
  // The half-open limit too.
  for (int i = 0; i < 3; ++i) fail(b);
  clock.advance(1s);
  auto hung = b.try_acquire();
  BOOST_REQUIRE(hung.is_probe());
  clock.advance(9s);
  b.poll();
  BOOST_TEST(name(b.state()) == "half_open");
  clock.advance(1s);
  b.poll();
  BOOST_TEST(name(b.state()) == "open");
}

BOOST_AUTO_TEST_CASE(near_the_end_of_time) {
  manual_clock clock;
  breaker b(plain(), clock);
  clock.advance_to(time_point::max() - 1h);
  trips_and_recovers(b, [&](duration d) { clock.advance(d); });

  // A break that would end past time_point::max() ends when the clock gets there.
  clock.advance_to(time_point::max() - 500ms);
  for (int i = 0; i < 3; ++i) fail(b);
  BOOST_TEST((b.time_until_probe() == 500ms));
  clock.advance(499ms);
  BOOST_TEST(!b.try_acquire());
  clock.advance(1s);  // saturates at time_point::max()
  BOOST_REQUIRE((clock.now() == time_point::max()));
  auto probe = b.try_acquire();
  BOOST_TEST(probe.is_probe());
  probe.record_success();
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_AUTO_TEST_CASE(a_clock_far_from_zero_at_construction) {
  for (const time_point start : {time_point::max() - 1h, time_point(years(200)), time_point::min() + 1h}) {
    BOOST_TEST_CONTEXT("start " << start.time_since_epoch().count()) {
      settable_clock clock;
      clock.set(start);
      const auto advance = [&](duration d) { clock.set(clock.now() + d); };
      resilience::basic_circuit_breaker<settable_clock> counted(plain(), clock);
      trips_and_recovers(counted, advance);

      resilience::basic_circuit_breaker<settable_clock> timed(
          breaker_options{}.time_window(10s, 10).failure_ratio(0.5).minimum_calls(4).open_duration(1s), clock);
      timed.try_acquire().record_failure();
      timed.try_acquire().record_failure();
      advance(5s);
      BOOST_TEST(timed.metrics().calls == 2u);
      advance(5s);
      BOOST_TEST(timed.metrics().calls == 0u, "the slice expired");
      for (int i = 0; i < 3; ++i) timed.try_acquire().record_failure();
      BOOST_TEST(name(timed.state()) == "closed");
      timed.try_acquire().record_failure();
      BOOST_TEST(name(timed.state()) == "open");
      BOOST_TEST((timed.time_until_probe() == 1s));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_clock_that_jumps_across_its_whole_range) {
  // Differences of these readings overflow 64 bits: none may be computed raw.
  settable_clock clock;
  clock.set(time_point::min() + 1h);
  resilience::basic_circuit_breaker<settable_clock> b(plain().slow_calls(1s, 1.0).time_window(1min, 6), clock);
  auto slow = b.try_acquire();
  clock.set(time_point::max() - 1h);
  slow.record_success();
  BOOST_TEST(b.metrics().slow_calls == 1u, "it took almost forever");
  BOOST_TEST(b.metrics().calls == 1u);
  BOOST_REQUIRE(name(b.state()) == "open");
  clock.set(time_point::min());  // backwards: the break is not over
  BOOST_TEST(!b.try_acquire());
  BOOST_TEST((b.time_until_probe() == duration::max()), "(max - 1h + 1s) - min, clamped");
  clock.set(time_point::max());
  auto probe = b.try_acquire();
  BOOST_TEST(probe.is_probe());
  probe.record_success();
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_AUTO_TEST_SUITE_END()

// -- extreme values --

namespace {

// Drives a breaker through every state on a clock that ends near the end of
// time, checking what must hold whatever the options. Bounded: it cannot hang.
void exercise(const breaker_options& options) {
  manual_clock clock;
  breaker b(options, clock);
  const auto check = [&] {
    const auto m = b.metrics();
    BOOST_TEST(m.failures <= m.calls);
    BOOST_TEST(m.slow_calls <= m.calls);
    BOOST_TEST(m.probes_in_flight <= options.half_open_permits());
    BOOST_TEST((m.time_until_probe >= duration::zero()));
    if (m.state != circuit_state::open && m.state != circuit_state::isolated)
      BOOST_TEST((m.time_until_probe == duration::zero()));
    BOOST_TEST(std::string(resilience::to_string(m.state)) != "unknown");
  };
  const auto calls = [&](int n, duration each) {
    for (int i = 0; i < n; ++i) {
      auto p = b.try_acquire();
      if (!p) {
        BOOST_TEST((p.retry_after() >= duration::zero()));
        continue;
      }
      clock.advance(each);
      p.record(i % 3 != 2);
      check();
    }
  };
  for (const duration step : {duration(1), duration(1ms), duration(1s), duration(1h), years(1)}) {
    calls(40, step);
    b.poll();
    check();
    clock.advance(step);
    b.poll();
    calls(8, duration::zero());
  }
  clock.advance_to(time_point::max() - 1s);
  calls(40, 1ms);
  clock.advance(duration::max());
  b.poll();
  calls(8, duration::zero());
  check();
  for (auto manual : {&breaker::isolate, &breaker::reset, &breaker::metrics_only, &breaker::disable, &breaker::reset}) {
    (b.*manual)();
    calls(8, duration::zero());
    check();
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(breaker_extremes)

// Each field at 0, 1, its maximum and (where the type allows) negative: it
// throws std::invalid_argument naming the field, when set or when the breaker
// is built, or it is accepted and a breaker runs sanely with it.
BOOST_AUTO_TEST_CASE(every_field_at_its_extremes) {
  using o = breaker_options;
  constexpr auto u32max = std::numeric_limits<std::uint32_t>::max();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double tiny = std::numeric_limits<double>::denorm_min();
  const duration dmax = duration::max(), dmin = duration::min(), tick{1};
  const auto gen = [](duration d) { return o::duration_generator([d](std::uint32_t) { return d; }); };
  struct row {
    const char* field;  // named by the exception, or empty: accepted
    std::function<o(const o&)> set;
    const char* what;
  };
  const row rows[] = {
      {"consecutive_failures", [](const o& x) { return x.consecutive_failures(0); }, "0"},
      {"", [](const o& x) { return x.consecutive_failures(1); }, "1"},
      {"", [&](const o& x) { return x.consecutive_failures(u32max); }, "max"},
      {"failure_ratio", [](const o& x) { return x.failure_ratio(0); }, "0"},
      {"", [&](const o& x) { return x.failure_ratio(tiny); }, "denorm_min"},
      {"", [](const o& x) { return x.failure_ratio(1); }, "1"},
      {"failure_ratio", [](const o& x) { return x.failure_ratio(std::numeric_limits<double>::max()); }, "max"},
      {"failure_ratio", [](const o& x) { return x.failure_ratio(-1); }, "-1"},
      {"failure_ratio", [&](const o& x) { return x.failure_ratio(nan); }, "nan"},
      {"failure_ratio", [&](const o& x) { return x.failure_ratio(inf); }, "inf"},
      {"slow_calls", [](const o& x) { return x.slow_calls(duration::zero(), 0.5); }, "threshold 0"},
      {"", [&](const o& x) { return x.slow_calls(tick, 0.5); }, "threshold 1"},
      {"", [&](const o& x) { return x.slow_calls(dmax, 0.5); }, "threshold max"},
      {"slow_calls", [&](const o& x) { return x.slow_calls(-tick, 0.5); }, "threshold -1"},
      {"slow_calls", [&](const o& x) { return x.slow_calls(dmin, 0.5); }, "threshold min"},
      {"slow_calls", [](const o& x) { return x.slow_calls(1s, 0); }, "ratio 0"},
      {"", [&](const o& x) { return x.slow_calls(tick, tiny); }, "ratio denorm_min"},
      {"", [](const o& x) { return x.slow_calls(1ms, 1); }, "ratio 1"},
      {"slow_calls", [&](const o& x) { return x.slow_calls(1s, nan); }, "ratio nan"},
      {"slow_calls", [](const o& x) { return x.slow_calls(1s, -0.5); }, "ratio -0.5"},
      {"count_window", [](const o& x) { return x.count_window(0); }, "0"},
      {"", [](const o& x) { return x.count_window(1); }, "1"},
      {"", [](const o& x) { return x.count_window(o::max_count_window); }, "max_count_window"},
      {"count_window", [](const o& x) { return x.count_window(o::max_count_window + 1); }, "max_count_window + 1"},
      {"count_window", [&](const o& x) { return x.count_window(u32max); }, "max"},
      {"time_window", [](const o& x) { return x.time_window(duration::zero()); }, "span 0"},
      {"", [&](const o& x) { return x.time_window(tick); }, "span 1"},
      {"", [&](const o& x) { return x.time_window(dmax); }, "span max"},
      {"time_window", [&](const o& x) { return x.time_window(-tick); }, "span -1"},
      {"time_window", [&](const o& x) { return x.time_window(dmin); }, "span min"},
      {"time_window", [](const o& x) { return x.time_window(1s, 0); }, "buckets 0"},
      {"", [](const o& x) { return x.time_window(1s, 1); }, "buckets 1"},
      {"", [&](const o& x) { return x.time_window(dmax, o::max_buckets); }, "span max, max_buckets"},
      {"", [&](const o& x) { return x.time_window(dmax, 1); }, "span max, buckets 1"},
      {"time_window", [](const o& x) { return x.time_window(1s, o::max_buckets + 1); }, "max_buckets + 1"},
      {"time_window", [&](const o& x) { return x.time_window(1s, u32max); }, "buckets max"},
      {"time_window", [&](const o& x) { return x.time_window(tick, 2); }, "less than a tick per bucket"},
      {"minimum_calls", [](const o& x) { return x.minimum_calls(0); }, "0"},
      {"", [](const o& x) { return x.minimum_calls(1); }, "1"},
      {"", [](const o& x) { return x.minimum_calls(o::max_count_window); }, "max_count_window"},
      {"minimum_calls", [&](const o& x) { return x.minimum_calls(u32max); }, "max, count window"},
      {"", [&](const o& x) { return x.minimum_calls(u32max).time_window(1min); }, "max, time window"},
      {"", [](const o& x) { return x.open_duration(duration::zero()); }, "0"},
      {"", [&](const o& x) { return x.open_duration(tick); }, "1"},
      {"", [&](const o& x) { return x.open_duration(dmax); }, "max"},
      {"", [&](const o& x) { return x.open_duration(dmax - tick); }, "max - 1"},
      {"open_duration", [&](const o& x) { return x.open_duration(-tick); }, "-1"},
      {"open_duration", [&](const o& x) { return x.open_duration(dmin); }, "min"},
      {"open_duration", [](const o& x) { return x.open_duration(o::duration_generator{}); }, "empty generator"},
      {"", [&](const o& x) { return x.open_duration(gen(duration::zero())); }, "generator 0"},
      {"", [&](const o& x) { return x.open_duration(gen(dmax)); }, "generator max"},
      {"", [&](const o& x) { return x.open_duration(gen(dmax / 2)); }, "generator max / 2"},
      {"", [&](const o& x) { return x.open_duration(gen(-tick)); }, "generator -1"},
      {"", [&](const o& x) { return x.open_duration(gen(dmin)); }, "generator min"},
      {"half_open_permits", [](const o& x) { return x.half_open_permits(0); }, "0"},
      {"", [](const o& x) { return x.half_open_permits(1); }, "1"},
      {"", [](const o& x) { return x.half_open_permits(o::max_permits); }, "max_permits"},
      {"half_open_permits", [](const o& x) { return x.half_open_permits(o::max_permits + 1); }, "max_permits + 1"},
      {"half_open_permits", [&](const o& x) { return x.half_open_permits(u32max); }, "max"},
      {"successes_to_close", [](const o& x) { return x.successes_to_close(0); }, "0"},
      {"", [](const o& x) { return x.successes_to_close(1); }, "1"},
      {"", [](const o& x) { return x.successes_to_close(o::max_permits); }, "max_permits"},
      {"successes_to_close", [](const o& x) { return x.successes_to_close(o::max_permits + 1); }, "max_permits + 1"},
      {"successes_to_close", [&](const o& x) { return x.successes_to_close(u32max); }, "max"},
      {"half_open_limit", [](const o& x) { return x.half_open_limit(duration::zero()); }, "0"},
      {"", [&](const o& x) { return x.half_open_limit(tick); }, "1"},
      {"", [&](const o& x) { return x.half_open_limit(dmax); }, "max"},
      {"half_open_limit", [&](const o& x) { return x.half_open_limit(-tick); }, "-1"},
      {"half_open_limit", [&](const o& x) { return x.half_open_limit(dmin); }, "min"},
  };
  // Two bases: the defaults, and one that trips on anything.
  const o bases[] = {o{}, o{}.consecutive_failures(1).open_duration(1s)};
  for (const row& r : rows) {
    for (const o& base : bases) {
      BOOST_TEST_CONTEXT((*r.field ? r.field : "accepted") << ": " << r.what << (&base == bases ? "" : ", tripping")) {
        try {
          const o options = r.set(base);
          exercise(options);
          BOOST_TEST(r.field[0] == '\0', "accepted");
        } catch (const std::invalid_argument& e) {
          BOOST_TEST(r.field[0] != '\0', "rejected: " << e.what());
          BOOST_TEST(std::string(e.what()).find(r.field) != std::string::npos, e.what());
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(an_endless_break) {
  manual_clock clock;
  std::vector<resilience::state_change> changes;
  breaker b(plain().open_duration(duration::max()).on_state_change(
                [&](const resilience::state_change& e) { changes.push_back(e); }),
            clock);
  clock.advance(1h);
  for (int i = 0; i < 3; ++i) fail(b);
  BOOST_REQUIRE(name(b.state()) == "open");
  BOOST_TEST((changes.back().open_for == duration::max()));
  BOOST_TEST((b.time_until_probe() == duration::max()));
  clock.advance(years(100));
  BOOST_TEST((b.time_until_probe() == duration::max()), "still forever");
  clock.advance_to(time_point::max());
  b.poll();
  auto r = b.try_acquire();
  BOOST_TEST(!r);
  BOOST_TEST((r.retry_after() == duration::max()));
  BOOST_TEST(name(b.state()) == "open");
  BOOST_TEST(changes.size() == 1u, "no half-open, ever");
  b.reset();
  succeed(b);
}

BOOST_AUTO_TEST_CASE(an_endless_half_open_period) {
  manual_clock clock;
  breaker b(plain().half_open_limit(duration::max()), clock);
  for (int i = 0; i < 3; ++i) fail(b);
  clock.advance(1s);
  auto hung = b.try_acquire();
  BOOST_REQUIRE(hung.is_probe());
  clock.advance_to(time_point::max());
  b.poll();
  BOOST_TEST(!b.try_acquire());
  BOOST_TEST(name(b.state()) == "half_open", "no limit: the probe may take forever");
  hung.record_success();
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_AUTO_TEST_CASE(what_a_generator_returns) {
  struct row {
    duration returned;
    duration expected;  // time_until_probe right after opening
  };
  const row rows[] = {
      {-1s, duration::zero()},
      {duration::min(), duration::zero()},
      {duration::zero(), duration::zero()},
      {duration::max() / 2, duration::max() / 2},
      {duration::max() - duration(1), duration::max() - duration(1)},
      {duration::max(), duration::max()},
  };
  for (const row& r : rows) {
    BOOST_TEST_CONTEXT("generator returns " << r.returned.count()) {
      manual_clock clock;
      breaker b(plain().open_duration([&](std::uint32_t) { return r.returned; }), clock);
      for (int i = 0; i < 3; ++i) fail(b);
      BOOST_TEST((b.time_until_probe() == r.expected));
      clock.advance(r.expected);
      auto p = b.try_acquire();
      BOOST_TEST(static_cast<bool>(p) == (r.expected != duration::max()));
      BOOST_TEST(p.is_probe() == (r.expected != duration::max()));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_slow_call_threshold_of_forever) {
  manual_clock clock;
  breaker b(breaker_options{}.no_failure_ratio().slow_calls(duration::max(), 0.5).count_window(2), clock);
  auto p = b.try_acquire();
  clock.advance(years(200));
  p.record_success();
  BOOST_TEST(b.metrics().slow_calls == 0u, "200 years is not forever");
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_AUTO_TEST_SUITE_END()

// -- defaults that yield to what is set --

BOOST_AUTO_TEST_SUITE(breaker_defaults)

BOOST_AUTO_TEST_CASE(an_unset_minimum_yields_to_a_small_count_window) {
  const auto options = breaker_options{}.count_window(10);
  BOOST_TEST(options.minimum_calls() == 10u);
  manual_clock clock;
  breaker b(options, clock);
  fail(b, 4);
  for (int i = 0; i < 5; ++i) succeed(b);
  BOOST_TEST(name(b.state()) == "closed", "9 calls");
  fail(b);
  BOOST_TEST(name(b.state()) == "open", "5 of 10 failed");
}

BOOST_AUTO_TEST_CASE(an_unset_count_window_grows_to_the_minimum) {
  const auto options = breaker_options{}.minimum_calls(500);
  BOOST_TEST(options.count_window() == 500u);
  manual_clock clock;
  breaker b(options, clock);
  fail(b, 499);
  BOOST_TEST(name(b.state()) == "closed");
  fail(b);
  BOOST_TEST(name(b.state()) == "open");
  BOOST_TEST(breaker_options{}.minimum_calls(5).count_window() == 100u);
  BOOST_TEST(breaker_options{}.time_window(1min).minimum_calls() == 20u);
}

BOOST_AUTO_TEST_CASE(an_unset_bucket_count_yields_to_a_short_span) {
  BOOST_TEST(breaker_options{}.time_window(duration(5)).buckets() == 5u);
  BOOST_TEST(breaker_options{}.time_window(1s).buckets() == 10u);
  BOOST_CHECK_THROW(breaker_options{}.time_window(duration(5), 10), std::invalid_argument);
}

// Whatever the order of the setters, the same combinations are accepted.
BOOST_AUTO_TEST_CASE(setter_order_does_not_matter) {
  using o = breaker_options;
  using setter = std::function<o(const o&)>;
  const setter cw10 = [](const o& x) { return x.count_window(10); };
  const setter mc10 = [](const o& x) { return x.minimum_calls(10); };
  const setter mc50 = [](const o& x) { return x.minimum_calls(50); };
  const setter tw = [](const o& x) { return x.time_window(1min); };
  const setter mc_huge = [](const o& x) { return x.minimum_calls(o::max_count_window + 1); };
  const setter permits1 = [](const o& x) { return x.half_open_permits(1); };
  const setter close3 = [](const o& x) { return x.successes_to_close(3); };
  const setter none = [](const o& x) { return x; };
  struct row {
    const char* what;
    setter base;                  // applied first
    std::vector<setter> setters;  // then these, in every order
    bool accepted;
  };
  const row rows[] = {
      {"count_window 10, minimum_calls 50", none, {cw10, mc50}, false},
      {"count_window 10, minimum_calls 10", none, {cw10, mc10}, true},
      {"a count window of 10 replaced by a time window, minimum_calls 50", cw10, {mc50, tw}, true},
      {"minimum_calls 50, time window", none, {mc50, tw}, true},
      {"minimum_calls past any count window", none, {mc_huge}, false},
      {"minimum_calls past any count window, time window", none, {mc_huge, tw}, true},
      {"1 probe at a time, 3 successes to close", none, {permits1, close3}, true},
  };
  for (const row& r : rows) {
    std::vector<std::size_t> order(r.setters.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    do {
      std::string sequence;
      for (std::size_t i : order) sequence += std::to_string(i);
      BOOST_TEST_CONTEXT(r.what << ", order " << sequence) {
        bool accepted = true;
        try {
          o options = r.base(o{});
          for (std::size_t i : order) options = r.setters[i](options);
          breaker b(options, manual_clock{});
        } catch (const std::invalid_argument& e) {
          accepted = false;
          BOOST_TEST(std::string(e.what()).find("minimum_calls") != std::string::npos, e.what());
        }
        BOOST_TEST(accepted == r.accepted);
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

BOOST_AUTO_TEST_CASE(more_successes_to_close_than_probes_at_a_time) {
  manual_clock clock;
  breaker b(plain().half_open_permits(1).successes_to_close(3), clock);
  for (int i = 0; i < 3; ++i) fail(b);
  clock.advance(1s);
  for (int i = 0; i < 3; ++i) {
    auto probe = b.try_acquire();
    BOOST_REQUIRE(probe.is_probe());
    BOOST_TEST(name(b.state()) == "half_open");
    BOOST_TEST(!b.try_acquire(), "one at a time");
    probe.record_success();
  }
  BOOST_TEST(name(b.state()) == "closed");
}

BOOST_AUTO_TEST_SUITE_END()

// -- shutdown --

BOOST_AUTO_TEST_SUITE(breaker_shutdown)

// A probe admitted through the stage, its op suspended forever, then the
// io_context destroyed: the frame goes without resuming, and its permit's
// destructor gives the probe slot back.
BOOST_AUTO_TEST_CASE(a_destroyed_context_gives_probe_permits_back) {
  struct row {
    const char* what;
    bool manual_timer;
    std::uint32_t probes;
  };
  const row rows[] = {{"manual_clock timer", true, 1}, {"asio timer", false, 1}, {"3 probes", true, 3}};
  for (const row& r : rows) {
    BOOST_TEST_CONTEXT(r.what) {
      manual_clock clock;
      breaker b(plain().half_open_permits(r.probes), clock);
      for (int i = 0; i < 3; ++i) fail(b);
      clock.advance(1s);
      int started = 0;
      const auto forever = [&]() -> asio::awaitable<int> {
        ++started;
        if (r.manual_timer) {
          auto t = clock.make_timer(co_await asio::this_coro::executor);
          t.expires_after(duration::max());
          co_await t.async_wait(asio::use_awaitable);
        } else {
          asio::steady_timer t(co_await asio::this_coro::executor, 24h);
          co_await t.async_wait(asio::use_awaitable);
        }
        co_return 1;
      };
      std::vector<completion<int>> done(r.probes);
      {
        asio::io_context io;
        for (auto& d : done) spawn(io, b(forever), d);
        io.poll();
        BOOST_TEST(started == static_cast<int>(r.probes));
        BOOST_TEST(b.metrics().probes_in_flight == r.probes);
        BOOST_TEST(!b.try_acquire(), "every probe permit is taken");
      }
      for (const auto& d : done) BOOST_TEST(!d.done(), "destroyed, not resumed");
      BOOST_TEST(name(b.state()) == "half_open");
      BOOST_TEST(b.metrics().probes_in_flight == 0u);
      auto next = b.try_acquire();
      BOOST_TEST(next.is_probe(), "a new call is admitted as a probe");
      next.record_success();
      BOOST_TEST(name(b.state()) == "closed");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(breaker_manual_control_races)

// Callers on two threads while a third isolates, resets and polls at random
// and moves virtual time. Checked: at most N probes per half-open period,
// events that chain from -> to in sequence order, no more events than
// transitions, and every probe permit back at the end.
BOOST_AUTO_TEST_CASE(calls_race_manual_control) {
  constexpr std::uint32_t permits = 2;
  manual_clock clock;
  std::mutex mutex;  // the test's own bookkeeping only
  std::vector<resilience::state_change> changes;
  std::array<std::atomic<int>, 4096> in_period{};
  std::atomic<int> over_limit{0};
  std::atomic<int> probes_seen{0};
  std::atomic<bool> stop{false};
  breaker b(breaker_options{}
                .consecutive_failures(2)
                .count_window(16)
                .minimum_calls(4)
                .open_duration(1ms)
                .half_open_permits(permits)
                .successes_to_close(2)
                .half_open_limit(5ms)
                .on_state_change([&](const resilience::state_change& e) {
                  std::lock_guard lock(mutex);
                  changes.push_back(e);
                }),
            clock);

  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 7);
      std::uniform_int_distribution<int> pick(0, 99);
      for (int i = 0; i < 30000; ++i) {
        auto p = b.try_acquire();
        if (!p) continue;
        auto& slot = in_period[p.sequence() % in_period.size()];
        if (p.is_probe()) probes_seen.fetch_add(1);
        if (p.is_probe() && slot.fetch_add(1) + 1 > static_cast<int>(permits)) over_limit.fetch_add(1);
        const int roll = pick(rng);
        if (p.is_probe()) slot.fetch_sub(1);
        if (roll < 40) {
          p.record_failure();
        } else if (roll < 90) {
          p.record_success();
        } else {
          p.release();
        }
      }
    });
  }
  std::thread control([&] {
    std::mt19937 rng(99);
    std::uniform_int_distribution<int> pick(0, 99);
    while (!stop.load()) {
      const int roll = pick(rng);
      if (roll < 2) {
        b.isolate();
      } else if (roll < 6) {
        b.reset();
      } else if (roll < 30) {
        b.poll();
      } else if (roll < 60) {
        clock.advance(500us);
      } else {
        std::this_thread::yield();
      }
    }
  });
  for (auto& c : callers) c.join();
  stop.store(true);
  control.join();

  BOOST_TEST(over_limit.load() == 0);
  const auto m = b.metrics();
  BOOST_TEST_MESSAGE("transitions " << m.transitions << ", events " << changes.size() << ", probes "
                                    << probes_seen.load());
  BOOST_TEST(changes.size() <= m.transitions);
  std::sort(changes.begin(), changes.end(), [](const auto& a, const auto& c) { return a.sequence < c.sequence; });
  circuit_state state = circuit_state::closed;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    if (i > 0) BOOST_TEST(changes[i].sequence > changes[i - 1].sequence, "each transition once");
    BOOST_TEST((changes[i].from == state), "transition " << changes[i].sequence << " starts where the last ended");
    state = changes[i].to;
  }
  BOOST_TEST((state == m.state));
  BOOST_TEST(m.probes_in_flight == 0u, "every permit came back");
}

BOOST_AUTO_TEST_SUITE_END()
