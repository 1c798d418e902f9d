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
#include <resilience/detail/event_support.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
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

}  // namespace resilience

#include <resilience/detail/rate_limiter_core.hpp>  // the shared state, which holds the options

namespace resilience {

namespace detail {
// A call with a permit, after a wait for one if need be (impl/rate_limiter.hpp).
template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, rate_limiter_core* core, const Clock* clock, context ctx);
}  // namespace detail

// run(op) and limiter(op) run op with a permit, after waiting for one if so
// configured.
template <resilience::clock Clock = steady_clock>
class basic_rate_limiter
    : public shared_state_stage<basic_rate_limiter<Clock>, detail::rate_limiter_core, Clock> {
 public:
  using basic_rate_limiter::shared_state_stage::shared_state_stage;  // (options = {}, clock = {})

  // A permit now, if one is free and nobody waits; never waits, reports no
  // event. For callers that are not coroutines. A permit is spent when
  // taken: there is nothing to give back.
  bool try_acquire() const noexcept { return this->core_.try_acquire(this->clock_.now()); }

  // Until a permit would be free for a call arriving now (the waiters
  // ahead of it counted): zero if one is free now.
  duration time_until_permit() const noexcept { return this->core_.time_until_permit(this->clock_.now()); }
  std::uint32_t queued() const noexcept { return this->core_.queued(); }

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

#include <resilience/impl/rate_limiter.hpp>
