// resilience/testing/manual_clock.hpp — virtual time for tests and simulations.
//
//   boost::asio::io_context io;
//   resilience::testing::manual_clock clock;
//   auto policy = resilience::retry_policy{}.max_attempts(5).clock(clock);
//   co_spawn(io, resilience::co_retry(op, policy), handler);
//   clock.run(io);  // runs handlers; when none is ready, jumps to the next timer
//
// Time starts at zero and moves only through advance(), advance_to() or
// run(). A whole backoff schedule of minutes completes in microseconds, and
// the same inputs always give the same sequence of events.
//
// Copies of a manual_clock share one time line. now() and advance() are
// thread-safe; run() drives one io_context from the calling thread.
// Timers hold executor work while they wait, like Asio's own timers.
//
// Lifetimes. Like Asio's timers, a wait whose execution context is destroyed
// first is dropped unrun when that context shuts down, which frees the
// coroutine frame it owns. When the last copy of a clock is destroyed, its
// pending waits are dropped unrun the same way (nothing could ever complete
// them), and a later wait on one of its timers completes at once with
// operation_aborted.
#pragma once

#include <resilience/clock.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

namespace resilience::testing {

class manual_clock {
  struct state;
  struct wait_node;
  class context_waits;

 public:
  template <class Executor>
  class basic_timer;

  template <class Executor>
  using timer_type = basic_timer<Executor>;

  manual_clock();

  time_point now() const noexcept;

  // Moves time forward and completes every wait that is due by then, in order
  // of expiry. Completions are posted, never run inside this call. Time
  // saturates at time_point::max(); a negative duration, or a time before
  // now(), throws std::invalid_argument.
  void advance(duration d) const;
  void advance_to(time_point t) const;

  // The earliest pending expiry, if any timer waits.
  std::optional<time_point> next_expiry() const;
  std::size_t pending() const;

  // Runs `io` until it has nothing left to do, advancing time to the next
  // expiry whenever no handler is ready. Returns the handlers run.
  std::size_t run(boost::asio::io_context& io) const;
  // The same for a span of virtual time: ends at now() + limit, with every
  // wait due by then completed. A limit that saturates at time_point::max()
  // means none: it runs like run(), and time stops at the last expiry. A
  // negative limit throws std::invalid_argument.
  std::size_t run_for(boost::asio::io_context& io, duration limit) const;

  template <class Executor>
  basic_timer<Executor> make_timer(const Executor& ex) const {
    return basic_timer<Executor>(*this, ex);
  }

  // Copies are one clock: they read the same time.
  friend bool operator==(const manual_clock& a, const manual_clock& b) noexcept { return a.state_ == b.state_; }

 private:
  using handler_type = boost::asio::any_completion_handler<void(boost::system::error_code)>;

  // A timer's pending waits, as the clock keeps them. Changed only under the
  // clock's lock; `pending` is also read without it by the timer, which is
  // used from one thread at a time: at zero no wait refers to the timer, and
  // only the timer itself can add one, so cancel, expires_at/after and
  // destruction of an idle timer need no lock.
  struct timer_waits {
    std::atomic<std::size_t> pending{0};
    wait_node* first = nullptr;
  };

  // The parts that do not depend on the handler's type live in lib/.
  static time_point time_now(const state& s) noexcept;
  static std::uint64_t enqueue(const std::shared_ptr<state>& s, timer_waits& owner, time_point when,
                               handler_type handler, boost::asio::any_io_executor work);
  static void cancel_wait(const std::weak_ptr<state>& s, time_point when, std::uint64_t wait_id);
  static std::size_t cancel_timer(state& s, timer_waits& owner);
  static void move_waits(state& s, timer_waits& from, timer_waits& to) noexcept;
  static void close(state& s) noexcept;

  std::shared_ptr<state> state_;  // also held by timers and (weakly) by cancellers
  // Held by the copies of this clock only: the last to go calls close(),
  // which drops the pending waits. Timers cannot do that job: a wait's
  // handler may own the coroutine frame that holds its timer.
  std::shared_ptr<void> copies_;
};

template <class Executor>
class manual_clock::basic_timer {
 public:
  using executor_type = Executor;

  basic_timer(const manual_clock& clock, const Executor& ex)
      : state_(clock.state_), executor_(ex), expiry_(clock.now()) {}

  basic_timer(const basic_timer&) = delete;
  basic_timer& operator=(const basic_timer&) = delete;
  // Pending waits move with the timer.
  basic_timer(basic_timer&& other) noexcept
      : state_(std::move(other.state_)), executor_(other.executor_), expiry_(other.expiry_) {
    if (other.waits_.pending.load(std::memory_order_acquire) != 0) move_waits(*state_, other.waits_, waits_);
  }
  basic_timer& operator=(basic_timer&&) = delete;

  // Like an Asio timer, destruction cancels pending waits.
  ~basic_timer() { cancel(); }

  executor_type get_executor() const noexcept { return executor_; }
  time_point expiry() const noexcept { return expiry_; }

  // Setting the expiry cancels pending waits, as Asio's timers do. A time at
  // or before now() (a negative duration included) completes a wait at once.
  std::size_t expires_at(time_point t) {
    expiry_ = t;
    return cancel();
  }
  std::size_t expires_after(duration d) {
    return expires_at(saturating_add(manual_clock::time_now(*state_), d));
  }

  std::size_t cancel() {
    if (waits_.pending.load(std::memory_order_acquire) == 0) return 0;
    return cancel_timer(*state_, waits_);
  }

  template <class Token>
  auto async_wait(Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [](auto handler, basic_timer* self) {
          auto work = boost::asio::prefer(
              boost::asio::any_io_executor(self->executor_),
              boost::asio::execution::outstanding_work.tracked);
          // Type-erase first: the erased handler puts its own filter on the
          // caller's slot, so the canceller must go into the slot it exposes.
          handler_type erased(std::move(handler));
          auto slot = erased.get_cancellation_slot();
          // The canceller goes in before the handler moves into the queue and
          // learns the wait's id right after. Cancellation is emitted on this
          // same thread of execution, so it cannot run in between.
          canceller* wait = slot.is_connected()
                                ? &slot.template emplace<canceller>(self->state_, self->expiry_)
                                : nullptr;
          const std::uint64_t id =
              enqueue(self->state_, self->waits_, self->expiry_, std::move(erased), std::move(work));
          if (wait) wait->id = id;
        },
        token, this);
  }

 private:
  friend class manual_clock;

  struct canceller {
    canceller(const std::shared_ptr<state>& s, time_point when) : clock_state(s), when(when) {}
    void operator()(boost::asio::cancellation_type type) {
      using ct = boost::asio::cancellation_type;
      if ((type & (ct::terminal | ct::partial | ct::total)) != ct::none && id != 0)
        cancel_wait(clock_state, when, id);
    }
    // Weak: a wait cancelled after its clock is gone has nothing to cancel.
    std::weak_ptr<manual_clock::state> clock_state;
    time_point when;
    std::uint64_t id = 0;
  };

  std::shared_ptr<state> state_;
  Executor executor_;
  time_point expiry_;
  timer_waits waits_;
};

}  // namespace resilience::testing
