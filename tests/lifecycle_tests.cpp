// Calls that end in unusual ways: their execution context destroyed while
// they are suspended, their own cancellation emitted from inside a hook, a
// hook that throws, a stage or policy that was a temporary.
#include "support.hpp"

#include <resilience/adaptive_timeout.hpp>
#include <resilience/circuit_breaker.hpp>
#include <resilience/deadline.hpp>
#include <resilience/error.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/timeout.hpp>
#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

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

// resilience::test::destroy_context_mid_calls, with every call started and
// `live_ops` op frames alive (one a call by default) when the context goes.
template <class Make>
void destroy_context_with_calls_suspended(Make make, int calls = 10000, int live_ops = -1) {
  if (live_ops < 0) live_ops = calls;
  resilience::test::destroy_context_mid_calls(calls, make, [&](int started) {
    BOOST_REQUIRE_EQUAL(started, calls);
    BOOST_REQUIRE_EQUAL(live::ops, live_ops);
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

}  // namespace

BOOST_AUTO_TEST_SUITE(context_destroyed_mid_call)

BOOST_AUTO_TEST_CASE(in_a_timeout) {
  const auto stage = resilience::timeout(30min);
  destroy_context_with_calls_suspended([&](int* s) { return stage([s] { return sleep_an_hour(s); }); });
}

BOOST_AUTO_TEST_CASE(in_a_deadline) {
  const auto stage = resilience::deadline_stage(30min);
  destroy_context_with_calls_suspended([&](int* s) { return stage([s] { return sleep_an_hour(s); }); });
}

BOOST_AUTO_TEST_CASE(in_an_adaptive_timeout) {
  const auto stage = resilience::adaptive_timeout(resilience::latency_tracker{
      resilience::latency_tracker_options{}.bounds(1min, 30min).initial(30min)});
  destroy_context_with_calls_suspended([&](int* s) { return stage([s] { return sleep_an_hour(s); }); });
}

BOOST_AUTO_TEST_CASE(in_a_breaker) {
  resilience::circuit_breaker breaker;
  destroy_context_with_calls_suspended([&](int* s) { return breaker([s] { return sleep_an_hour(s); }); });
  BOOST_TEST(breaker.metrics().probes_in_flight == 0u);
}

BOOST_AUTO_TEST_CASE(in_a_retry_attempt) {
  const auto policy = retry_policy{}.max_attempts(3);
  destroy_context_with_calls_suspended([&](int* s) { return co_retry([s] { return sleep_an_hour(s); }, policy); });
}

BOOST_AUTO_TEST_CASE(in_a_retry_backoff) {
  // The op fails at once; the call then sleeps an hour before its retry.
  const auto policy = retry_policy{}.max_attempts(2).backoff(backoff::constant(1h));
  destroy_context_with_calls_suspended([&](int* s) {
    return co_retry(
        [s]() -> asio::awaitable<error_code> {
          ++*s;
          co_return asio::error::connection_reset;
        },
        policy);
  }, 10000, 0);
}

BOOST_AUTO_TEST_CASE(in_a_pipeline) {
  const auto call = resilience::pipeline(resilience::deadline_stage(50min), retry_policy{}.max_attempts(3),
                                         resilience::timeout(30min));
  destroy_context_with_calls_suspended([&](int* s) { return call([s] { return sleep_an_hour(s); }); });
}

BOOST_AUTO_TEST_CASE(in_a_pipeline_with_a_breaker) {
  resilience::circuit_breaker breaker;
  const auto call = resilience::pipeline(retry_policy{}.max_attempts(3), breaker, resilience::timeout(30min));
  destroy_context_with_calls_suspended([&](int* s) { return call([s] { return sleep_an_hour(s); }); });
  BOOST_TEST(breaker.metrics().probes_in_flight == 0u);
}

BOOST_AUTO_TEST_CASE(a_probe_interrupted_by_shutdown_gives_its_permit_back) {
  half_open_breaker h;
  const auto call = resilience::pipeline(std::ref(h.breaker), resilience::timeout(30min).clock(h.clock));
  destroy_context_with_calls_suspended([&](int* s) { return call([s] { return sleep_an_hour(s); }); }, 1);
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
  auto call = resilience::pipeline(retry_policy{}.max_attempts(2).backoff(backoff::constant(10ms)).clock(clock),
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
  auto call = retry_policy{}.max_attempts(3).backoff(backoff::constant(10ms)).clock(clock).run(
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
        retry_policy{}.max_attempts(3).backoff(backoff::constant(100ms)).clock(clock),
        resilience::timeout(200ms).clock(clock));
    return std::move(call)([clock] { return sleep_virtual(clock, 300ms); });
  });
}

BOOST_AUTO_TEST_SUITE_END()
