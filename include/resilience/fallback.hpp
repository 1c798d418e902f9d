// resilience/fallback.hpp — a substitute answer when a call fails.
//
//   // a fixed value:
//   const auto cached_price = resilience::fallback_value(price{0});
//   price p = co_await cached_price([&] { return quotes.async_price(id); });
//   // another op, told what failed; it may run a pipeline of its own:
//   const auto from_replica = resilience::fallback_to(
//       [&](const resilience::outcome<price>& failed, const resilience::context& ctx) {
//         return replica_call([&] { return replica.async_price(id); }, ctx);
//       }).on_fallback([](const resilience::outcome<price>& o) { count_fallback(o.error()); });
//   // as a stage, outermost so it sees what retries and timeouts gave up with:
//   //   resilience::pipeline(from_replica, retry_policy, attempt_timeout)
//
// Which outcomes are replaced: those its classifier selects (handle_if), by
// default every failure — an error in T's channel or an exception — except a
// cancellation. A cancellation is never replaced, whatever the classifier
// says: cancelling the caller is final, and the call then ends with
// operation_aborted (in T's channel, or thrown as system_error when T has none).
//
// The fallback op is called with the failed outcome and the context, or with
// either, or with nothing, and returns an awaitable of the same executor
// whose value converts to T (void for T = void). Its own failure is the
// call's result: nothing falls back twice. The failed outcome it is given
// lives until it completes.
//
// on_fallback(hook) runs before the substitute is produced, with the
// outcome it replaces (and the context, if the hook takes it). What a hook
// or the fallback op throws becomes the call's outcome; a hook that cancels
// the caller ends the call with operation_aborted, the fallback op not called.
//
// A stage is a value: copy it, share it between threads (its op and hooks
// must then be safe to call concurrently). Each call holds a copy of the
// stage (a temporary one is moved in); run_referenced() refers to it.
#pragma once

#include <resilience/classifier.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/event_support.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/outcome.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/this_coro.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace resilience {

// The default on_fallback: nothing.
struct no_fallback_hook {
  template <class T>
  void operator()(const outcome<T>&) const noexcept {}
};

namespace detail {

// An empty std::function or a null function pointer given as a callable is a
// mistake best caught where it enters.
template <class F>
void require_callable(const F& f, const char* what) {
  if constexpr (std::is_pointer_v<F> || requires { f == nullptr; }) {
    if (f == nullptr) throw std::invalid_argument(std::string(what) + ": must not be empty");
  }
}

// What replaces a failure: a fixed value (none for void), or an op.
template <class V>
struct fallback_constant {
  V value;
};
template <>
struct fallback_constant<void> {};
template <class F>
struct fallback_op {
  F op;
};

template <class T, class F>
decltype(auto) invoke_fallback(const F& f, const outcome<T>& failed, const context& ctx) {
  if constexpr (std::is_invocable_v<const F&, const outcome<T>&, const context&>) {
    return f(failed, ctx);
  } else if constexpr (std::is_invocable_v<const F&, const outcome<T>&>) {
    return f(failed);
  } else if constexpr (std::is_invocable_v<const F&, const context&>) {
    return f(ctx);
  } else {
    static_assert(std::is_invocable_v<const F&>,
                  "a fallback op is callable as (const resilience::outcome<T>&, const resilience::context&), "
                  "(const resilience::outcome<T>&), (const resilience::context&) or (), T being the op's value type");
    return f();
  }
}

template <class T, class H>
void notify_fallback(const H& hook, const outcome<T>& replaced, const context& ctx) {
  if constexpr (std::is_invocable_v<const H&, const outcome<T>&, const context&>) {
    hook(replaced, ctx);
  } else {
    static_assert(std::is_invocable_v<const H&, const outcome<T>&>,
                  "on_fallback takes (const resilience::outcome<T>&) or "
                  "(const resilience::outcome<T>&, const resilience::context&)");
    hook(replaced);
  }
}

// The call's coroutines (impl/fallback.hpp).
template <class T, class Executor, class Op, class Held>
boost::asio::awaitable<T, Executor> fallback_call(Op op, Held held, context ctx);

}  // namespace detail

template <class Action, class Classifier = any_failure_or_refusal, class Hook = no_fallback_hook>
class basic_fallback : public value_stage_base<basic_fallback<Action, Classifier, Hook>> {
  template <class, class, class>
  friend class basic_fallback;

 public:
  using classifier_type = Classifier;

  explicit basic_fallback(Action action) : action_(std::move(action)) {}

  // Which outcomes are replaced: a classifier of either shape (classifier.hpp).
  // A cancellation never is.
  template <class C>
  basic_fallback<Action, C, Hook> handle_if(C c) const {
    detail::require_callable(c, "fallback: handle_if");
    return basic_fallback<Action, C, Hook>(action_, std::move(c), hook_);
  }

  // Called once per replaced outcome, before the substitute is produced.
  template <class H>
  basic_fallback<Action, Classifier, H> on_fallback(H h) const {
    detail::require_callable(h, "fallback: on_fallback");
    return basic_fallback<Action, Classifier, H>(action_, classifier_, std::move(h));
  }

  const Classifier& classifier() const noexcept { return classifier_; }
  const Hook& hook() const noexcept { return hook_; }
  const Action& action() const noexcept { return action_; }

  // The stage interface is value_stage_base's: run(op) holds a copy of this
  // stage (a temporary one is moved in), so the awaitable may outlive it;
  // run_referenced(op), what a pipeline holding the stage does, refers to it.

 private:
  friend value_stage_base<basic_fallback>;
  template <class T, class Executor, class Op, class Held>
  static constexpr auto call = &detail::fallback_call<T, Executor, Op, Held>;
  basic_fallback(Action a, Classifier c, Hook h) : action_(std::move(a)), classifier_(std::move(c)), hook_(std::move(h)) {}

  Action action_;
  [[no_unique_address]] Classifier classifier_{};
  [[no_unique_address]] Hook hook_{};
};

// A failure replaced by a copy of `value` (converted to the op's T).
template <class V>
basic_fallback<detail::fallback_constant<std::decay_t<V>>> fallback_value(V&& value) {
  return basic_fallback<detail::fallback_constant<std::decay_t<V>>>({std::forward<V>(value)});
}

// For a void op: the failure is dropped, the call succeeds.
inline basic_fallback<detail::fallback_constant<void>> fallback_value() {
  return basic_fallback<detail::fallback_constant<void>>({});
}

// A failure replaced by what `op` returns (see the top of this header).
template <class F>
basic_fallback<detail::fallback_op<F>> fallback_to(F op) {
  detail::require_callable(op, "fallback_to: op");
  return basic_fallback<detail::fallback_op<F>>({std::move(op)});
}

}  // namespace resilience

#include <resilience/impl/fallback.hpp>
