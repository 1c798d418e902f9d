// resilience/async_run.hpp — a call through a stage (a pipeline, or any one
// strategy) as an Asio initiating function, for code that is not a
// coroutine.
//
//   const auto call_backend = resilience::pipeline(retry, breaker, attempt_timeout);
//   // a callback
//   resilience::async_run(io.get_executor(), call_backend, [&] { return db.async_count(); },
//                         [](std::exception_ptr e, int rows) { ... });
//   // a future, in a test or a thread that is not the io_context's
//   std::future<int> rows = resilience::async_run(ex, call_backend, op, asio::use_future);
//   // deferred, started later or composed
//   auto later = resilience::async_run(ex, call_backend, op, asio::deferred);
//
// The call runs on `ex` as co_spawn runs a coroutine, and completes with
// co_spawn's signature: void(std::exception_ptr, T) for an op of value type
// T, void(std::exception_ptr) for a void op; the library's own errors come
// in T's error channel as they do for a coroutine caller, or as the
// exception when T has none. Cancellation through the token's cancellation
// slot (asio::bind_cancellation_slot, or what the token brings) is the
// caller's cancellation: final, operation_aborted. `parent` is the call's
// context, as for stage.run(op, parent).
//
// Lifetimes are run()'s: a named stage with shared state (a breaker, a
// limiter) is referred to and must outlive the call; a policy (retry,
// timeout, a pipeline) is copied into the call, or moved in when a
// temporary. A temporary stage with shared state does not compile.
#pragma once

#include <resilience/context.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/co_spawn.hpp>

#include <type_traits>
#include <utility>

namespace resilience {

template <class Stage, awaitable_op Op, class Executor, class Token>
auto async_run(const Executor& ex, Stage&& stage, Op op, const context& parent, Token&& token) {
  static_assert(std::is_lvalue_reference_v<Stage> || std::is_move_constructible_v<std::remove_cvref_t<Stage>>,
                "async_run: a stage with shared state (a breaker, a bulkhead, a limiter) must outlive the call: "
                "pass a named one, not a temporary");
  return boost::asio::co_spawn(ex, std::forward<Stage>(stage).run(std::move(op), parent), std::forward<Token>(token));
}

template <class Stage, awaitable_op Op, class Executor, class Token>
  requires(!std::is_same_v<std::remove_cvref_t<Token>, context>)
auto async_run(const Executor& ex, Stage&& stage, Op op, Token&& token) {
  return async_run(ex, std::forward<Stage>(stage), std::move(op), context{}, std::forward<Token>(token));
}

}  // namespace resilience
