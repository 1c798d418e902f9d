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
// The timer's handler runs on the caller's executor. On a multi-threaded
// io_context that executor must be a strand, as for any Asio object shared
// between handlers.
#pragma once

#include <resilience/context.hpp>
#include <resilience/error.hpp>
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

#include <optional>
#include <type_traits>
#include <utility>

namespace resilience::detail {

template <class A>
struct awaitable_parts;
template <class T, class Executor>
struct awaitable_parts<boost::asio::awaitable<T, Executor>> {
  using value_type = T;
  using executor_type = Executor;
};

template <class Op>
decltype(auto) invoke_op(Op& op, const context& ctx) {
  if constexpr (std::is_invocable_v<Op&, const context&>) {
    return op(ctx);
  } else {
    static_assert(std::is_invocable_v<Op&>, "op must be callable with () or (const resilience::context&)");
    return op();
  }
}

template <class Op>
using op_awaitable_t = std::remove_cvref_t<decltype(invoke_op(std::declval<Op&>(), std::declval<const context&>()))>;
template <class Op>
using op_value_t = typename awaitable_parts<op_awaitable_t<Op>>::value_type;
template <class Op>
using op_executor_t = typename awaitable_parts<op_awaitable_t<Op>>::executor_type;

// co_spawn hands back T() with an exception, so a T that cannot be default
// constructed travels in an optional.
template <class T>
inline constexpr bool spawn_boxed = !std::is_void_v<T> && !std::is_default_constructible_v<T>;

template <class T, class Executor>
boost::asio::awaitable<std::optional<T>, Executor> boxed(boost::asio::awaitable<T, Executor> a) {
  co_return co_await std::move(a);
}

struct forward_cancellation {
  boost::asio::cancellation_signal* to;
  void operator()(boost::asio::cancellation_type type) { to->emit(type); }
};

template <class Executor>
struct bound_join {
  using waiter_type =
      typename boost::asio::async_result<boost::asio::use_awaitable_t<Executor>, void()>::handler_type;

  boost::asio::cancellation_signal child;
  boost::asio::cancellation_type type;
  std::optional<waiter_type> waiter;
  bool op_done = false;
  bool fired = false;
  bool timer_done = false;
};

// Runs op(ctx) for at most `limit` from now and never past ctx.deadline. If
// the bound passes first, the op is cancelled with `type` and waited for; a
// failure it then reports becomes `own_reason` (when `limit` was the tighter
// bound) or `deadline_exceeded` (when ctx.deadline was). A success still
// wins: the work was done. A cancellation of the caller is final and comes
// back as operation_aborted.
template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> run_bounded(Op op, context ctx, const Clock* clock, duration limit,
                                                boost::asio::cancellation_type type,
                                                error own_reason = error::timeout) {
  namespace asio = boost::asio;
  const auto caller = co_await asio::this_coro::cancellation_state;
  if (caller.cancelled() != asio::cancellation_type::none)
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();

  const time_point now = clock->now();
  const time_point own = saturating_add(now, limit);
  const bool deadline_first = ctx.deadline <= own;
  const time_point fire_at = deadline_first ? ctx.deadline : own;
  if (fire_at == time_point::max()) co_return co_await invoke_op(op, ctx);  // nothing bounds it
  const error_code reason = deadline_first ? error::deadline_exceeded : own_reason;
  if (fire_at <= now) co_return outcome<T>::from_error(reason).get();
  ctx.deadline = fire_at;
  const auto executor = co_await asio::this_coro::executor;

  bound_join<Executor> join;
  join.type = type;
  auto timer = clock->make_timer(executor);
  timer.expires_at(fire_at);
  timer.async_wait(asio::bind_executor(executor, [&join](const error_code& ec) {
    if (!ec && !join.op_done) {
      join.fired = true;
      join.child.emit(join.type);
    }
    join.timer_done = true;
    if (join.waiter) {
      auto resume = std::move(*join.waiter);
      join.waiter.reset();
      std::move(resume)();  // may end this frame: touch nothing after
    }
  }));

  // While the op runs, the caller's cancellation reaches it through `child`.
  if (caller.slot().is_connected()) caller.slot().template emplace<forward_cancellation>(&join.child);
  auto spawn_token = asio::bind_cancellation_slot(join.child.slot(), asio::as_tuple(asio::use_awaitable_t<Executor>{}));
  auto finished = co_await [&] {
    if constexpr (spawn_boxed<T>) {
      return asio::co_spawn(executor, boxed(invoke_op(op, ctx)), std::move(spawn_token));
    } else {
      return asio::co_spawn(executor, invoke_op(op, ctx), std::move(spawn_token));
    }
  }();
  join.op_done = true;
  if (caller.slot().is_connected()) caller.slot().clear();

  // Wait for the timer's handler, which refers to this frame. Asio would
  // throw from this co_await if the caller was cancelled; the wait is
  // mandatory, so switch that off around it.
  timer.cancel();
  if (!join.timer_done) {
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    asio::use_awaitable_t<Executor> token;
    co_await asio::async_initiate<asio::use_awaitable_t<Executor>, void()>(
        [&join](auto resume) { join.waiter.emplace(std::move(resume)); }, token);
    co_await asio::this_coro::throw_if_cancelled(throws);
  }

  if (caller.cancelled() != asio::cancellation_type::none)
    co_return outcome<T>::from_error(asio::error::operation_aborted).get();

  const auto& error = std::get<0>(finished);
  std::optional<outcome<T>> result;
  if (error) {
    result.emplace(outcome<T>::from_exception(error));
  } else if constexpr (std::is_void_v<T>) {
    result.emplace(outcome<T>::from_value({}));
  } else if constexpr (spawn_boxed<T>) {
    result.emplace(outcome<T>::from_value(std::move(*std::get<1>(finished))));
  } else {
    result.emplace(outcome<T>::from_value(std::move(std::get<1>(finished))));
  }
  if (join.fired && result->failed()) co_return outcome<T>::from_error(reason).get();
  co_return std::move(*result).get();
}

}  // namespace resilience::detail
