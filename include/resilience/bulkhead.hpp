// resilience/bulkhead.hpp — at most N calls to a dependency at once.
//
//   using namespace std::chrono_literals;
//   resilience::bulkhead pool{resilience::bulkhead_options{}
//                                 .max_concurrent(8)   // 8 calls at once...
//                                 .max_queue(100)      // ...100 more wait their turn, first come first served
//                                 .max_wait(250ms)};   // a waiter gives up after 250 ms
//   int rows = co_await pool([&] { return db.async_count(); });
//   // as a stage:   resilience::pipeline(retry_policy, pool, attempt_timeout)
//   // not a coroutine:
//   if (auto permit = pool.try_acquire()) { ... }  // released when it goes out of scope
//
// One bulkhead guards one dependency and is shared by every coroutine and
// thread that calls it; it must outlive every call made through it and can be
// neither copied nor moved (a pipeline refers to it, as to a breaker).
//
// Admission. A call goes through at once when fewer than max_concurrent()
// calls are inside and nobody waits: one atomic compare-and-swap, no lock, no
// allocation. Otherwise it waits in a FIFO queue of at most max_queue()
// calls, or, the queue being full, ends at once with error::bulkhead_full
// without calling the op. A call that leaves hands its slot straight to the
// first waiter (its resumption is posted to the waiter's executor), and no
// newcomer may take a slot while anyone waits, so calls are admitted exactly
// in order of arrival.
//
// Leaving the queue early: after max_wait() (on the bulkhead's clock) the
// call ends with error::bulkhead_full; on cancellation of the calling
// coroutine with operation_aborted. Either way it is out of the queue at
// once (queued() drops). A slot handed to a waiter that is cancelled before
// it resumes is passed on to the next waiter, never lost. The wait is bounded
// by max_wait only, not by the context's deadline: put a deadline stage
// outside the bulkhead for that (it keeps its own timer around it).
//
// Errors go in T's own error channel, or are thrown as system_error when T
// has none (as for every strategy's own errors).
//
// Permits are RAII: released on every path — success, failure, exception,
// cancellation, and a frame destroyed without resuming because its
// execution context was destroyed (a waiter is then taken out of the queue;
// a waiter handed a slot it never used gives it back).
//
// Threads: the state is one small thread-safe object. A waiter's own parts
// (its timer, its resumption) run on its executor; on a multi-threaded
// io_context that executor must be a strand, as for any Asio object shared
// between handlers.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/event_support.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/detail/parked_joins.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/stage.hpp>
#include <resilience/detail/with_option.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace resilience {

// Why a bulkhead turned a call away (the call ends with error::bulkhead_full).
enum class bulkhead_reject_reason : std::uint8_t {
  queue_full,  // every slot taken and max_queue() calls already waiting
  max_wait,    // it waited max_wait() without getting a slot
};

struct bulkhead_rejection {
  bulkhead_reject_reason reason;
  std::uint32_t in_flight;  // at the time of the rejection
  std::uint32_t queued;
};

class bulkhead_options {
 public:
  // Both limits fit one 64-bit atomic word with room to spare.
  static constexpr std::uint32_t max_limit = 0x7fffffff;

  bulkhead_options() = default;

  // Calls inside at once: 1 to max_limit; 10 by default.
  bulkhead_options max_concurrent(std::uint32_t n) const {
    if (n < 1 || n > max_limit)
      throw std::invalid_argument("bulkhead_options::max_concurrent: must be in [1, 2^31 - 1]");
    return resilience::detail::with_option(*this, &bulkhead_options::max_concurrent_, n);
  }
  // Calls waiting at once: 0 (none waits: a full bulkhead rejects) to
  // max_limit; 0 by default.
  bulkhead_options max_queue(std::uint32_t n) const {
    if (n > max_limit) throw std::invalid_argument("bulkhead_options::max_queue: must be at most 2^31 - 1");
    return resilience::detail::with_option(*this, &bulkhead_options::max_queue_, n);
  }
  // How long a call waits for a slot: positive, or duration::max() (the
  // default) for no limit.
  bulkhead_options max_wait(duration d) const {
    if (d <= duration::zero()) throw std::invalid_argument("bulkhead_options::max_wait: must be positive");
    return resilience::detail::with_option(*this, &bulkhead_options::max_wait_, d);
  }
  // Runs on the rejected call's thread, outside any lock. What it throws
  // ends that call in place of bulkhead_full.
  bulkhead_options on_rejected(std::function<void(const bulkhead_rejection&)> f) const {
    return resilience::detail::with_option(*this, &bulkhead_options::on_rejected_, std::move(f));
  }

  std::uint32_t max_concurrent() const noexcept { return max_concurrent_; }
  std::uint32_t max_queue() const noexcept { return max_queue_; }
  duration max_wait() const noexcept { return max_wait_; }
  const std::function<void(const bulkhead_rejection&)>& on_rejected() const noexcept { return on_rejected_; }

 private:
  std::uint32_t max_concurrent_ = 10;
  std::uint32_t max_queue_ = 0;
  duration max_wait_ = duration::max();
  std::function<void(const bulkhead_rejection&)> on_rejected_;
};

}  // namespace resilience

#include <resilience/detail/bulkhead_core.hpp>  // the shared state, which holds the options

namespace resilience {

class bulkhead_permit;
namespace detail {
bulkhead_permit adopt_slot(bulkhead_core& core) noexcept;
}

// One slot of a bulkhead, given back when the permit is released or
// destroyed. Empty (false) when no slot was free.
class bulkhead_permit {
 public:
  bulkhead_permit() noexcept = default;
  bulkhead_permit(const bulkhead_permit&) = delete;
  bulkhead_permit& operator=(const bulkhead_permit&) = delete;
  bulkhead_permit(bulkhead_permit&& o) noexcept : core_(std::exchange(o.core_, nullptr)) {}
  bulkhead_permit& operator=(bulkhead_permit&& o) noexcept {
    if (this != &o) {
      release();
      core_ = std::exchange(o.core_, nullptr);
    }
    return *this;
  }
  ~bulkhead_permit() { release(); }

  explicit operator bool() const noexcept { return core_ != nullptr; }
  void release() noexcept {
    if (auto* c = std::exchange(core_, nullptr)) c->release();
  }

 private:
  friend bulkhead_permit detail::adopt_slot(detail::bulkhead_core& core) noexcept;
  explicit bulkhead_permit(detail::bulkhead_core* c) noexcept : core_(c) {}

  detail::bulkhead_core* core_ = nullptr;
};

namespace detail {

inline bulkhead_permit adopt_slot(bulkhead_core& core) noexcept { return bulkhead_permit(&core); }

// A call: in a slot at once, or after queueing for one (impl/bulkhead.hpp).
template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, bulkhead_core* core, const Clock* clock, context ctx);

}  // namespace detail

// run(op) and bulkhead(op) run op in a slot, after waiting for one if need be.
template <resilience::clock Clock = steady_clock>
class basic_bulkhead : public shared_state_stage<basic_bulkhead<Clock>, detail::bulkhead_core, Clock> {
 public:
  using basic_bulkhead::shared_state_stage::shared_state_stage;  // (options = {}, clock = {})

  // A slot now, if one is free and nobody waits; never queues, reports no
  // event. For callers that are not coroutines.
  bulkhead_permit try_acquire() const noexcept {
    return this->core_.try_acquire() ? detail::adopt_slot(this->core_) : bulkhead_permit{};
  }

  // Calls inside (holding a slot) and calls waiting, now.
  std::uint32_t in_flight() const noexcept { return this->core_.in_flight(); }
  std::uint32_t queued() const noexcept { return this->core_.queued(); }

};

using bulkhead = basic_bulkhead<>;

}  // namespace resilience

#include <resilience/impl/bulkhead.hpp>
