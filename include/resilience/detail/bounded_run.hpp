// Runs an op that must finish by a point in time: the engine under the
// timeout and deadline stages. Not public API.
//
// The op runs as a child thread of execution (co_spawn) whose cancellation
// slot is a signal this frame owns. Two things emit that signal: a timer
// armed for the bound, and the caller's own cancellation, forwarded. The frame
// always waits for the op to finish and for the timer's handler to have run,
// so nothing outlives it. Asio offers no public way to cancel an op running
// in the caller's own thread of execution from a timer, hence the child.
//
// The timer is armed only if the op is still running once co_spawn has run
// it up to its first suspension. Its handler runs on the caller's executor;
// on a multi-threaded io_context that executor must be a strand, as for any
// Asio object shared between handlers.
#pragma once

#include <resilience/context.hpp>
#include <resilience/stage.hpp>
#include <resilience/detail/local_bound.hpp>
#include <resilience/detail/parked_joins.hpp>
#include <resilience/detail/stage_support.hpp>
#include <resilience/detail/timer_queue.hpp>
#include <resilience/error.hpp>
#include <resilience/detail/event_support.hpp>
#include <resilience/expiry_event.hpp>
#include <resilience/outcome.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cassert>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace resilience::detail {

// co_spawn hands back T() with an exception, so a T that cannot be default
// constructed travels in an optional.
template <class T>
inline constexpr bool spawn_boxed = !std::is_void_v<T> && !std::is_default_constructible_v<T>;
template <class T>
using spawned_t = std::conditional_t<spawn_boxed<T>, std::optional<T>, T>;

// The value a spawned child handed back (as_tuple: exception, value).
template <class T, class Finished>
T& spawned_value(Finished& finished) noexcept {
  if constexpr (spawn_boxed<T>) {
    return *std::get<1>(finished);
  } else {
    return std::get<1>(finished);
  }
}

// What co_spawn hands over, as an outcome.
template <class T, class... V>
outcome<T> spawned_outcome(const std::exception_ptr& e, V&&... v) {
  if (e) return outcome<T>::from_exception(e);
  if constexpr (std::is_void_v<T>) {
    return outcome<T>::from_value({});
  } else if constexpr (spawn_boxed<T>) {
    return outcome<T>::from_value(std::move(*(v, ...)));
  } else {
    return outcome<T>::from_value(std::move(v)...);
  }
}

template <class T>
struct spawn_signature {
  using type = void(std::exception_ptr, spawned_t<T>);
};
template <>
struct spawn_signature<void> {
  using type = void(std::exception_ptr);
};

// The child's body: the op, then a flag that says its body has ended (by
// value or by exception). The flag lives in the parent's frame.
template <class T, class Executor>
boost::asio::awaitable<spawned_t<T>, Executor> run_and_flag(boost::asio::awaitable<T, Executor> op, bool* ended) {
  struct flag_on_exit {
    bool* ended;
    ~flag_on_exit() { *ended = true; }
  } guard{ended};
  co_return co_await std::move(op);
}

// The cancellation type a bounding stage uses when time runs out; `stage`
// names the stage in the error.
inline boost::asio::cancellation_type checked_cancellation(boost::asio::cancellation_type type, const char* stage) {
  if (type == boost::asio::cancellation_type::none)
    throw std::invalid_argument(std::string(stage) + ": cancellation type must not be none");
  return type;
}


// GCC 12, inlining this coroutine's start into a caller, may take the
// frame's own operator delete for a mismatch of its operator new
// (-Wmismatched-new-delete): both are Asio's frame allocator.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
// Runs op(ctx) for at most `limit` from now and never past ctx.deadline. If
// the bound passes first, the op is cancelled with `type` and waited for; a
// failure it then reports becomes `own_reason` (when `limit` was the tighter
// bound) or `deadline_exceeded` (when ctx.deadline was). A success still
// wins: the work was done. A cancellation of the caller is final and comes
// back as operation_aborted.
template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> run_bounded(Op op, context ctx, Clock clock, duration limit,
                                                boost::asio::cancellation_type type,
                                                error own_reason = error::timeout,
                                                shared_hook<void(const expiry_event&)> on_expiry = {}) {
  namespace asio = boost::asio;
  const auto caller = co_await asio::this_coro::cancellation_state;
  if (caller.cancelled() != asio::cancellation_type::none)
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();

  const clock_anchor<Clock> anchor(clock);
  anchor.attach(ctx);
  const time_point now = clock.now();
  const time_point own = saturating_add(now, limit);
  const bool deadline_first = ctx.deadline <= own;
  const time_point fire_at = deadline_first ? ctx.deadline : own;
  if (fire_at == time_point::max()) co_return co_await invoke_op(op, ctx);  // nothing bounds it
  const error_code reason = deadline_first ? error::deadline_exceeded : own_reason;
  if (fire_at <= now) co_return outcome<T>::from_error(reason).get();
  // Bound by a deadline an enclosing stage watches: that stage reports its expiry.
  const bool reported_outside = deadline_first && ctx.expiry_reported_outside();
  ctx.deadline = fire_at;
  ctx.watched_deadline = fire_at;
  const auto executor = co_await asio::this_coro::executor;

  local_bound<Clock, Executor> bound;
  bool op_ended = false;
  // While the op runs, the caller's cancellation reaches it through the bound.
  bound.forward(caller);

  // co_spawn runs the child at once, up to its first suspension. Only an op
  // still running after that needs the bound armed: one that has already
  // ended could not have been interrupted anyway, and skips the timer.
  using signature = typename spawn_signature<T>::type;
  asio::as_tuple_t<asio::use_awaitable_t<Executor>> token{asio::use_awaitable_t<Executor>{}};
  auto finished = co_await asio::async_initiate<decltype(token), signature>(
      [&](auto handler) {
        asio::co_spawn(executor, run_and_flag(invoke_op(op, ctx), &op_ended),
                       asio::bind_cancellation_slot(bound.slot(), std::move(handler)));
        if (!op_ended) bound.arm(clock, executor, fire_at, type);
      },
      token);
  // Unless the timer's side is known to be over, wait for it: it refers to
  // this frame.
  if (bound.disarm()) {
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await bound.wait_timer_side();
    co_await asio::this_coro::throw_if_cancelled(throws);
  }

  if (caller.cancelled() != asio::cancellation_type::none)
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();

  // An op that gave up at the deadline this bound put in its context (a
  // chaos or backoff wait cut short there, a stage that honours it) answers
  // at the instant the timer would fire, and may beat it: it ran out of this
  // bound's time, so the bound's reason and event stand, not its
  // deadline_exceeded.
  const auto ran_out = [&](const error_code& ec) {
    return ec == error::deadline_exceeded && clock.now() >= fire_at;
  };
  const auto& error = std::get<0>(finished);
  bool expired = bound.fired();
  if (!expired && !error) {  // the common case: answered in time
    if constexpr (std::is_void_v<T>) {
      co_return;
    } else {
      auto& value = spawned_value<T>(finished);
      if constexpr (outcome_traits<T>::has_error_channel) expired = ran_out(outcome_traits<T>::error(value));
      if (!expired) co_return std::move(value);
    }
  }
  auto result = std::apply([](auto&&... parts) { return spawned_outcome<T>(std::move(parts)...); }, finished);
  if (!expired) expired = ran_out(result.error());
  if (expired && on_expiry) on_expiry(expiry_event{reason, fire_at, ctx.attempt});
  if (expired && result.failed()) {
    // To the sink only when the bound ended the call: a success that came
    // late still wins, and is no expiry to count.
    if (!reported_outside) ctx.report(expiry_event_of(reason, ctx.attempt));
    co_return outcome<T>::from_error(reason).get();
  }
  co_return std::move(result).get();
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace resilience::detail
