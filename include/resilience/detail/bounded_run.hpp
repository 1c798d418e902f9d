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
#include <resilience/detail/parked_joins.hpp>
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

// Room in a coroutine frame for a value that only a slow path makes: unlike
// a std::optional, the path that never makes it writes nothing. make() runs
// at most once (last in a try block, or in its handler); unless V is
// trivially destructible, a late<V>::owner declared right after it, in the
// scope that ends its life, destroys it.
template <class V>
union late {
  late() noexcept {}
  ~late() {}
  late(const late&) = delete;
  late& operator=(const late&) = delete;

  template <class... A>
  void make(A&&... a) {
    ::new (static_cast<void*>(&value)) V(std::forward<A>(a)...);
  }
  struct owner {
    V& value;
    ~owner() { value.~V(); }
  };

  V value;
};

// A hook that the copies of a stage share, so that copying a stage into a
// call never allocates: free when none is set, a reference count when one is.
template <class Signature>
class shared_hook {
 public:
  shared_hook() noexcept = default;
  shared_hook(std::function<Signature> f)
      : f_(f ? std::make_shared<const std::function<Signature>>(std::move(f)) : nullptr) {}

  explicit operator bool() const noexcept { return f_ != nullptr; }
  template <class... A>
  decltype(auto) operator()(A&&... a) const {
    assert(f_ && "shared_hook: test for a hook before calling it");
    return (*f_)(std::forward<A>(a)...);
  }
  std::function<Signature> function() const { return f_ ? *f_ : std::function<Signature>{}; }

 private:
  std::shared_ptr<const std::function<Signature>> f_;
};

// Runs a stage that something longer-lived holds (a pipeline, or a call's
// own frame): by reference when the stage would otherwise copy itself into
// the call.
template <class S, class Op>
auto run_held_stage(const S& s, Op op, const context& ctx) {
  if constexpr (requires { s.run_referenced(std::move(op), ctx); }) {
    return s.run_referenced(std::move(op), ctx);
  } else {
    return s.run(std::move(op), ctx);
  }
}

// Runs op through a stage that this frame owns: a temporary stage moved in,
// or a named one copied in, so that the awaitable never refers to a stage
// that may be gone.
template <class T, class Executor, class Held, class Op>
boost::asio::awaitable<T, Executor> run_owned(Held stage, Op op, context ctx) {
  co_return co_await run_held_stage(deref(stage), std::move(op), ctx);
}

template <class Stage, class Op>
  requires(!std::is_lvalue_reference_v<Stage>)
auto run_owning(Stage&& stage, Op op, const context& ctx) {
  return run_owned<op_value_t<Op>, op_executor_t<Op>>(std::move(stage), std::move(op), ctx);
}

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

struct forward_cancellation {
  explicit forward_cancellation(boost::asio::cancellation_signal* target) noexcept : to(target) {}
  boost::asio::cancellation_signal* to;
  void operator()(boost::asio::cancellation_type type) { to->emit(type); }
};

// What the op's side and the timer's side of one bounded call share. The
// timer's side runs on the caller's executor, so the two never overlap.
template <class Executor>
struct bound_join : timer_node {
  bound_join() = default;
  bound_join(const bound_join&) = delete;
  bound_join& operator=(const bound_join&) = delete;
  // Normally the node is out of the queue long before this. But when an
  // io_context is destroyed with calls pending, their frames are destroyed
  // without resuming: the node must not stay linked in a queue that outlives it.
  ~bound_join() {
    if (queue) queue->remove(*this);
  }

  timer_queue* queue = nullptr;
  using waiter_type =
      typename boost::asio::async_result<boost::asio::use_awaitable_t<Executor>, void()>::handler_type;

  boost::asio::cancellation_signal child;
  boost::asio::cancellation_type type;
  // The caller, when its op has ended before the timer's side.
  parked_continuation<waiter_type> waiter;
  bool op_done = false;
  bool fired = false;
  bool timer_done = false;

  // When set, the bound passing calls this instead of emitting `child`: an
  // owner whose operations can be stopped directly installs no handler in a
  // slot per operation.
  void (*on_fire)(void*) noexcept = nullptr;
  void* fire_target = nullptr;

  // The timer's side: `expired` is false when it was disarmed instead.
  void timer_finished(bool expired) {
    if (expired && !op_done) {
      fired = true;
      if (on_fire) {
        on_fire(fire_target);
      } else {
        child.emit(type);
      }
    }
    timer_done = true;
    if (waiter.parked()) waiter.resume();  // may end the frame that holds *this: touch nothing after
  }

  static void fire_node(timer_node* node) { static_cast<bound_join*>(node)->timer_finished(true); }
};

// The steady clock's bounds share one timer per execution context; other
// clocks (manual_clock in tests) get a timer of their own per call.
template <class Clock, class Executor>
inline constexpr bool uses_timer_queue =
    std::is_same_v<Clock, steady_clock> && std::is_same_v<Executor, boost::asio::any_io_executor>;

// A time bound on operations that the caller starts itself, each with
// slot() bound to it: the bound passing and the caller's own cancellation
// (forwarded from forward() to disarm()) both reach the operation running
// there. An operation that takes a completion token needs no child
// coroutine for this; run_bounded spawns one only because an awaitable
// cannot be given a slot of its own. The timer's side refers to this object:
// its owner calls disarm() before the frame ends, and co_awaits
// wait_timer_side() when disarm() says that side is still to run.
template <class Clock, class Executor>
class local_bound {
 public:
  local_bound() = default;
  local_bound(const local_bound&) = delete;
  local_bound& operator=(const local_bound&) = delete;

  // The caller's cancellation reaches slot() until the caller's next
  // resumption: Asio clears the caller's slot whenever a coroutine resumes
  // from an operation, so forward() again before starting each one (it costs
  // a handler put in place). Nothing else may use the caller's slot meanwhile.
  void forward(const boost::asio::cancellation_state& caller) {
    caller_ = caller.slot();
    if (caller_.is_connected()) caller_.template emplace<forward_cancellation>(&join_.child);
  }

  // Cancels what runs in slot() with `type` at `at`. `executor` is the
  // caller's, where the timer's side runs; it must outlive this object.
  void arm(const Clock& clock, const Executor& executor, time_point at, boost::asio::cancellation_type type) {
    join_.type = type;
    executor_ = &executor;
    if constexpr (uses_timer_queue<Clock, Executor>) {
      join_.fire_at = at;
      join_.fire = &bound_join<Executor>::fire_node;
      join_.executor = &executor;
      join_.queue = &timer_queue::of(executor);
      join_.queue->add(join_);
    } else {
      timer_.emplace(clock.make_timer(executor));
      timer_->expires_at(at);
      timer_->async_wait(
          boost::asio::bind_executor(executor, [this](const error_code& ec) { join_.timer_finished(!ec); }));
    }
  }

  // Calls on_fire(target) at `at`, instead of a cancellation in slot(): for
  // operations the caller can stop itself (closing their socket), started
  // in no slot of this bound's and with no forward().
  void arm(const Clock& clock, const Executor& executor, time_point at, void (*on_fire)(void*) noexcept,
           void* target) {
    join_.on_fire = on_fire;
    join_.fire_target = target;
    arm(clock, executor, at, boost::asio::cancellation_type::terminal);
  }

  boost::asio::cancellation_slot slot() noexcept { return join_.child.slot(); }
  // Whether the bound passed while armed (what ran in slot() was cancelled,
  // or on_fire was called).
  bool fired() const noexcept { return join_.fired; }

  // Stops forwarding and disarms. True when the timer's side is under way
  // and must be waited for with wait_timer_side().
  bool disarm() noexcept {
    join_.op_done = true;
    if (caller_.is_connected()) caller_.clear();
    bool pending = false;
    if constexpr (uses_timer_queue<Clock, Executor>) {
      if (join_.queue) pending = !join_.queue->remove(join_) && !join_.timer_done;
    } else if (timer_) {
      timer_->cancel();
      pending = !join_.timer_done;
    }
    join_.queue = nullptr;  // out of the queue either way now: nothing for the destructor to do
    return pending;
  }

  // The wait for the timer's side, as an async operation. Asio throws from
  // a co_await once the caller is cancelled, and this wait is mandatory: the
  // caller switches throw_if_cancelled off around it.
  auto wait_timer_side() {
    boost::asio::use_awaitable_t<Executor> token;
    return boost::asio::async_initiate<boost::asio::use_awaitable_t<Executor>, void()>(
        [this](auto resume) { join_.waiter.park(std::move(resume), *executor_); }, token);
  }

 private:
  // A timer of its own only off the shared queue: 128 bytes of frame saved.
  struct no_timer {};
  using own_timer = decltype(std::declval<const Clock&>().make_timer(std::declval<const Executor&>()));

  bound_join<Executor> join_;
  const Executor* executor_ = nullptr;
  boost::asio::cancellation_slot caller_;
  std::conditional_t<uses_timer_queue<Clock, Executor>, no_timer, std::optional<own_timer>> timer_;
};

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
