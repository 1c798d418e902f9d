// resilience/impl/circuit_breaker.hpp — the coroutine of a call through a
// breaker. Included at the end of resilience/circuit_breaker.hpp, which
// states the contract; not to be included on its own.
#pragma once

namespace resilience {
namespace detail {

template <class T, class Executor, class Op, class Classifier>
boost::asio::awaitable<T, Executor> breaker_call(Op op, breaker_core* core, Classifier classify, context ctx) {
  breaker_permit permit = admit(*core, &ctx);
  if (!permit) {
    // Throwing off for the turn (see yield_after_refusal).
    const bool throws = co_await boost::asio::this_coro::throw_if_cancelled();
    co_await boost::asio::this_coro::throw_if_cancelled(false);
    co_await yield_after_refusal<Executor>(throws);
    if constexpr (!std::is_void_v<T> && outcome_traits<T>::has_error_channel) {
      co_return outcome_traits<T>::from_error(error::circuit_open);
    } else {
      throw circuit_open_error(permit.retry_after());
    }
  }
  // From here the permit goes back on every path: recorded below, or
  // released by its destructor if the classifier throws or the frame is
  // destroyed without resuming.
  std::optional<outcome<T>> result;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(op, ctx);
      if constexpr (judges_successes_as<Classifier, false>) {
        permit.record(false, ctx);
        co_return;
      }
      result.emplace(outcome<T>::from_value({}));
    } else {
      T value = co_await invoke_op(op, ctx);
      if constexpr (judges_successes_as<Classifier, false>) {
        if (!outcome_traits<T>::error(value).failed()) {
          permit.record(false, ctx);
          co_return value;
        }
      }
      result.emplace(std::in_place, std::move(value));
    }
  } catch (...) {
    result.emplace(outcome<T>::from_current_exception());
  }
  if (result->cancelled()) {
    permit.release();
  } else {
    const bool failed = detail::classify(classify, *result, ctx);
    permit.record(failed, ctx);
  }
  co_return std::move(*result).get();
}

}  // namespace detail
}  // namespace resilience
