// resilience/impl/fallback.hpp — the coroutines of a call through a
// fallback stage. Included at the end of resilience/fallback.hpp, which states
// the contract; not to be included on its own.
#pragma once

namespace resilience {
namespace detail {

template <class T, class Executor, class Op, class Held>
boost::asio::awaitable<T, Executor> fallback_call(Op op, Held held, context ctx) {
  using Stage = std::remove_cvref_t<decltype(deref(held))>;
  const Stage* stage = &deref(held);
  namespace asio = boost::asio;
  using classifier = typename Stage::classifier_type;
  std::optional<outcome<T>> first;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(op, ctx);
      if constexpr (judges_successes_as<classifier, false>) co_return;
      first.emplace(outcome<T>::from_value({}));
    } else {
      T value = co_await invoke_op(op, ctx);
      // The success path: no outcome built when the classifier never
      // selects a success.
      if constexpr (judges_successes_as<classifier, false>) {
        if (!outcome_traits<T>::error(value).failed()) co_return value;
      }
      first.emplace(std::in_place, std::move(value));
    }
  } catch (...) {
    first.emplace(outcome<T>::from_current_exception());
  }
  // Cancellation is final: neither the caller's nor one the op reports is
  // replaced, and the caller's wins over any other failure. The hook may
  // cancel the caller too.
  const auto cancellation = co_await asio::this_coro::cancellation_state;
  const auto caller_cancelled = [&] { return cancellation.cancelled() != asio::cancellation_type::none; };
  bool ends_cancelled = caller_cancelled();
  if (!ends_cancelled) {
    if (first->cancelled() || !classify(stage->classifier(), *first, ctx)) co_return std::move(*first).get();
    notify_fallback(stage->hook(), *first, ctx);
    ctx.report(event_about(event_kind::fallback, *first, ctx.attempt));
    ends_cancelled = caller_cancelled();
  }
  if (ends_cancelled) {
    // Asio 1.81's co_spawn posts once after a coroutine that never
    // suspended, and that post throws out of io_context::run once the caller
    // is cancelled: yield first, with throwing off (as retry does).
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await yield_once<Executor>();
    co_await asio::this_coro::throw_if_cancelled(throws);
    if (first->failed()) co_return outcome<T>::from_error(asio::error::operation_aborted).get();
    co_return std::move(*first).get();  // a value the classifier selected: the work was done
  }
  const auto& action = stage->action();
  if constexpr (requires { action.op; }) {
    using A = std::remove_cvref_t<decltype(invoke_fallback(action.op, *first, ctx))>;
    static_assert(is_asio_awaitable<A>, "a fallback op must return boost::asio::awaitable<U, Executor>");
    using U = typename awaitable_parts<A>::value_type;
    static_assert(std::is_same_v<typename awaitable_parts<A>::executor_type, Executor>,
                  "a fallback op's awaitable must have the same executor type as the op it stands in for");
    if constexpr (std::is_void_v<T>) {
      static_assert(std::is_void_v<U>, "the fallback op of a void op must return awaitable<void>");
      co_await invoke_fallback(action.op, *first, ctx);
    } else {
      static_assert(std::is_convertible_v<U, T>, "the fallback op's value must convert to the op's value type");
      co_return T(co_await invoke_fallback(action.op, *first, ctx));
    }
  } else {
    co_return stand_in<T>(action);  // nothing, for a void op
  }
}

}  // namespace detail
}  // namespace resilience
