// resilience/impl/circuit_breaker.hpp — the coroutine of a call through a
// breaker. Included at the end of resilience/circuit_breaker.hpp, which
// states the contract; not to be included on its own.
#pragma once

namespace resilience {
namespace detail {

// A call through the breaker, judged by `classify`: the permit goes back on
// every path, recorded, or released by its destructor if the classifier
// throws or the frame is destroyed without resuming.
template <class Classifier>
struct breaker_gate {
  breaker_core* core;
  [[no_unique_address]] Classifier classify;
  breaker_permit permit;

  static constexpr bool shortcut = judges_successes_as<Classifier, false>;

  bool admit(const context& ctx) {
    permit = detail::admit(*core, &ctx);
    return static_cast<bool>(permit);
  }
  template <class T>
  T refusal() const {
    if constexpr (!std::is_void_v<T> && outcome_traits<T>::has_error_channel) {
      return outcome_traits<T>::from_error(error::circuit_open);
    } else {
      throw circuit_open_error(permit.retry_after());
    }
  }
  void succeeded(const context& ctx) { permit.record(false, ctx); }
  template <class T>
  void settle(const outcome<T>& o, const context& ctx) {
    if (o.cancelled()) {
      permit.release();
    } else {
      permit.record(detail::classify(classify, o, ctx), ctx);
    }
  }
};

template <class T, class Executor, class Op, class Clock, class Classifier>
boost::asio::awaitable<T, Executor> stage_call(Op op, breaker_core* core, const Clock*, Classifier classify,
                                               const context& ctx) {
  return gated_call<T, Executor>(std::move(op), breaker_gate<Classifier>{core, std::move(classify), {}}, ctx);
}

template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, breaker_core* core, const Clock* clock, const context& ctx) {
  return stage_call<T, Executor>(std::move(op), core, clock, breaker_any_failure{}, ctx);
}

}  // namespace detail
}  // namespace resilience
