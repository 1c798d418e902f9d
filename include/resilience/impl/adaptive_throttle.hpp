// resilience/impl/adaptive_throttle.hpp — the coroutine of a throttled
// call. Included at the end of resilience/adaptive_throttle.hpp, which
// states the contract; not to be included on its own.
#pragma once

namespace resilience {
namespace detail {

// Whether a call may go now; a refusal goes to on_throttled, then to the
// call's sink.
inline bool throttle_admits(adaptive_throttle_core& core, time_point now, const context& ctx) {
  const auto refused = core.refuse(now);
  if (!refused) [[likely]]
    return true;
  const auto& hook = core.options().on_throttled();
  report_hooked(ctx, [&] { if (hook) hook(*refused); }, refusal_event(event_kind::throttled, error::throttled));
  return false;
}

template <class T, class Executor, class Op, class Classifier, class Clock>
boost::asio::awaitable<T, Executor> throttle_call(Op op, adaptive_throttle_core* core, const Clock* clock,
                                                  Classifier accepted, context ctx) {
  if (!throttle_admits(*core, detail::coarse_now(*clock), ctx)) {
    // Throwing off for the turn (see yield_after_refusal).
    const bool throws = co_await boost::asio::this_coro::throw_if_cancelled();
    co_await boost::asio::this_coro::throw_if_cancelled(false);
    co_await yield_after_refusal<Executor>(throws);
    co_return make_failure<T>(error::throttled);
  }
  // Counted once the outcome is known: a frame destroyed unresumed (its
  // execution context shut down) or a cancellation counts for nothing.
  std::optional<outcome<T>> result;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(op, ctx);
      if constexpr (judges_successes_as<Classifier, true>) {
        core->record(detail::coarse_now(*clock), true);
        co_return;
      }
      result.emplace(outcome<T>::from_value({}));
    } else {
      T value = co_await invoke_op(op, ctx);
      if constexpr (judges_successes_as<Classifier, true>) {
        if (!outcome_traits<T>::error(value).failed()) {
          core->record(detail::coarse_now(*clock), true);
          co_return value;
        }
      }
      result.emplace(std::in_place, std::move(value));
    }
  } catch (...) {
    result.emplace(outcome<T>::from_current_exception());
  }
  if (!result->cancelled()) {
    bool is_accept = false;
    try {
      is_accept = detail::classify(accepted, *result, ctx);
    } catch (...) {
      core->record(detail::coarse_now(*clock), false);  // still a request; the classifier's exception ends the call
      throw;
    }
    core->record(detail::coarse_now(*clock), is_accept);
  }
  co_return std::move(*result).get();
}

}  // namespace detail
}  // namespace resilience
