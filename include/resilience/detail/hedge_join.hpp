// One hedged call's state: its attempts, the hedge timer, the winner, and
// the join that waits for every attempt. Not public API; included by
// resilience/hedging.hpp before its coroutine (impl/hedging.hpp).
#pragma once

namespace resilience::detail {

// An attempt's body: the op, then a flag saying it has ended, set on its
// normal paths only (never from a destructor: when the execution context is
// destroyed, the frame holding the flag may already be gone).
template <class T, class Executor, class Op>
boost::asio::awaitable<spawned_t<T>, Executor> hedged_attempt(Op* op, const context* ctx, bool* ended) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await invoke_op(*op, *ctx);
      *ended = true;
    } else {
      spawned_t<T> v(co_await invoke_op(*op, *ctx));
      *ended = true;
      co_return v;
    }
  } catch (...) {
    *ended = true;
    throw;
  }
}


// One hedged call's state, in its frame. Everything here runs on the
// caller's executor: the attempts' completions, the hedge timer, the
// caller's cancellation. The first attempt's completion resumes the frame
// directly (the frame is then owned by that attempt, as a timeout's by its
// op); after it, the frame parks until every attempt and the timer are done,
// registered with parked_joins so that a destroyed context frees it.
template <class T, class Executor, class Op, class Policy>
class hedge_join : public timer_node {
 public:
  using clock_type = std::remove_cvref_t<decltype(std::declval<const Policy&>().clock())>;
  static constexpr bool queued_timer = uses_timer_queue<clock_type, Executor>;

  hedge_join(Op* op, const Policy* policy, const context& base, const Executor& ex, time_point start)
      : op_(op), policy_(policy), base_(base), executor_(ex), start_(start) {}
  hedge_join(const hedge_join&) = delete;
  hedge_join& operator=(const hedge_join&) = delete;
  // With calls pending when the context is destroyed, the frame goes
  // unresumed: the node must not stay in a queue that outlives it.
  ~hedge_join() {
    if (queue_) queue_->remove(*this);
  }

  // Each attempt's own properties, copied from the caller's.
  properties* props = nullptr;

  // Starts the first attempt; its completion goes to `handler`.
  template <class Handler>
  void launch_first(Handler handler) {
    launch(0, std::move(handler));
    if (attempts_[0].ended) return;  // its outcome decides what follows
    const std::uint32_t max = policy_->max_attempts();
    if (max > 1) {
      next_hedge_at_ = saturating_add(start_, policy_->delay());
      if (next_hedge_at_ >= base_.deadline) next_hedge_at_ = time_point::max();
      schedule(start_);
    }
  }

  // An attempt has completed with `o`.
  void attempt_done(std::uint32_t index, outcome<T> o) {
    attempts_[index].running = false;
    --running_;
    if (settled_ || aborted_) return;  // a loser, or the call was cancelled
    const context& actx = attempts_[index].ctx;
    const bool cancelled = o.cancelled();
    const bool non_fatal = !cancelled && classify(policy_->classifier(), o, actx);
    if (!cancelled)
      policy_->budget().record(reached_no_server(o.error()) ? attempt_verdict::not_sent : verdict_of(o, non_fatal),
                               index == 0);
    result_.emplace(std::move(o));
    chosen_ = index + 1;
    if (!non_fatal) {
      settle();
      return;
    }
    if (stopped_ || started_ == policy_->max_attempts()) return;
    // The next hedge: at once, after a server's pushback, or none.
    const time_point now = policy_->clock().now();
    try {
      using delay_type = std::remove_cvref_t<decltype(policy_->delay_generator())>;
      if constexpr (requires { requires delay_type::is_default; }) {
        next_hedge_at_ = now;
      } else {
        const retry_delay decision = policy_->delay_generator()(*result_, actx);
        if (decision.decision() == retry_delay::kind::stop) {
          stop();
          return;
        }
        next_hedge_at_ =
            decision.decision() == retry_delay::kind::backoff ? now : saturating_add(now, decision.given());
      }
    } catch (...) {
      fail_with_current_exception();
      return;
    }
    if (next_hedge_at_ >= base_.deadline) next_hedge_at_ = time_point::max();
    schedule(now);
  }

  // A hedge's completion, from its co_spawn handler.
  void hedge_done(std::uint32_t index, outcome<T> o) {
    attempt_done(index, std::move(o));
    wake_if_finished();  // may end the frame that holds *this: touch nothing after
  }

  // The caller's cancellation: every attempt is cancelled, no hedge starts.
  void abort() {
    if (aborted_) return;
    aborted_ = true;
    next_hedge_at_ = time_point::max();
    cancel_running();
    disarm();
    // Nothing else would wake the frame: not from inside the slot's handler.
    if (running_ == 0 && !timer_outstanding_ && waiter_.parked()) {
      ++posted_;
      boost::asio::post(executor_, [this] {
        --posted_;
        wake_if_finished();
      });
    }
  }

  // Every attempt completed, and no timer or wake refers to the frame.
  bool finished() const noexcept { return running_ == 0 && !timer_outstanding_ && posted_ == 0; }

  // Disarms the hedge timer; true when nothing of it is left pending.
  bool disarm() {
    if (!timer_outstanding_) return true;
    if constexpr (queued_timer) {
      if (queue_->remove(*this)) timer_outstanding_ = false;  // else its fire is posted: wait for it
    } else {
      timer_->cancel();
    }
    return !timer_outstanding_;
  }

  template <class Waiter>
  void park(Waiter w) {
    waiter_.park(std::move(w), executor_);
  }

  bool aborted() const noexcept { return aborted_; }
  std::uint32_t started() const noexcept { return started_; }
  std::uint32_t chosen() const noexcept { return chosen_; }
  std::optional<outcome<T>>& result() noexcept { return result_; }
  // The first attempt answered before any hedge: nothing else to settle.
  bool only_first() const noexcept { return started_ == 1 && !aborted_ && !settled_ && running_ == 0; }
  void mark_first_done() noexcept {
    attempts_[0].running = false;
    --running_;
    chosen_ = 1;
  }

 private:
  struct attempt {
    boost::asio::cancellation_signal signal;
    context ctx;
    bool running = false;
    bool ended = false;
  };

  struct hedge_handler {
    hedge_join* join;
    std::uint32_t index;
    template <class... V>
    void operator()(std::exception_ptr e, V&&... v) {
      join->hedge_done(index, spawned_outcome<T>(e, std::forward<V>(v)...));
    }
  };

  using waiter_type =
      typename boost::asio::async_result<boost::asio::use_awaitable_t<Executor>, void()>::handler_type;
  using timer_type = decltype(std::declval<const clock_type&>().make_timer(std::declval<const Executor&>()));

  template <class Handler>
  void launch(std::uint32_t index, Handler handler) {
    attempt& a = attempts_[index];
    a.ctx = base_;
    a.ctx.attempt = index + 1;
    a.ctx.max_attempts = policy_->max_attempts();
    if (props) a.ctx.props = &props[index];
    a.running = true;
    a.ended = false;
    ++running_;
    ++started_;
    boost::asio::co_spawn(executor_, hedged_attempt<T, Executor>(op_, &a.ctx, &a.ended),
                          boost::asio::bind_cancellation_slot(a.signal.slot(), std::move(handler)));
  }

  // Starts every hedge that is due by `now`, then arms the timer for the next.
  void schedule(time_point now) {
    while (!settled_ && !aborted_ && !stopped_ && next_hedge_at_ <= now) start_hedge(now);
    if (!settled_ && !aborted_ && !stopped_ && next_hedge_at_ != time_point::max()) {
      arm(next_hedge_at_);
    } else {
      disarm();  // no hedge left to start: the call must not wait for the timer
    }
  }

  void start_hedge(time_point now) {
    const std::uint32_t max = policy_->max_attempts();
    if (started_ >= max || now >= base_.deadline) {
      stop();
      return;
    }
    // Asked last, when nothing else stops the hedge: a refusal is a hedge
    // that would have started.
    if (!policy_->budget().allows_retry()) {
      stop();
      return;
    }
    if (policy_->shared_on_hedge()) {
      try {
        policy_->shared_on_hedge()(hedge_event{started_ + 1, now - start_});
      } catch (...) {
        fail_with_current_exception();
        return;
      }
      if (settled_ || aborted_) return;  // the hook cancelled the call
    }
    {
      event e{event_kind::hedge};
      e.attempt = started_ + 1;
      e.delay = now - start_;
      base_.report(e);
    }
    launch(started_, hedge_handler{this, started_});
    next_hedge_at_ = started_ < max ? saturating_add(now, policy_->delay()) : time_point::max();
    if (next_hedge_at_ >= base_.deadline) next_hedge_at_ = time_point::max();
  }

  void arm(time_point at) {
    if constexpr (queued_timer) {
      if (timer_outstanding_) {
        if (at >= armed_at_) return;              // fires early: on_timer re-arms
        if (!queue_->remove(*this)) return;       // fire posted: on_timer re-arms
        timer_outstanding_ = false;
      }
      fire_at = at;
      fire = &on_fire;
      executor = &executor_;
      queue_ = &timer_queue::of(executor_);
      queue_->add(*this);
    } else {
      if (timer_outstanding_) {
        if (at < armed_at_) timer_->cancel();  // its handler re-arms
        return;
      }
      if (!timer_) timer_.emplace(policy_->clock().make_timer(executor_));
      timer_->expires_at(at);
      timer_->async_wait(boost::asio::bind_executor(executor_, [this](const error_code&) { on_timer(); }));
    }
    timer_outstanding_ = true;
    armed_at_ = at;
  }

  static void on_fire(timer_node* node) { static_cast<hedge_join*>(node)->on_timer(); }

  void on_timer() {
    timer_outstanding_ = false;
    if (!settled_ && !aborted_ && !stopped_) schedule(policy_->clock().now());
    wake_if_finished();  // may end the frame that holds *this: touch nothing after
  }

  void wake_if_finished() {
    if (finished() && waiter_.parked()) waiter_.resume();
  }

  void cancel_running() {
    for (std::uint32_t i = 0; i < started_; ++i)
      if (attempts_[i].running) attempts_[i].signal.emit(boost::asio::cancellation_type::terminal);
  }

  void stop() {
    stopped_ = true;
    next_hedge_at_ = time_point::max();
    disarm();
  }

  // A final outcome is in: the others lose.
  void settle() {
    settled_ = true;
    next_hedge_at_ = time_point::max();
    cancel_running();
    disarm();
  }

  void fail_with_current_exception() {
    result_.emplace(outcome<T>::from_current_exception());
    chosen_ = 0;
    settle();
  }

  Op* op_;
  const Policy* policy_;
  context base_;
  Executor executor_;
  time_point start_;
  std::array<attempt, max_hedged_attempts> attempts_{};
  std::uint32_t started_ = 0;
  std::uint32_t running_ = 0;
  std::uint32_t chosen_ = 0;  // 1-based: the attempt whose outcome is in result_
  int posted_ = 0;
  bool settled_ = false;
  bool aborted_ = false;
  bool stopped_ = false;
  bool timer_outstanding_ = false;
  time_point next_hedge_at_ = time_point::max();
  time_point armed_at_{};
  timer_queue* queue_ = nullptr;
  struct no_timer {};
  [[no_unique_address]] std::conditional_t<queued_timer, no_timer, std::optional<timer_type>> timer_;
  std::optional<outcome<T>> result_;
  parked_continuation<waiter_type> waiter_;
};

template <class Join>
struct hedge_canceller {
  explicit hedge_canceller(Join* j) noexcept : join(j) {}
  Join* join;
  void operator()(boost::asio::cancellation_type type) {
    if (type != boost::asio::cancellation_type::none) join->abort();
  }
};

}  // namespace resilience::detail
