// resilience/rate_limiter.hpp — at most so many calls per unit of time.
//
//   using namespace std::chrono_literals;
//   resilience::rate_limiter limiter{resilience::rate_limiter_options{}
//                                        .token_bucket(100, 1s, 20)  // 100 a second, bursts of 20
//                                        .max_wait(250ms)            // wait up to 250 ms for a token...
//                                        .max_queue(50)};            // ...50 calls at most waiting
//   int rows = co_await limiter([&] { return db.async_count(); });
//   // as a stage:   resilience::pipeline(limiter, attempt_timeout)
//   // not a coroutine:
//   if (limiter.try_acquire()) { ... }
//
// One limiter guards one budget of calls and is shared by every coroutine
// and thread that calls it; it must outlive every call made through it and
// can be neither copied nor moved (a pipeline refers to it).
//
// Two algorithms. A token bucket holds `burst` tokens and gains `tokens`
// every `per`; it starts full. It is kept as one atomic "theoretical arrival
// time" (GCRA): taking a token is one compare-and-swap, no lock. The time
// between two tokens is per / tokens rounded up to the clock's tick, so the
// limiter never admits more than asked. A sliding window splits `window`
// into `segments` (each window / segments, rounded up to the tick) and
// admits at most `limit` calls in any `segments` consecutive ones: a call
// counts in the segment it was admitted in, and stops counting once the
// window has moved past that segment (as .NET's sliding window limiter). It
// takes a short lock.
//
// No permit free. With max_wait() zero (the default) the call ends at once
// with error::rate_limited, without calling the op. Otherwise it waits in a
// FIFO queue of at most max_queue() calls; no newcomer takes a permit while
// anyone waits. A call does not wait in vain: if its permit (counting the
// waiters ahead of it) would come later than max_wait() from now, or at or
// after the context's deadline, it ends at once with rate_limited instead.
// A cancelled waiter ends with operation_aborted and is out of the queue at
// once. A waiter takes its permit only when it resumes, so a cancelled one
// never holds one and none is lost: the permit it would have had stays in
// the limiter (a bucket keeps up to `burst`). Waiters behind it keep the
// time they were given; they are not moved up. A waiter whose permit is due
// while a waiter ahead has not yet resumed to take its own (its executor
// busy or stopped) looks again after 100 us, doubling up to a permit's
// spacing, rather than waking again at the same instant.
//
// Every rejection reports rate_limit_rejection{reason, retry_after} to
// on_rejected: retry_after is the time until a permit would be free for that
// call, to answer HTTP 429 with Retry-After. time_until_permit() gives the
// same figure for a call arriving now. The library's default classifier
// (any_failure) does not call rate_limited transient: retrying a local
// rejection after a blind backoff only spends attempts. To retry it anyway,
// give the retry policy a classifier that does, and
// rate_limit_delay(limiter, backoff_delay{}) as its delay generator: the
// retry then waits out the time the limiter says is left.
//
// Errors go in T's own error channel, or are thrown as system_error when T
// has none. Frames: a waiter's node and timer live in a frame of its own; a
// call that goes straight through allocates nothing beyond its own frame.
// Destroying the execution context while calls wait frees every frame and
// leaves the queue empty.
//
// Threads: the state is one small thread-safe object. A waiter's timer and
// resumption run on its executor; on a multi-threaded io_context that
// executor must be a strand, as for any Asio object shared between handlers.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/stage.hpp>
#include <resilience/detail/with_option.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <utility>

namespace resilience {

// Why a rate limiter turned a call away (the call ends with error::rate_limited).
enum class rate_limit_reject_reason : std::uint8_t {
  no_permit,   // none free and max_wait() is zero: the limiter does not wait
  queue_full,  // max_queue() calls already waiting
  max_wait,    // its permit would come later than max_wait() from now
  deadline,    // its permit would come at or after the context's deadline
};

struct rate_limit_rejection {
  rate_limit_reject_reason reason;
  duration retry_after;  // until a permit would be free for this call
};

class rate_limiter_options {
 public:
  enum class algorithm : std::uint8_t { token_bucket, sliding_window };

  static constexpr std::uint32_t max_limit = 0x7fffffff;
  static constexpr std::uint32_t max_segments = 1000;

  rate_limiter_options() = default;

  // `tokens` every `per`, at most `burst` saved up (the bucket's size, and
  // the calls admitted at once by a full bucket); `burst` defaults to
  // `tokens`. tokens and burst in [1, 2^31 - 1]; per positive, with at most
  // one token per clock tick. The default: 100 a second, burst 100.
  rate_limiter_options token_bucket(std::uint32_t tokens, duration per, std::uint32_t burst) const;
  rate_limiter_options token_bucket(std::uint32_t tokens, duration per) const {
    return token_bucket(tokens, per, tokens);
  }
  // At most `limit` calls in any `window`, split in `segments` (1 to 1000;
  // each at least one clock tick long).
  rate_limiter_options sliding_window(std::uint32_t limit, duration window, std::uint32_t segments) const;

  // How long a call may wait for a permit: zero (the default) for none,
  // positive, or duration::max() for no limit but the context's deadline.
  rate_limiter_options max_wait(duration d) const;
  // Calls waiting at once, 0 to 2^31 - 1; no limit (2^31 - 1) by default.
  rate_limiter_options max_queue(std::uint32_t n) const;
  // Runs on the rejected call's thread, outside any lock. What it throws
  // ends that call in place of rate_limited.
  rate_limiter_options on_rejected(std::function<void(const rate_limit_rejection&)> f) const {
    return resilience::detail::with_option(*this, &rate_limiter_options::on_rejected_, std::move(f));
  }

  algorithm kind() const noexcept { return kind_; }
  // Token bucket: tokens per `per()`, and the bucket's size.
  std::uint32_t tokens() const noexcept { return tokens_; }
  duration per() const noexcept { return per_; }
  std::uint32_t burst() const noexcept { return burst_; }
  // Sliding window.
  std::uint32_t limit() const noexcept { return limit_; }
  duration window() const noexcept { return window_; }
  std::uint32_t segments() const noexcept { return segments_; }

  duration max_wait() const noexcept { return max_wait_; }
  std::uint32_t max_queue() const noexcept { return max_queue_; }
  const std::function<void(const rate_limit_rejection&)>& on_rejected() const noexcept { return on_rejected_; }

 private:
  algorithm kind_ = algorithm::token_bucket;
  std::uint32_t tokens_ = 100;
  duration per_ = std::chrono::seconds(1);
  std::uint32_t burst_ = 100;
  std::uint32_t limit_ = 0;
  duration window_ = duration::zero();
  std::uint32_t segments_ = 0;
  duration max_wait_ = duration::zero();
  std::uint32_t max_queue_ = max_limit;
  std::function<void(const rate_limit_rejection&)> on_rejected_;
};

namespace detail {

// A call waiting for a permit: a node in the limiter's queue, kept in the
// waiting coroutine's frame. Links and `queued` change under the queue's lock.
struct rate_limit_waiter {
  rate_limit_waiter* prev = nullptr;
  rate_limit_waiter* next = nullptr;
  bool queued = false;
  std::uint8_t early_wakes = 0;  // woken with its permit free but a waiter ahead still there
};

// What the queue said to a call that found no permit free.
struct rate_limit_turn {
  enum class kind : std::uint8_t { granted, wait, rejected };
  kind what;
  time_point at;                    // wait: when its permit should be free
  rate_limit_reject_reason reason;  // rejected: why
  duration retry_after;             // rejected: until a permit would be free for it
};

// The shared state: the algorithm's books and the waiters' queue.
class rate_limiter_core {
 public:
  explicit rate_limiter_core(rate_limiter_options o);
  ~rate_limiter_core();
  rate_limiter_core(const rate_limiter_core&) = delete;
  rate_limiter_core& operator=(const rate_limiter_core&) = delete;

  // A permit if one is free and nobody waits.
  bool try_acquire(time_point now) noexcept {
    if (waiting_.load(std::memory_order_acquire) != 0) return false;
    return take(now);
  }

  // Under the queue's lock: a permit if one is free and nobody waits;
  // else a rejection (queue full, or the permit too late for `give_up` or
  // `deadline`), or `n` queued with the time to wake at.
  rate_limit_turn enqueue(rate_limit_waiter& n, time_point now, time_point give_up, time_point deadline) noexcept;
  // A queued waiter woken: its permit if it is first and one is free; else
  // the time to wake again, or a rejection (taken out of the queue).
  rate_limit_turn wake(rate_limit_waiter& n, time_point now, time_point give_up, time_point deadline) noexcept;
  // Out of the queue; false if it was not in it.
  bool withdraw(rate_limit_waiter& n) noexcept;

  // Until a permit would be free for a call arriving at `now`, waiters
  // ahead of it counted; zero if one is free.
  duration time_until_permit(time_point now) const noexcept;
  std::uint32_t queued() const noexcept { return waiting_.load(std::memory_order_relaxed); }
  const rate_limiter_options& options() const noexcept { return options_; }

  // Runs on_rejected, if set, then reports to the call's sink, if any.
  void report(rate_limit_reject_reason why, duration retry_after, event_sink* events) const {
    if (options_.on_rejected()) options_.on_rejected()(rate_limit_rejection{why, retry_after});
    if (events) {
      event e{event_kind::rate_limited};
      e.delay = retry_after;
      e.outcome = call_outcome::error;
      e.error = error::rate_limited;
      events->on_event(e);
    }
  }

 private:
  using ticks = std::int64_t;
  static ticks count(time_point t) noexcept { return t.time_since_epoch().count(); }

  bool take(time_point now) noexcept {
    if (options_.kind() == rate_limiter_options::algorithm::token_bucket) return bucket_take(count(now));
    return window_take(now);
  }

  // GCRA: tat_ is when the bucket would be full again were no more taken.
  // A token is free while tat_ is at most `tau_` ahead of now.
  bool bucket_take(ticks now) noexcept {
    ticks tat = tat_.load(std::memory_order_relaxed);
    for (;;) {
      const ticks base = tat > now ? tat : now;
      if (base - now > tau_) return false;
      if (base > std::numeric_limits<ticks>::max() - interval_) return false;  // the end of time
      if (tat_.compare_exchange_weak(tat, base + interval_, std::memory_order_acq_rel, std::memory_order_relaxed))
        return true;
    }
  }

  bool window_take(time_point now) noexcept;
  // When the `k`-th permit from now (1: the next) would be free, if only
  // the waiters ahead took permits meanwhile.
  time_point permit_time(time_point now, std::uint64_t k) const noexcept;
  time_point bucket_permit_time(time_point now, std::uint64_t k) const noexcept;
  time_point window_permit_time(time_point now, std::uint64_t k) const noexcept;
  rate_limit_turn decide(time_point at, time_point now, time_point give_up, time_point deadline) const noexcept;
  // The time between two permits at the configured rate (a segment for the
  // sliding window).
  duration permit_spacing() const noexcept;
  void unlink_locked(rate_limit_waiter& n) noexcept;

  rate_limiter_options options_;
  // Token bucket.
  ticks interval_ = 1;
  ticks tau_ = 0;
  alignas(64) std::atomic<ticks> tat_{std::numeric_limits<ticks>::min()};
  // Sliding window (lib/): counts per segment, under its own lock.
  struct window_books;
  std::unique_ptr<window_books> window_;
  // The queue.
  alignas(64) std::atomic<std::uint32_t> waiting_{0};
  std::mutex mutex_;
  rate_limit_waiter* head_ = nullptr;
  rate_limit_waiter* tail_ = nullptr;
};

// Out of the queue however the wait ends (a frame destroyed unresumed
// included). The caller's slot is emptied by the wait when it resumes
// (leave_slot), never from here: a frame destroyed unresumed, as its context
// shuts down, may outlive the signal behind that slot (a hedged attempt's).
struct rate_limit_wait_guard {
  rate_limiter_core* core;
  rate_limit_waiter* node;
  boost::asio::cancellation_slot slot;
  ~rate_limit_wait_guard() { core->withdraw(*node); }
  void leave_slot() noexcept {
    if (slot.is_connected()) slot.clear();
    slot = {};
  }
};

// Takes a waiter out of the queue the moment its caller is cancelled, then
// ends its timer's wait.
struct rate_limit_canceller {
  rate_limit_canceller(rate_limiter_core* c, rate_limit_waiter* n, boost::asio::cancellation_signal* t) noexcept
      : core(c), node(n), timer(t) {}
  rate_limiter_core* core;
  rate_limit_waiter* node;
  boost::asio::cancellation_signal* timer;
  void operator()(boost::asio::cancellation_type type) {
    if (type == boost::asio::cancellation_type::none) return;
    core->withdraw(*node);
    timer->emit(type);
  }
};

// The wait for a permit, in a frame of its own: calls that go straight
// through do not carry the node and the timer in theirs. Returns the error
// that ends the call, or none when a permit was taken.
template <class Clock, class Executor>
boost::asio::awaitable<error_code, Executor> rate_limit_queue(rate_limiter_core* core, const Clock* clock,
                                                              time_point deadline, event_sink* events) {
  namespace asio = boost::asio;
  const auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none) co_return asio::error::operation_aborted;
  time_point now = clock->now();
  const time_point give_up = saturating_add(now, core->options().max_wait());
  rate_limit_waiter node;
  rate_limit_wait_guard guard{core, &node, {}};
  rate_limit_turn turn = core->enqueue(node, now, give_up, deadline);
  if (turn.what == rate_limit_turn::kind::wait) {
    auto timer = clock->make_timer(co_await asio::this_coro::executor);
    asio::cancellation_signal timer_cancel;
    if (cs.slot().is_connected()) {
      guard.slot = cs.slot();
      guard.slot.template emplace<rate_limit_canceller>(core, &node, &timer_cancel);
    }
    while (turn.what == rate_limit_turn::kind::wait) {
      timer.expires_at(turn.at);
      co_await timer.async_wait(
          asio::bind_cancellation_slot(timer_cancel.slot(), asio::as_tuple(asio::use_awaitable_t<Executor>{})));
      if (cs.cancelled() != asio::cancellation_type::none) {
        guard.leave_slot();
        co_return asio::error::operation_aborted;
      }
      now = clock->now();
      turn = core->wake(node, now, give_up, deadline);
    }
    guard.leave_slot();
  }
  if (turn.what == rate_limit_turn::kind::granted) co_return error_code{};
  core->report(turn.reason, turn.retry_after, events);
  co_return error::rate_limited;
}

template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> rate_limited_call(Op op, rate_limiter_core* core, const Clock* clock,
                                                      context ctx) {
  if (!core->try_acquire(clock->now())) {
    if (core->options().max_wait() == duration::zero()) {
      // Rejects without a frame for the queue: nothing would wait in it.
      core->report(rate_limit_reject_reason::no_permit, core->time_until_permit(clock->now()), ctx.events);
      // Throwing off for the turn (see yield_after_refusal).
      const bool throws = co_await boost::asio::this_coro::throw_if_cancelled();
      co_await boost::asio::this_coro::throw_if_cancelled(false);
      co_await yield_after_refusal<Executor>(throws);
      co_return outcome<T>::from_error(error::rate_limited).get();
    }
    const error_code ec = co_await rate_limit_queue<Clock, Executor>(core, clock, ctx.deadline, ctx.events);
    if (ec) {
      // Turned away without a wait (no permit before the deadline) or after one.
      if (ec == error::rate_limited) {
        const bool throws = co_await boost::asio::this_coro::throw_if_cancelled();
        co_await boost::asio::this_coro::throw_if_cancelled(false);
        co_await yield_after_refusal<Executor>(throws);
      }
      co_return outcome<T>::from_error(ec).get();
    }
  }
  co_return co_await invoke_op(op, ctx);
}

}  // namespace detail

template <resilience::clock Clock = steady_clock>
class basic_rate_limiter
    : public shared_state_stage<basic_rate_limiter<Clock>, detail::rate_limiter_core, Clock> {
  using base = shared_state_stage<basic_rate_limiter, detail::rate_limiter_core, Clock>;
  using base::clock_;
  using base::core_;

 public:
  // For pipeline(): no call waits for a permit past the context's deadline.
  static constexpr bool respects_deadline = true;

  // Stages refer to it (not copied).
  explicit basic_rate_limiter(rate_limiter_options options = {}, Clock clock = {})
      : base(std::move(options), std::move(clock)) {}

  // run(op) and limiter(op) run op with a permit, after waiting for one if
  // so configured. Const like every stage's run: the state is shared and
  // synchronised within.

  // A permit now, if one is free and nobody waits; never waits, reports no
  // event. For callers that are not coroutines. A permit is spent when
  // taken: there is nothing to give back.
  bool try_acquire() const noexcept { return core_.try_acquire(clock_.now()); }

  // Until a permit would be free for a call arriving now (the waiters
  // ahead of it counted): zero if one is free now.
  duration time_until_permit() const noexcept { return core_.time_until_permit(clock_.now()); }
  std::uint32_t queued() const noexcept { return core_.queued(); }

 private:
  friend stage_base<basic_rate_limiter>;
  template <class T, class Executor, class Op>
  auto call(Op op, const context& parent) const {
    return detail::rate_limited_call<T, Executor>(std::move(op), &core_, &clock_, parent);
  }
};

using rate_limiter = basic_rate_limiter<>;

// A retry policy's delay generator: a rate_limited outcome waits out the
// time `limiter` says is left before a permit; any other failure is left to
// `next` (resilience::backoff_delay{}: the policy's backoff). `limiter` must
// outlive the policy.
//   policy.retry_if(my_classifier)
//       .delay_generator(resilience::rate_limit_delay(limiter, resilience::backoff_delay{}))
template <class Limiter, class Next>
struct rate_limit_delay_generator {
  const Limiter* limiter;
  [[no_unique_address]] Next next;

  template <class T>
  auto operator()(const outcome<T>& o, const context& ctx) const {
    using decision = decltype(next(o, ctx));
    if (o.error() != error::rate_limited) return next(o, ctx);
    return decision::after(limiter->time_until_permit());
  }
};

template <class Limiter, class Next>
rate_limit_delay_generator<Limiter, Next> rate_limit_delay(const Limiter& limiter, Next next) {
  return {&limiter, std::move(next)};
}
template <class Limiter, class Next>
void rate_limit_delay(const Limiter&&, Next) = delete;

}  // namespace resilience
