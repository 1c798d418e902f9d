// A coroutine's wait between attempts. Not public API.
//
// On the steady clock a wait is a node in the execution context's shared
// timer queue, kept in the waiting frame: no timer object, no Asio wait
// operation, and no syscall when the queue's timer is already armed earlier.
// That is most of what a retry asleep in its backoff costs beyond the frames
// themselves, and 100k of them asleep at once share one Asio timer.
//
// The wait ends when the queue fires it or when the coroutine's cancellation
// slot is emitted, whichever comes first; both run on the coroutine's
// executor, so they never overlap. While it waits, the frame's only owner is
// the continuation parked in it, so it registers with parked_joins: if the
// context is destroyed first, that drops the continuation and frees the frame.
#pragma once

#include <resilience/detail/parked_joins.hpp>
#include <resilience/detail/timer_queue.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <optional>
#include <utility>

namespace resilience::detail {

template <class Executor>
class queued_sleep : timer_node {
 public:
  queued_sleep() = default;
  queued_sleep(const queued_sleep&) = delete;
  queued_sleep& operator=(const queued_sleep&) = delete;
  // Reached without a resumption only when the context is destroyed.
  ~queued_sleep() {
    if (queue_) queue_->remove(*this);
  }

  // Resumes the awaiting coroutine at `at`, or at once when it is cancelled;
  // the caller tells which by reading its cancellation state. To be awaited
  // at once (co_await sleep.until(t)): a deferred operation, which Asio
  // awaits in the caller's own frame, where use_awaitable would add a
  // coroutine frame (144 bytes) for as long as the wait lasts.
  auto until(time_point at) {
    return boost::asio::async_initiate<const boost::asio::deferred_t&, void()>(
        [this, at](waiter_type handler) {
          owner_ = boost::asio::any_io_executor(boost::asio::get_associated_executor(handler));
          slot_ = boost::asio::get_associated_cancellation_slot(handler);
          waiter_.park(std::move(handler), owner_);
          fire_at = at;
          fire = &on_fire;
          executor = &owner_;
          if (slot_.is_connected()) slot_.template emplace<canceller>(this);
          queue_ = &timer_queue::of(owner_);
          queue_->add(*this);
        },
        boost::asio::deferred);
  }

 private:
  // The handler Asio gives a deferred operation awaited in a coroutine.
  using waiter_type = boost::asio::detail::awaitable_async_op_handler<void(), Executor>;

  struct canceller {
    explicit canceller(queued_sleep* s) noexcept : self(s) {}
    queued_sleep* self;
    void operator()(boost::asio::cancellation_type type) {
      if (type == boost::asio::cancellation_type::none) return;
      // Already due: the queue's fire is on its way and resumes it.
      if (!self->queue_ || !self->queue_->remove(*self)) return;
      self->queue_ = nullptr;
      // Not from inside the slot's own handler: resume() clears the slot.
      boost::asio::post(self->owner_, [s = self] { s->resume(); });
    }
  };

  void resume() {
    if (slot_.is_connected()) slot_.clear();
    queue_ = nullptr;
    waiter_.resume();  // may end the frame that holds *this: touch nothing after
  }

  static void on_fire(timer_node* node) { static_cast<queued_sleep*>(node)->resume(); }

  parked_continuation<waiter_type> waiter_;
  boost::asio::any_io_executor owner_;
  boost::asio::cancellation_slot slot_;
  timer_queue* queue_ = nullptr;
};

// One turn of the executor, as a frame of its own so that callers that yield
// only on a rare path do not carry the post's state in theirs.
template <class Executor>
boost::asio::awaitable<void, Executor> yield_once() {
  co_await boost::asio::post(co_await boost::asio::this_coro::executor, boost::asio::use_awaitable_t<Executor>{});
}

// A call turned away before it reached its dependency (an open breaker, a
// full bulkhead, no permit, throttled, an injected fault) gives its executor a
// turn before it completes, as an Asio operation that completes at once does.
// Without it a loop of refused calls never returns to io_context::run: the
// timers, probes and I/O that would end the refusals starve. Refusal paths
// only; a call that goes through pays nothing.
//
// Throwing is off for the turn: a refusal is reported as itself even if a
// hook cancelled the caller meanwhile. Asio checks the caller's cancellation
// in the caller's frame, before it enters any awaitable, so the refusing
// coroutine switches throwing off itself and this restores it:
//   const bool throws = co_await asio::this_coro::throw_if_cancelled();
//   co_await asio::this_coro::throw_if_cancelled(false);
//   co_await yield_after_refusal<Executor>(throws);
template <class Executor>
boost::asio::awaitable<void, Executor> yield_after_refusal(bool throws) {
  namespace asio = boost::asio;
  co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable_t<Executor>{});
  co_await asio::this_coro::throw_if_cancelled(throws);
}

}  // namespace resilience::detail
