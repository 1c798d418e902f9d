// resilience/impl/bulkhead.hpp — a queued call's wait for a slot and the
// coroutines of a bulkhead's call. Included at the end of
// resilience/bulkhead.hpp, which declares what is defined here and states
// its contract; not to be included on its own.
#pragma once

namespace resilience {
namespace detail {

// What a wait for a slot ended with: a permit, or the error that ends the call.
struct bulkhead_admission {
  bulkhead_permit permit;
  error_code ec;
};

// One queued wait, in the frame of the coroutine that waits. Two sides may
// refer to the frame while it waits: the resolution (a grant, a
// cancellation, the queue being full after all) and, with a max_wait, the
// timer's handler. The coroutine resumes when both are over, whichever is
// last, so neither outlives the frame.
template <class Clock, class Executor>
class bulkhead_wait : public bulkhead_waiter {
 public:
  bulkhead_wait(bulkhead_core& core, const Clock& clock) : core_(&core), clock_(&clock) {}
  bulkhead_wait(const bulkhead_wait&) = delete;
  bulkhead_wait& operator=(const bulkhead_wait&) = delete;
  // Reached with the node still in play only when the frame is destroyed
  // unresumed (its execution context was destroyed).
  ~bulkhead_wait() {
    if (in_play_) core_->abandon(*this);
  }

  // Queues and suspends until admitted, rejected, timed out or cancelled;
  // `state` then says which.
  auto until_admitted(const Executor& ex) {
    boost::asio::use_awaitable_t<Executor> token;
    return boost::asio::async_initiate<boost::asio::use_awaitable_t<Executor>, void()>(
        [this, &ex](auto handler) {
          owner_ = boost::asio::any_io_executor(ex);
          slot_ = boost::asio::get_associated_cancellation_slot(handler);
          // A release on another thread may grant this node at any time; it
          // must be out of the queue before its context stops taking posts.
          waiter_.on_abandon([](void* self) noexcept {
            auto& w = *static_cast<bulkhead_wait*>(self);
            w.core_->abandon(w);
          }, this);
          waiter_.park(std::move(handler), owner_);
          granted = &on_granted;
          const duration max_wait = core_->options().max_wait();
          sides_.store(max_wait == duration::max() ? 1 : 2, std::memory_order_relaxed);
          if (max_wait != duration::max()) {
            // Armed before queueing: once queued, a grant may come from
            // any thread, and settle() must find the timer there.
            timer_.emplace(clock_->make_timer(ex));
            timer_->expires_at(saturating_add(clock_->now(), max_wait));
            timer_->async_wait(boost::asio::bind_executor(
                ex, [this](const error_code& ec) { on_timer(!ec); }));
          }
          if (slot_.is_connected()) slot_.template emplace<canceller>(this);
          in_play_ = true;
          switch (core_->acquire_or_enqueue(*this)) {
            case bulkhead_core::admission::queued:
              break;
            case bulkhead_core::admission::acquired:  // a slot came free meanwhile: state is granted
            case bulkhead_core::admission::full:      // filled up meanwhile: state is full
              post_settle();
              break;
          }
        },
        token);
  }

  // After the wait: the slot, now owned by a permit, or why there is none.
  bulkhead_admission take() noexcept {
    in_play_ = false;
    bulkhead_admission a;
    switch (state) {
      case status::granted:
        a.permit = adopt_slot(*core_);
        break;
      case status::cancelled:
        a.ec = boost::asio::error::operation_aborted;
        break;
      default:
        a.ec = error::bulkhead_full;
        break;
    }
    state = status::idle;
    return a;
  }

 private:
  using waiter_type =
      typename boost::asio::async_result<boost::asio::use_awaitable_t<Executor>, void()>::handler_type;
  using timer_type = std::remove_cvref_t<decltype(std::declval<const Clock&>().make_timer(std::declval<Executor>()))>;

  struct canceller {
    explicit canceller(bulkhead_wait* w) noexcept : self(w) {}
    bulkhead_wait* self;
    void operator()(boost::asio::cancellation_type type) {
      if (type == boost::asio::cancellation_type::none) return;
      // Already granted (or timed out): that side resumes it. A granted
      // waiter sees the cancellation when it resumes and passes the slot on.
      if (!self->core_->withdraw(*self, status::cancelled)) return;
      // Not from inside the slot's own handler: resuming clears the slot.
      self->post_settle();
    }
  };

  static void on_granted(bulkhead_waiter* n) noexcept { static_cast<bulkhead_wait*>(n)->post_settle(); }

  void post_settle() noexcept {
    boost::asio::post(owner_, [this] { settle(); });
  }

  // The resolution's side is over; on the waiter's executor.
  void settle() {
    if (timer_) timer_->cancel();  // touches the timer before letting go: the other side may end the frame
    finish(1);
  }

  // The timer's side; on the waiter's executor.
  void on_timer(bool expired) {
    if (expired && core_->withdraw(*this, status::timed_out)) {
      finish(2);  // it resolved the wait too
      return;
    }
    finish(1);
  }

  void finish(int sides) {
    if (sides_.fetch_sub(sides, std::memory_order_acq_rel) != sides) return;
    if (slot_.is_connected()) slot_.clear();
    waiter_.resume();  // may end the frame that holds *this: touch nothing after
  }

  bulkhead_core* core_;
  const Clock* clock_;
  bool in_play_ = false;  // queued, or handed a slot not yet taken
  std::atomic<int> sides_{0};
  boost::asio::any_io_executor owner_;
  boost::asio::cancellation_slot slot_;
  std::optional<timer_type> timer_;
  parked_continuation<waiter_type> waiter_;
};

// A rejection: on_rejected, then the call's sink.
inline void report_rejection(const bulkhead_core& core, const context& ctx, bulkhead_reject_reason why) {
  const auto& hook = core.options().on_rejected();
  report_hooked(ctx, [&] { if (hook) hook(bulkhead_rejection{why, core.in_flight(), core.queued()}); },
                refusal_event(why == bulkhead_reject_reason::queue_full ? event_kind::bulkhead_queue_full
                                                                        : event_kind::bulkhead_wait_expired,
                              error::bulkhead_full));
}

template <class Clock, class Executor>
boost::asio::awaitable<bulkhead_admission, Executor> bulkhead_queue(bulkhead_core* core, const Clock* clock,
                                                                    const context& ctx) {
  namespace asio = boost::asio;
  const auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none)
    co_return bulkhead_admission{{}, asio::error::operation_aborted};
  // A full queue rejects without suspending (a snapshot of one atomic word).
  if (core->queue_full()) {
    report_rejection(*core, ctx, bulkhead_reject_reason::queue_full);
    // Throwing off for the turn (see yield_after_refusal).
    const bool throws = co_await boost::asio::this_coro::throw_if_cancelled();
    co_await boost::asio::this_coro::throw_if_cancelled(false);
    co_await yield_after_refusal<Executor>(throws);
    co_return bulkhead_admission{{}, error::bulkhead_full};
  }
  const Executor executor = co_await asio::this_coro::executor;
  bulkhead_wait<Clock, Executor> wait(*core, *clock);
  co_await wait.until_admitted(executor);
  const auto how = wait.state;
  bulkhead_admission a = wait.take();
  if (how == bulkhead_waiter::status::full) report_rejection(*core, ctx, bulkhead_reject_reason::queue_full);
  if (how == bulkhead_waiter::status::timed_out) report_rejection(*core, ctx, bulkhead_reject_reason::max_wait);
  // Granted as it was being cancelled: the slot goes on to the next waiter.
  if (a.permit && cs.cancelled() != asio::cancellation_type::none) {
    a.permit.release();
    a.ec = asio::error::operation_aborted;
  }
  co_return a;
}

template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, bulkhead_core* core, const Clock* clock, context ctx) {
  bulkhead_permit permit;
  if (core->try_acquire()) {
    permit = adopt_slot(*core);
  } else {
    // The queue, in a frame of its own: calls that go straight through do not
    // carry the waiter's node and timer in theirs.
    bulkhead_admission a = co_await bulkhead_queue<Clock, Executor>(core, clock, ctx);
    if (!a.permit) co_return outcome<T>::from_error(a.ec).get();
    permit = std::move(a.permit);
  }
  // The permit goes back when this frame ends, however it ends.
  co_return co_await invoke_op(op, ctx);
}

}  // namespace detail
}  // namespace resilience
