// Calls that end in unusual ways: their execution context destroyed while
// they are suspended (in each stage, from one table of them), their own
// cancellation emitted from inside a hook, a hook that throws, a stage or
// policy that was a temporary.
#include "support.hpp"

#include <resilience/adaptive_throttle.hpp>
#include <resilience/adaptive_timeout.hpp>
#include <resilience/any_pipeline.hpp>
#include <resilience/bulkhead.hpp>
#include <resilience/chaos.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/deadline.hpp>
#include <resilience/error.hpp>
#include <resilience/fallback.hpp>
#include <resilience/hedging.hpp>
#include <resilience/metrics.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/rate_limiter.hpp>
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/timeout.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/mpl/list.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using boost::system::error_code;
using resilience::backoff;
using resilience::co_retry;
using resilience::retry_policy;
using resilience::testing::manual_clock;
using resilience::test::completion;
using resilience::test::spawn;

namespace {

using resilience::test::live;
using resilience::test::sleep_an_hour;

// resilience::test::destroy_context_mid_calls, with `ops_started` ops
// started and `ops_alive` op frames alive when the context goes, and
// whatever else `suspended()` checks then.
template <class Make, class Suspended = void (*)()>
void destroy_context_with_calls_suspended(Make make, int calls, int ops_started, int ops_alive,
                                          Suspended suspended = [] {}) {
  resilience::test::destroy_context_mid_calls(calls, make, [&](int started) {
    BOOST_REQUIRE_EQUAL(started, ops_started);
    BOOST_REQUIRE_EQUAL(live::ops, ops_alive);
    suspended();
  });
}

// A breaker on virtual time, opened once and due for a probe.
struct half_open_breaker {
  manual_clock clock;
  resilience::basic_circuit_breaker<manual_clock> breaker{
      resilience::breaker_options{}.consecutive_failures(1).open_duration(1s), clock};
  half_open_breaker() {
    breaker.try_acquire().record_failure();
    BOOST_REQUIRE((breaker.state() == resilience::circuit_state::open));
    clock.advance(1s);
  }
};

// The stages a call can be suspended in when its io_context is destroyed,
// one row each (a row added to the list below is a strategy covered):
// - start(started): one call, usually through the stage to sleep_an_hour;
// - its base, suspended<calls, ops started, op frames alive>: how many calls
//   start, how many ops they have started by the time they are all
//   suspended, and how many of those are still running (the other calls
//   wait in the stage: in a queue, a backoff, an injected latency);
// - check_suspended(), check_given_back(): what the stage holds while the
//   calls are suspended, and must have back once they are gone (permits,
//   counts); most hold nothing of the kind.
namespace stage_rows {

template <int Calls, int OpsStarted = Calls, int OpsAlive = OpsStarted>
struct suspended {
  static constexpr int calls = Calls;
  static constexpr int ops_started = OpsStarted;
  static constexpr int ops_alive = OpsAlive;
  void check_suspended() const {}
  void check_given_back() const {}
};

// One call of each row: through `stage` to an hour's sleep.
template <class Stage>
auto sleep_through(const Stage& stage, int* started) {
  return stage([started] { return sleep_an_hour(started); });
}

struct a_timeout : suspended<10000> {
  decltype(resilience::timeout(30min)) stage = resilience::timeout(30min);
  auto start(int* s) const { return sleep_through(stage, s); }
};

struct a_deadline : suspended<10000> {
  decltype(resilience::deadline_stage(30min)) stage = resilience::deadline_stage(30min);
  auto start(int* s) const { return sleep_through(stage, s); }
};

inline auto thirty_minutes_adaptive_timeout() {
  return resilience::adaptive_timeout(resilience::latency_tracker{
      resilience::latency_tracker_options{}.bounds(1min, 30min).initial(30min)});
}
struct an_adaptive_timeout : suspended<10000> {
  decltype(thirty_minutes_adaptive_timeout()) stage = thirty_minutes_adaptive_timeout();
  auto start(int* s) const { return sleep_through(stage, s); }
};

struct a_breaker : suspended<10000> {
  resilience::circuit_breaker breaker;
  auto start(int* s) const { return sleep_through(breaker, s); }
  // A call that never ended is neither a success nor a failure.
  void check_given_back() const {
    const auto m = breaker.metrics();
    BOOST_TEST(m.probes_in_flight == 0u);
    BOOST_TEST(m.calls == 0u, "a call that never ended was recorded");
    BOOST_TEST((m.state == resilience::circuit_state::closed));
  }
};

struct a_retry_attempt : suspended<10000> {
  retry_policy policy = retry_policy{}.max_attempts(3);
  auto start(int* s) const { return co_retry([s] { return sleep_an_hour(s); }, policy); }
};

// The op fails at once; the call then sleeps an hour before its retry.
struct a_retry_backoff : suspended<10000, 10000, 0> {
  retry_policy policy = retry_policy{}.max_attempts(2).backoff(backoff::constant(1h).with_jitter(resilience::jitter::none));
  auto start(int* s) const {
    return co_retry(
        [s]() -> asio::awaitable<error_code> {
          ++*s;
          co_return asio::error::connection_reset;
        },
        policy);
  }
};

inline auto deadline_retry_timeout() {
  return resilience::pipeline(resilience::deadline_stage(50min), retry_policy{}.max_attempts(3),
                              resilience::timeout(30min));
}
struct a_pipeline : suspended<10000> {
  decltype(deadline_retry_timeout()) stage = deadline_retry_timeout();
  auto start(int* s) const { return sleep_through(stage, s); }
};

struct a_pipeline_with_a_breaker : a_breaker {
  using pipeline_type = decltype(resilience::pipeline(retry_policy{}, std::declval<resilience::circuit_breaker&>(),
                                                      resilience::timeout(30min)));
  pipeline_type stage = resilience::pipeline(retry_policy{}.max_attempts(3), breaker, resilience::timeout(30min));
  auto start(int* s) const { return sleep_through(stage, s); }
};

struct an_any_pipeline : suspended<10000> {
  resilience::any_pipeline<error_code> stage;
  an_any_pipeline() {
    stage.add(resilience::deadline_stage(50min)).add(retry_policy{}.max_attempts(3)).add(resilience::timeout(30min));
  }
  auto start(int* s) const { return sleep_through(stage, s); }
};

// 100 calls in their op, the others in the queue.
struct a_bulkhead : suspended<10000, 100> {
  resilience::bulkhead bulkhead{resilience::bulkhead_options{}.max_concurrent(100).max_queue(20000)};
  auto start(int* s) const { return sleep_through(bulkhead, s); }
  void check_suspended() const {
    BOOST_REQUIRE_EQUAL(bulkhead.in_flight(), 100u);
    BOOST_REQUIRE_EQUAL(bulkhead.queued(), 9900u);
  }
  void check_given_back() const {
    BOOST_TEST(bulkhead.in_flight() == 0u, "a permit was not returned");
    BOOST_TEST(bulkhead.queued() == 0u, "a waiter was left in the queue");
  }
};

// 3 calls in their op, the others waiting (on steady timers) for a permit.
struct a_rate_limiter : suspended<500, 3> {
  resilience::rate_limiter limiter{
      resilience::rate_limiter_options{}.sliding_window(3, 1h, 4).max_wait(resilience::duration::max())};
  auto start(int* s) const { return sleep_through(limiter, s); }
  void check_suspended() const { BOOST_REQUIRE_EQUAL(limiter.queued(), 497u); }
  void check_given_back() const { BOOST_TEST(limiter.queued() == 0u, "a waiter was left in the queue"); }
};

struct an_adaptive_throttle : suspended<500> {
  resilience::adaptive_throttle throttle;
  auto start(int* s) const { return sleep_through(throttle, s); }
  void check_given_back() const {
    BOOST_TEST(throttle.counts().requests == 0u, "a call that never ended was counted");
  }
};

// Every attempt of every call running: three op frames a call.
inline auto three_hedges_at_once() { return resilience::hedging_policy{}.max_attempts(3).delay(0ms); }
struct a_hedge : suspended<1000, 3000> {
  decltype(three_hedges_at_once()) stage = three_hedges_at_once();
  auto start(int* s) const { return sleep_through(stage, s); }
};

inline auto fallback_to_success() {
  return resilience::fallback_to([]() -> asio::awaitable<error_code> { co_return error_code{}; });
}
struct a_fallback : suspended<10000> {
  decltype(fallback_to_success()) stage = fallback_to_success();
  auto start(int* s) const { return sleep_through(stage, s); }
};

// Each call waits out the injected latency: no op has started.
struct a_chaos_latency : suspended<1000, 0> {
  decltype(resilience::chaos_latency(1h)) stage = resilience::chaos_latency(1h);
  auto start(int* s) const { return sleep_through(stage, s); }
};

// Records a call only when it ends: one destroyed unresumed records nothing.
struct a_metered_stage : suspended<1000> {
  resilience::metrics telemetry;
  resilience::metered_stage stage = telemetry.stage("backend");
  auto start(int* s) const { return sleep_through(stage, s); }
  void check_given_back() const {
    BOOST_TEST(telemetry.snapshot().families.empty(), "a call that never ended was recorded");
  }
};

}  // namespace stage_rows

using stages_to_suspend_in =
    boost::mpl::list<stage_rows::a_timeout, stage_rows::a_deadline, stage_rows::an_adaptive_timeout,
                     stage_rows::a_breaker, stage_rows::a_retry_attempt, stage_rows::a_retry_backoff,
                     stage_rows::a_pipeline, stage_rows::a_pipeline_with_a_breaker, stage_rows::an_any_pipeline,
                     stage_rows::a_bulkhead, stage_rows::a_rate_limiter, stage_rows::an_adaptive_throttle,
                     stage_rows::a_hedge, stage_rows::a_fallback, stage_rows::a_chaos_latency,
                     stage_rows::a_metered_stage>;

}  // namespace

BOOST_AUTO_TEST_SUITE(context_destroyed_mid_call)

// Every frame and handler freed, no handler called, and the stage has back
// what the calls held.
BOOST_AUTO_TEST_CASE_TEMPLATE(frees_every_call_and_gives_back_what_it_held, Row, stages_to_suspend_in) {
  const auto row = std::make_unique<const Row>();
  destroy_context_with_calls_suspended([&](int* s) { return row->start(s); }, Row::calls, Row::ops_started,
                                       Row::ops_alive, [&] { row->check_suspended(); });
  row->check_given_back();
}

BOOST_AUTO_TEST_CASE(a_probe_interrupted_by_shutdown_gives_its_permit_back) {
  half_open_breaker h;
  const auto call = resilience::pipeline(std::ref(h.breaker), resilience::timeout(30min).clock(h.clock));
  destroy_context_with_calls_suspended([&](int* s) { return call([s] { return sleep_an_hour(s); }); }, 1, 1, 1);
  BOOST_TEST((h.breaker.state() == resilience::circuit_state::half_open));
  BOOST_TEST(h.breaker.metrics().probes_in_flight == 0u, "the probe's permit was lost");
  auto next = h.breaker.try_acquire();
  BOOST_TEST(static_cast<bool>(next), "no probe admitted after the interrupted one");
  BOOST_TEST(next.is_probe());
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

using resilience::test::reset;

// A call whose cancellation signal a hook can reach.
struct hooked_call {
  asio::io_context io;
  manual_clock clock;
  asio::cancellation_signal signal;
  int calls = 0;

  auto policy() const {
    return retry_policy{}.max_attempts(5).backoff(backoff::constant(100ms)).jitter(resilience::jitter::none).clock(
        clock);
  }
  auto failing_op() {
    return [this]() -> asio::awaitable<error_code> {
      ++calls;
      co_return reset;
    };
  }
  auto failing_plain_op() {
    return [this]() -> asio::awaitable<int> {
      ++calls;
      throw boost::system::system_error(reset);
      co_return 0;
    };
  }
  void cancel() { signal.emit(asio::cancellation_type::terminal); }
};

bool is_operation_aborted(const std::exception_ptr& e) {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const boost::system::system_error& ex) {
    return ex.code() == asio::error::operation_aborted;
  } catch (...) {
    return false;
  }
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cancellation_from_inside_a_hook, hooked_call)

BOOST_AUTO_TEST_CASE(on_retry_ends_the_call_as_a_cancellation) {
  completion<error_code> done;
  const auto p = policy().on_retry([this](const auto&) { cancel(); });
  spawn(io, co_retry(failing_op(), p), done, &signal);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_TEST(!done.exception);
  BOOST_TEST((done.value == asio::error::operation_aborted));
  BOOST_TEST(calls == 1, "the op was called again after the cancellation");
}

BOOST_AUTO_TEST_CASE(on_retry_with_a_plain_op_throws_operation_aborted_to_the_caller) {
  completion<int> done;
  const auto p = policy().on_retry([this](const auto&) { cancel(); });
  spawn(io, co_retry(failing_plain_op(), p), done, &signal);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_TEST(is_operation_aborted(done.exception));
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(the_logger_ends_the_call_as_a_cancellation) {
  completion<error_code> done;
  const auto p = policy().logger([this](std::string_view) { cancel(); });
  spawn(io, co_retry(failing_op(), p), done, &signal);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == asio::error::operation_aborted));
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(on_timeout_inside_a_retry_ends_the_call_as_a_cancellation) {
  completion<error_code> done;
  const auto call = resilience::pipeline(
      policy(), resilience::timeout(50ms).clock(clock).on_timeout([this](const auto&) { cancel(); }));
  spawn(io,
        call([this]() -> asio::awaitable<error_code> {
          ++calls;
          auto timer = clock.make_timer(co_await asio::this_coro::executor);
          timer.expires_after(1s);
          auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
          co_return ec;
        }),
        done, &signal);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == asio::error::operation_aborted));
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(a_breaker_callback_inside_a_retry_ends_the_call_as_a_cancellation) {
  completion<error_code> done;
  resilience::basic_circuit_breaker<manual_clock> breaker{
      resilience::breaker_options{}.consecutive_failures(1).on_state_change([this](const auto&) { cancel(); }),
      clock};
  const auto call = resilience::pipeline(policy(), std::ref(breaker));
  spawn(io, call(failing_op()), done, &signal);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_TEST((done.value == asio::error::operation_aborted));
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(a_hook_that_throws, hooked_call)

BOOST_AUTO_TEST_CASE(on_retry_throwing_becomes_the_outcome) {
  completion<error_code> done;
  const auto p = policy().on_retry([](const auto&) { throw std::runtime_error("hook failed"); });
  spawn(io, co_retry(failing_op(), p), done);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "hook failed"; });
  BOOST_TEST(calls == 1, "no retry after the hook failed");
}

BOOST_AUTO_TEST_CASE(on_timeout_throwing_becomes_the_outcome) {
  completion<error_code> done;
  const auto t = resilience::timeout(50ms).clock(clock).on_timeout(
      [](const auto&) { throw std::runtime_error("hook failed"); });
  spawn(io,
        t([this]() -> asio::awaitable<error_code> {
          auto timer = clock.make_timer(co_await asio::this_coro::executor);
          timer.expires_after(1s);
          auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
          co_return ec;
        }),
        done);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_THROW(resilience::test::rethrow(done), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(on_deadline_throwing_becomes_the_outcome) {
  completion<error_code> done;
  int finished = 0;
  const auto d = resilience::basic_deadline_stage<manual_clock>(50ms, clock).on_deadline(
      [](const auto&) { throw std::runtime_error("hook failed"); });
  spawn(io,
        d([this, &finished]() -> asio::awaitable<error_code> {
          auto timer = clock.make_timer(co_await asio::this_coro::executor);
          timer.expires_after(1s);
          auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
          ++finished;
          co_return ec;
        }),
        done);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "hook failed"; });
  BOOST_TEST(finished == 1, "the op was not awaited");
  BOOST_TEST((clock.now() == resilience::time_point{} + 50ms));
}

BOOST_AUTO_TEST_CASE(on_budget_refused_throwing_becomes_the_outcome) {
  // Two tokens, retries only above one: the first failure spends the budget.
  resilience::retry_token_budget budget{2, 0.1};
  completion<error_code> done;
  const auto p = policy().budget(budget).on_budget_refused(
      [](const resilience::budget_refusal&) { throw std::runtime_error("hook failed"); });
  spawn(io, co_retry(failing_op(), p), done);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error,
                        [](const auto& e) { return std::string(e.what()) == "hook failed"; });
  BOOST_TEST(calls == 1, "retried after the hook threw");
  BOOST_TEST(budget.refusals() == 1u);
}

namespace {

using resilience::circuit_state;

bool is_hook_failure(const std::runtime_error& e) { return std::string(e.what()) == "hook failed"; }

// A breaker on virtual time whose callbacks throw while `throwing` is set.
struct throwing_breaker {
  manual_clock& clock;
  bool throwing = true;
  int state_changes = 0;
  int rejections = 0;
  resilience::basic_circuit_breaker<manual_clock> breaker;

  explicit throwing_breaker(manual_clock& c, resilience::breaker_options o = {})
      : clock(c),
        breaker(o.consecutive_failures(1)
                    .open_duration(1s)
                    .on_state_change([this](const auto&) {
                      ++state_changes;
                      if (throwing) throw std::runtime_error("hook failed");
                    })
                    .on_rejection([this](const auto&) {
                      ++rejections;
                      if (throwing) throw std::runtime_error("hook failed");
                    }),
                clock) {}
};

}  // namespace

BOOST_AUTO_TEST_CASE(on_state_change_throwing_on_opening_becomes_the_outcome_and_the_breaker_opens) {
  throwing_breaker b(clock);
  completion<error_code> done;
  spawn(io, b.breaker(failing_op()), done);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error, is_hook_failure);
  BOOST_TEST((b.breaker.state() == circuit_state::open));
  BOOST_TEST(b.state_changes == 1);
}

BOOST_AUTO_TEST_CASE(on_rejection_throwing_becomes_the_outcome_and_the_op_is_not_called) {
  throwing_breaker b(clock);
  b.throwing = false;
  b.breaker.try_acquire().record_failure();
  b.throwing = true;
  completion<error_code> done;
  spawn(io, b.breaker(failing_op()), done);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_TEST(done.times == 1);
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error, is_hook_failure);
  BOOST_TEST(calls == 0);
  BOOST_TEST(b.rejections == 1);
}

BOOST_AUTO_TEST_CASE(a_throw_on_the_way_to_half_open_gives_the_probe_back) {
  throwing_breaker b(clock);
  b.throwing = false;
  b.breaker.try_acquire().record_failure();
  clock.advance(1s);
  b.throwing = true;
  completion<error_code> done;
  spawn(io, b.breaker(failing_op()), done);
  BOOST_CHECK_NO_THROW(clock.run(io));
  BOOST_CHECK_EXCEPTION(resilience::test::rethrow(done), std::runtime_error, is_hook_failure);
  BOOST_TEST(calls == 0);
  BOOST_TEST((b.breaker.state() == circuit_state::half_open));
  // The probe slot is free again: the next call is the probe.
  b.throwing = false;
  auto probe = b.breaker.try_acquire();
  BOOST_TEST(probe.is_probe());
  probe.record_success();
  BOOST_TEST((b.breaker.state() == circuit_state::closed));
}

BOOST_AUTO_TEST_CASE(a_throw_on_closing_becomes_the_probes_outcome_and_the_breaker_closes) {
  throwing_breaker b(clock);
  b.throwing = false;
  b.breaker.try_acquire().record_failure();
  clock.advance(1s);
  auto probe = b.breaker.try_acquire();
  BOOST_REQUIRE(probe.is_probe());
  b.throwing = true;
  BOOST_CHECK_EXCEPTION(probe.record_success(), std::runtime_error, is_hook_failure);
  BOOST_TEST((b.breaker.state() == circuit_state::closed));
  b.throwing = false;
  BOOST_CHECK_NO_THROW(probe.record_failure());  // recorded once already: a no-op
  BOOST_TEST((b.breaker.state() == circuit_state::closed));
}

BOOST_AUTO_TEST_CASE(manual_control_throws_what_the_callback_threw_after_the_transition) {
  throwing_breaker b(clock);
  BOOST_CHECK_EXCEPTION(b.breaker.isolate(), std::runtime_error, is_hook_failure);
  BOOST_TEST((b.breaker.state() == circuit_state::isolated));
  BOOST_CHECK_EXCEPTION(b.breaker.reset(), std::runtime_error, is_hook_failure);
  BOOST_TEST((b.breaker.state() == circuit_state::closed));
}

BOOST_AUTO_TEST_CASE(an_error_is_delivered_once_and_never_to_a_later_call) {
  throwing_breaker b(clock);
  BOOST_CHECK_THROW(b.breaker.try_acquire().record_failure(), std::runtime_error);
  b.throwing = false;
  // Same thread, same breaker and another one: nothing left over.
  BOOST_CHECK_NO_THROW(b.breaker.try_acquire());
  resilience::basic_circuit_breaker<manual_clock> other{resilience::breaker_options{}, clock};
  BOOST_CHECK_NO_THROW(other.try_acquire().record_failure());
  BOOST_CHECK_NO_THROW(b.breaker.reset());
}

BOOST_AUTO_TEST_CASE(a_callback_calling_the_breaker_gets_its_own_error) {
  manual_clock c;
  int inner_caught = 0;
  resilience::basic_circuit_breaker<manual_clock>* self = nullptr;
  resilience::basic_circuit_breaker<manual_clock> breaker{
      resilience::breaker_options{}.consecutive_failures(1).on_state_change([&](const resilience::state_change& e) {
        if (e.to == circuit_state::isolated) throw std::runtime_error("inner");
        if (e.to == circuit_state::open) {
          try {
            self->isolate();  // its callback throws "inner", delivered here
          } catch (const std::runtime_error& ex) {
            if (std::string(ex.what()) == "inner") ++inner_caught;
          }
          throw std::runtime_error("hook failed");
        }
      }),
      c};
  self = &breaker;
  BOOST_CHECK_EXCEPTION(breaker.try_acquire().record_failure(), std::runtime_error, is_hook_failure);
  BOOST_TEST(inner_caught == 1);
  BOOST_TEST((breaker.state() == circuit_state::isolated));
}

BOOST_AUTO_TEST_CASE(an_open_duration_generator_that_throws_opens_for_the_fixed_duration) {
  resilience::basic_circuit_breaker<manual_clock> breaker{
      resilience::breaker_options{}
          .consecutive_failures(1)
          .open_duration(3s)
          .open_duration([](std::uint32_t) -> resilience::duration { throw std::runtime_error("hook failed"); }),
      clock};
  BOOST_CHECK_EXCEPTION(breaker.try_acquire().record_failure(), std::runtime_error, is_hook_failure);
  BOOST_TEST((breaker.state() == circuit_state::open));
  BOOST_TEST((breaker.time_until_probe() == resilience::duration(3s)));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(temporaries)

// Each awaitable outlives the full-expression that made it: what it needs
// must live in its own frame.
BOOST_AUTO_TEST_CASE(co_retry_with_the_default_policy) {
  asio::io_context io;
  completion<int> done;
  int calls = 0;
  auto call = co_retry([&]() -> asio::awaitable<int> {
    ++calls;
    co_return 7;
  });
  spawn(io, std::move(call), done);
  io.run();
  BOOST_TEST(done.times == 1);
  BOOST_TEST(*done.value == 7);
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(co_retry_with_the_default_policy_gives_up_on_cancellation) {
  asio::io_context io;
  completion<error_code> done;
  int calls = 0;
  auto call = co_retry([&]() -> asio::awaitable<error_code> {
    ++calls;
    co_return asio::error::operation_aborted;
  });
  spawn(io, std::move(call), done);
  io.run();
  BOOST_TEST(done.times == 1);
  BOOST_TEST((*done.value == asio::error::operation_aborted));
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(a_temporary_timeout_stage) {
  asio::io_context io;
  manual_clock clock;
  completion<error_code> done;
  auto call = resilience::timeout(100ms).clock(clock)([&]() -> asio::awaitable<error_code> {
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(1s);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ec;
  });
  spawn(io, std::move(call), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((*done.value == resilience::error::timeout));
}

BOOST_AUTO_TEST_CASE(a_temporary_deadline_stage) {
  asio::io_context io;
  manual_clock clock;
  completion<error_code> done;
  auto call = resilience::deadline_stage(100ms).clock(clock)([&]() -> asio::awaitable<error_code> {
    auto timer = clock.make_timer(co_await asio::this_coro::executor);
    timer.expires_after(1s);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return ec;
  });
  spawn(io, std::move(call), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((*done.value == resilience::error::deadline_exceeded));
}

BOOST_AUTO_TEST_CASE(a_temporary_adaptive_timeout_stage) {
  asio::io_context io;
  manual_clock clock;
  completion<error_code> done;
  auto call = resilience::adaptive_timeout(resilience::latency_tracker{
                                               resilience::latency_tracker_options{}.bounds(10ms, 1s).initial(100ms)})
                  .clock(clock)([&]() -> asio::awaitable<error_code> {
                    auto timer = clock.make_timer(co_await asio::this_coro::executor);
                    timer.expires_after(1s);
                    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
                    co_return ec;
                  });
  spawn(io, std::move(call), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST((*done.value == resilience::error::timeout));
}

BOOST_AUTO_TEST_CASE(a_temporary_pipeline) {
  asio::io_context io;
  manual_clock clock;
  completion<error_code> done;
  int calls = 0;
  auto call = resilience::pipeline(retry_policy{}.max_attempts(2).backoff(backoff::constant(10ms).with_jitter(resilience::jitter::none)).clock(clock),
                                   resilience::timeout(100ms).clock(clock))([&]() -> asio::awaitable<error_code> {
    ++calls;
    co_return reset;
  });
  spawn(io, std::move(call), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(calls == 2);
}

BOOST_AUTO_TEST_CASE(a_temporary_policy_run_as_a_stage) {
  asio::io_context io;
  manual_clock clock;
  completion<error_code> done;
  int calls = 0;
  auto call = retry_policy{}.max_attempts(3).backoff(backoff::constant(10ms).with_jitter(resilience::jitter::none)).clock(clock).run(
      [&]() -> asio::awaitable<error_code> {
        ++calls;
        co_return reset;
      });
  spawn(io, std::move(call), done);
  clock.run(io);
  BOOST_TEST(done.times == 1);
  BOOST_TEST(calls == 3);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// Runs one handler, moving virtual time to the next expiry when none is
// ready. False once there is nothing left to do.
bool step(asio::io_context& io, const manual_clock& clock) {
  for (;;) {
    if (io.stopped()) io.restart();
    if (io.poll_one() != 0) return true;
    const auto next = clock.next_expiry();
    if (!next) return false;
    clock.advance_to(*next);
  }
}

// Sleeps `work` of virtual time; when cancelled, takes one more turn of the
// executor before it reports it, so the caller's timer side and the op's end
// can come in either order.
asio::awaitable<error_code> sleep_virtual(manual_clock clock, resilience::duration work) {
  live frame(live::ops);
  auto timer = clock.make_timer(co_await asio::this_coro::executor);
  timer.expires_after(work);
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (ec) {
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
  }
  co_return ec;
}

// Destroys the context after each number of handlers a whole call takes:
// whatever point the call has reached, every frame and handler is freed.
template <class Make>
void destroy_context_at_every_step(Make make) {
  std::size_t steps = 0;
  {
    manual_clock clock;
    asio::io_context io;
    int completed = 0;
    asio::co_spawn(io, make(clock), [&](std::exception_ptr, auto&&...) { ++completed; });
    while (step(io, clock)) ++steps;
    BOOST_REQUIRE_EQUAL(completed, 1);
  }
  BOOST_REQUIRE_GT(steps, 2u);
  for (std::size_t k = 0; k < steps; ++k) {
    live::ops = live::handlers = 0;
    int completed = 0;
    {
      manual_clock clock;
      asio::io_context io;
      asio::co_spawn(io, make(clock), [&completed, guard = live(live::handlers)](std::exception_ptr, auto&&...) {
        ++completed;
      });
      for (std::size_t i = 0; i < k; ++i) BOOST_REQUIRE(step(io, clock));
    }
    BOOST_TEST(completed <= 1);
    BOOST_TEST(live::ops == 0, "op frames left after " << k << " of " << steps << " steps");
    BOOST_TEST(live::handlers == 0, "handlers left after " << k << " of " << steps << " steps");
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(context_destroyed_at_every_step)

BOOST_AUTO_TEST_CASE(a_timeout_that_fires) {
  destroy_context_at_every_step([](manual_clock clock) {
    return resilience::timeout(100ms).clock(clock)([clock] { return sleep_virtual(clock, 1s); });
  });
}

BOOST_AUTO_TEST_CASE(a_timeout_the_op_beats) {
  destroy_context_at_every_step([](manual_clock clock) {
    return resilience::timeout(100ms).clock(clock)([clock] { return sleep_virtual(clock, 50ms); });
  });
}

BOOST_AUTO_TEST_CASE(a_pipeline_with_retries) {
  destroy_context_at_every_step([](manual_clock clock) {
    auto call = resilience::pipeline(
        resilience::basic_deadline_stage<manual_clock>(1s, clock),
        retry_policy{}.max_attempts(3).backoff(backoff::constant(100ms).with_jitter(resilience::jitter::none)).clock(clock),
        resilience::timeout(200ms).clock(clock));
    return std::move(call)([clock] { return sleep_virtual(clock, 300ms); });
  });
}

BOOST_AUTO_TEST_SUITE_END()
