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

// A call through the throttle, judged by `accepted`: counted once its
// outcome is known (a cancellation counts for nothing).
template <class Classifier, class Clock>
struct throttle_gate {
  adaptive_throttle_core* core;
  const Clock* clock;
  [[no_unique_address]] Classifier accepted;

  static constexpr bool shortcut = judges_successes_as<Classifier, true>;

  bool admit(const context& ctx) { return throttle_admits(*core, coarse_now(*clock), ctx); }
  template <class T>
  T refusal() const {
    return make_failure<T>(error::throttled);
  }
  void succeeded(const context&) { core->record(coarse_now(*clock), true); }
  template <class T>
  void settle(const outcome<T>& o, const context& ctx) {
    if (o.cancelled()) return;
    bool is_accept = false;
    try {
      is_accept = detail::classify(accepted, o, ctx);
    } catch (...) {
      core->record(coarse_now(*clock), false);  // still a request; the classifier's exception ends the call
      throw;
    }
    core->record(coarse_now(*clock), is_accept);
  }
};

template <class T, class Executor, class Op, class Clock, class Classifier>
boost::asio::awaitable<T, Executor> stage_call(Op op, adaptive_throttle_core* core, const Clock* clock,
                                               Classifier accepted, const context& ctx) {
  return gated_call<T, Executor>(std::move(op), throttle_gate<Classifier, Clock>{core, clock, std::move(accepted)},
                                 ctx);
}

template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, adaptive_throttle_core* core, const Clock* clock,
                                               const context& ctx) {
  return stage_call<T, Executor>(std::move(op), core, clock, accepted_if_succeeded{}, ctx);
}

}  // namespace detail
}  // namespace resilience
