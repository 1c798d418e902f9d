// resilience/circuit_breaker.hpp — stop calling a dependency that is down.
//
//   using namespace std::chrono_literals;
//   resilience::circuit_breaker breaker{resilience::breaker_options{}
//                                           .count_window(50)        // the last 50 calls
//                                           .failure_ratio(0.5)      // half of them failed...
//                                           .minimum_calls(10)       // ...out of at least 10
//                                           .open_duration(5s)};
//   int rows = co_await breaker([&] { return db.async_count(); });
//   // as a stage:        resilience::pipeline(retry_policy, breaker, attempt_timeout)
//   // own classifier:    breaker.stage([](const resilience::outcome<response>& o) {
//   //                        return o.failed() || o.value().status >= 500; })
//
// One breaker guards one dependency and is shared by every coroutine and
// thread that calls it. Stages (breaker.stage(), and the breaker itself used
// as a stage) refer to it by pointer: the breaker must outlive every call
// made through it. It can be neither copied nor moved. Its options (trip
// conditions, windows, break lengths) are in breaker_options.hpp; its states,
// events and metrics in breaker_state.hpp.
//
// States:
//   closed        calls go through; outcomes are recorded; a trip condition opens it.
//   open          calls are rejected at once, until the break ends.
//   half_open     at most half_open_permits() probe calls at a time go through;
//                 the rest are rejected at once. successes_to_close() successes
//                 close it; one failure reopens it (with half_open_judged_by_ratio(),
//                 their ratios decide). It reopens too when it has been
//                 half-open for half_open_limit() without closing, so a
//                 probe that never ends cannot keep it half-open.
//   isolated      held open by isolate() until reset().
//   disabled      every call goes through and nothing is recorded.
//   metrics_only  like closed (everything is recorded), but it never opens.
// reset() closes it from any state and clears the window.
//
// OPEN becomes HALF_OPEN lazily: the first call after the break ends makes
// the transition and is the first probe. Nothing happens on a timer unless
// the application asks: call poll() (for example from a periodic timer) to
// make due transitions, and their callbacks, happen without waiting for a call.
//
// Time: any time_point the clock returns is fine, and any duration an option
// allows. A break or half-open limit of duration::max() never ends; one that
// would end past time_point::max() ends when the clock reads that.
//
// Rejection: the call ends with resilience::error::circuit_open, in T's error
// channel, or thrown as resilience::circuit_open_error (a system_error with
// that code and retry_after()) when T has none. time_until_probe() gives the
// same time left until a probe may go through.
//
// What counts as a failure is a classifier (see classifier.hpp); the default
// counts every failure but a cancellation. A cancelled call counts as neither
// success nor failure. Every admitted call gives its permit back on every
// path — success, failure, exception, cancellation, a permit destroyed
// unrecorded, or a coroutine frame destroyed without resuming (its execution
// context shut down) — so half-open probes are never lost.
//
// Concurrency: the closed-state path (admit + record) takes no lock and
// allocates nothing. With a count window, a success is a few atomic loads and
// one read-modify-write on a cache line of the calling thread's own (one of 8
// per breaker, by thread); a failure or slow call also places the successes
// pending in every thread's line before itself, with a few read-modify-writes
// on the one line such calls share. The clock is read on it only for a time
// window or slow-call tripping. Open-state rejections and probes take no lock
// either. Transitions are serialised by a mutex that nothing else takes, so
// each happens exactly once; its callback runs once, on the thread that made
// it, after the mutex is released. Callbacks of
// transitions made on different threads may overlap: events carry a sequence
// number to order them. A callback (or the open-duration generator) that
// throws ends the call that caused its event with that exception, after the
// transition is complete; it is never thrown through the breaker's state.
// The generator may be called by several racing threads for one opening (the
// winner's duration is used), so it must be thread-safe.
//
// With retry outside it: a rejected call ends at once, and retry sees
// error::circuit_open; time_until_probe() (or circuit_open_error's
// retry_after()) says how long waiting would have to be.
#pragma once

#include <resilience/breaker_options.hpp>
#include <resilience/breaker_state.hpp>
#include <resilience/classifier.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/detail/breaker_core.hpp>
#include <resilience/detail/gated_call.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace resilience {

// Thrown to reject a call whose result type has no error channel.
class circuit_open_error : public boost::system::system_error {
 public:
  explicit circuit_open_error(duration retry_after)
      : boost::system::system_error(make_error_code(error::circuit_open)), retry_after_(retry_after) {}

  // Time left until the breaker may let a probe through: zero when it may
  // already (half-open, waiting for a permit to come back), duration::max()
  // when isolated or open for good.
  duration retry_after() const noexcept { return retry_after_; }

 private:
  duration retry_after_;
};

class breaker_permit;

namespace detail {
// The slow paths of an admission and a record (lib/circuit_breaker.cpp):
// they report what happened to `ctx`'s sink when there is a context, then
// throw what a hook threw.
breaker_ticket admit_slow(breaker_core& core, const context* ctx);
void record_slow(breaker_core& core, const breaker_ticket& t, bool failure, const context* ctx);
breaker_permit admit(breaker_core& core, const context* ctx);
}  // namespace detail

// The right to make one call: obtained from try_acquire(), then recorded once.
//
//   if (auto permit = breaker.try_acquire()) {
//     permit.record(call_failed);   // or record_success(), record_failure(), release()
//   } else {
//     wait(permit.retry_after());
//   }
//
// A permit destroyed without a record counts as neither success nor failure
// (as a cancellation does), and in half-open gives its probe slot back.
// try_acquire(ctx) and record(failed, ctx) also report the breaker's events
// (transitions, a rejection) to the sink of the call `ctx` belongs to.
class breaker_permit {
 public:
  breaker_permit() noexcept = default;
  breaker_permit(const breaker_permit&) = delete;
  breaker_permit& operator=(const breaker_permit&) = delete;
  breaker_permit(breaker_permit&& o) noexcept : core_(std::exchange(o.core_, nullptr)), ticket_(o.ticket_) {}
  breaker_permit& operator=(breaker_permit&& o) noexcept {
    if (this != &o) {
      release();
      core_ = std::exchange(o.core_, nullptr);
      ticket_ = o.ticket_;
    }
    return *this;
  }
  ~breaker_permit() { release(); }

  // Whether the call may go ahead.
  explicit operator bool() const noexcept { return ticket_.kind > detail::admission::rejected; }
  bool is_probe() const noexcept { return ticket_.kind == detail::admission::probe; }
  // The breaker's transition count when this permit was given: which
  // closed or half-open period the call belongs to.
  std::uint64_t sequence() const noexcept { return ticket_.epoch; }
  // For a rejected permit: see circuit_open_error::retry_after().
  duration retry_after() const noexcept {
    return ticket_.kind == detail::admission::rejected ? ticket_.time : duration::zero();
  }

  // Throws what a callback of the transition it causes threw; the outcome is
  // recorded all the same.
  void record(bool failure) { record_in(failure, nullptr); }
  void record(bool failure, const context& ctx) { record_in(failure, &ctx); }
  void record_success() { record(false); }
  void record_failure() { record(true); }
  // Neither success nor failure.
  void release() noexcept {
    if (auto* c = std::exchange(core_, nullptr)) c->give_back(ticket_);
  }

 private:
  friend breaker_permit detail::admit(detail::breaker_core& core, const context* ctx);
  breaker_permit(detail::breaker_core* core, detail::breaker_ticket t) noexcept : core_(core), ticket_(t) {}

  void record_in(bool failure, const context* ctx) {
    auto* c = std::exchange(core_, nullptr);
    if (!c) return;
    if (!failure && c->finish_success_fast(ticket_)) [[likely]]
      return;
    detail::record_slow(*c, ticket_, failure, ctx);
  }

  detail::breaker_core* core_ = nullptr;  // null once recorded, and for a permit with nothing to record
  detail::breaker_ticket ticket_;
};

namespace detail {

inline breaker_permit admit(breaker_core& core, const context* ctx) {
  breaker_ticket t = core.acquire();
  if (t.kind == admission::undecided) [[unlikely]]
    t = admit_slow(core, ctx);
  const bool records = t.kind == admission::closed || t.kind == admission::probe;
  return breaker_permit(records ? &core : nullptr, t);
}

}  // namespace detail

// Default classifier: every failure counts, except a cancellation and a rate
// limiter's rejection (the call reached no server).
using breaker_any_failure = any_failure;

namespace detail {
// A call through the breaker judged by `classify`, and by the default
// classifier (impl/circuit_breaker.hpp).
template <class T, class Executor, class Op, class Clock, class Classifier>
boost::asio::awaitable<T, Executor> stage_call(Op op, breaker_core* core, const Clock*, Classifier classify,
                                               const context& ctx);
template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, breaker_core* core, const Clock* clock, const context& ctx);
}  // namespace detail

// A stage that calls through a breaker, judging outcomes with its own
// classifier. Cheap to copy; refers to the breaker, which must outlive it.
template <class Classifier = breaker_any_failure, resilience::clock Clock = steady_clock>
using breaker_stage = judged_stage<detail::breaker_core, Classifier, Clock>;

// run(op) and breaker(op) judge with the default classifier; stage(c) gives
// a stage with another.
template <resilience::clock Clock = steady_clock>
class basic_circuit_breaker
    : public judged_state_stage<basic_circuit_breaker<Clock>, detail::breaker_core, Clock, breaker_any_failure> {
 public:
  using basic_circuit_breaker::judged_state_stage::judged_state_stage;  // (options = {}, clock = {})

  // -- calls --

  // The raw admit / record API, for callers that are not coroutines.
  // Throws what a callback (on_rejection, on_state_change) threw; no permit
  // is held then. With a context, the breaker's events go to its sink too.
  breaker_permit try_acquire() const { return detail::admit(this->core_, nullptr); }
  breaker_permit try_acquire(const context& ctx) const { return detail::admit(this->core_, &ctx); }

  // -- manual control --

  void isolate() { this->core_.move_to(circuit_state::isolated); }
  // Closes it from any state, clearing the window and the failure run.
  void reset() { this->core_.move_to(circuit_state::closed); }
  void close() { reset(); }
  void disable() { this->core_.move_to(circuit_state::disabled); }
  void metrics_only() { this->core_.move_to(circuit_state::metrics_only); }
  // Makes time-based transitions that are due (open -> half_open after the
  // break, half_open -> open past half_open_limit) without waiting for a call.
  void poll() const { this->core_.poll(); }

  // -- introspection --

  circuit_state state() const noexcept { return this->core_.state(); }
  // Zero when a call may go through now (closed, half-open), the rest of
  // the break when open, duration::max() when isolated.
  duration time_until_probe() const noexcept { return this->core_.time_until_probe(); }
  breaker_metrics metrics() const noexcept { return this->core_.metrics(); }

};

using circuit_breaker = basic_circuit_breaker<>;

}  // namespace resilience

#include <resilience/impl/circuit_breaker.hpp>
