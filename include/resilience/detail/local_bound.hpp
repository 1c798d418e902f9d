// A time bound on operations a caller starts itself, each with the bound's
// cancellation slot (or stopped by a function the bound calls): what
// run_bounded (bounded_run.hpp) and the HTTP client's exchange build on.
// Not public API.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/detail/parked_joins.hpp>
#include <resilience/detail/timer_queue.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <optional>
#include <type_traits>
#include <utility>

namespace resilience::detail {

// Passes the caller's cancellation on to a bound's child.
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

}  // namespace resilience::detail
