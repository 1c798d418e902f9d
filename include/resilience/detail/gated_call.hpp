// The call of a stage that admits a call, runs it, and tells its shared
// state how it ended (a circuit breaker, an adaptive throttle): the one
// coroutine they share. Not public API.
//
// A Gate, held in the call's frame, has
//   static constexpr bool shortcut;  // a success needs no outcome built (its classifier's success_verdict)
//   bool admit(const context&);      // false: refused (the refusal is reported already)
//   template <class T> T refusal();  // the refused call's result, or it throws
//   void succeeded(const context&);  // the success a shortcut skips the outcome of
//   template <class T> void settle(const outcome<T>&, const context&);  // every other end
// A frame destroyed unresumed (its execution context shut down) tells the
// gate nothing: what the gate holds (a breaker's permit) gives itself back.
#pragma once

#include <resilience/context.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/outcome.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>

#include <optional>
#include <type_traits>
#include <utility>

namespace resilience::detail {

template <class T, class Executor, class Op, class Gate>
boost::asio::awaitable<T, Executor> gated_call(Op op, Gate gate, context ctx) {
  if (!gate.admit(ctx)) {
    // Throwing off for the turn (see yield_after_refusal).
    const bool throws = co_await boost::asio::this_coro::throw_if_cancelled();
    co_await boost::asio::this_coro::throw_if_cancelled(false);
    co_await yield_after_refusal<Executor>(throws);
    co_return gate.template refusal<T>();
  }
  std::optional<outcome<T>> result;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(op, ctx);
      if constexpr (Gate::shortcut) {
        gate.succeeded(ctx);
        co_return;
      }
      result.emplace(outcome<T>::from_value({}));
    } else {
      T value = co_await invoke_op(op, ctx);
      if constexpr (Gate::shortcut) {
        if (!outcome_traits<T>::error(value).failed()) {
          gate.succeeded(ctx);
          co_return value;
        }
      }
      result.emplace(std::in_place, std::move(value));
    }
  } catch (...) {
    result.emplace(outcome<T>::from_current_exception());
  }
  gate.settle(*result, ctx);
  co_return std::move(*result).get();
}

}  // namespace resilience::detail
