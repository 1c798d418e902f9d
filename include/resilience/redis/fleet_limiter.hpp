// resilience/redis/fleet_limiter.hpp — one rate limit shared by every replica
// of a service, kept in Redis.
//
//   using namespace std::chrono_literals;
//   namespace redis = resilience::redis;
//   redis::fleet_limiter limiter{io.get_executor(),
//                               redis::connection_options{}.tcp("10.0.0.5", 6379),
//                               redis::fleet_limiter_options{}.key("mail-provider")
//                                   .token_bucket(100, 1s, 20)   // 100 a second for the whole fleet
//                                   .max_wait(250ms)};           // wait up to 250 ms for a permit
//   auto sent = co_await limiter([&] { return mail.async_send(msg); });
//   // as a stage:  resilience::pipeline(limiter, attempt_timeout)
//
// The bucket (GCRA, as the local rate_limiter) is one key in Redis, updated
// by a Lua script (EVALSHA) that decides atomically on Redis's own clock
// (TIME), so replicas' clocks need not agree. A replica leases permits in
// batches: it takes up to max_lease() per round trip and spends them
// locally, so a busy replica makes one round trip per many calls. The lease
// grows (doubling) while the replica spends it quickly and shrinks (halving)
// when permits expire unspent (lease_lifetime()). Accuracy: over any span of
// time the fleet admits at most rate × span + burst + replicas ×
// max_lease(), because a leased permit is spent at most lease_lifetime()
// after Redis granted it; permits that expire unspent are lost to the quota
// (the fleet admits less, never more). A Redis that restarts empty (or fails
// over to a replica behind it) starts the bucket full again: one more burst,
// unless the replicas fell back meanwhile (see "Return" below).
// Over the quota, a replica's round trip reserves its next lease in the
// bucket, if the last of its permits is due within lease_lifetime(): the
// lease may be spent from then, and calls are turned away without asking
// until then. The replicas take turns instead of racing for each permit: a
// fleet over its quota makes one round trip per lease, at most one per
// admitted call. Redis turns a replica away only when the reservations
// reach past lease_lifetime(); it asks again when one would fit.
//
// No permit. With max_wait() zero (the default) the call ends at once with
// error::rate_limited, without calling the op; the rejection event carries
// the time until Redis expects a permit. Otherwise the call waits that time
// (on the limiter's clock) and asks again, while it fits in max_wait() and
// before the context's deadline.
//
// Redis slow or down is a failure mode, not an outage. Each round trip is
// bounded (connection_options::command_timeout()). The first one that
// fails (timeout, connection lost or refused, an error reply) opens the
// limiter's breaker: it falls back and reports fell_back. Then a call that
// finds a probe due runs the script for one permit (in the background: the
// call itself is decided by the fallback; a Redis that answers PING but
// refuses the script stays open), on an exponential schedule with full
// jitter (limiter_defaults::probe_first, doubling to
// limiter_defaults::probe_longest); when the script runs, the limiter
// reports resumed and goes back to the shared quota (the probe's permit is
// its first lease). The calls drive the probe, so an idle limiter holds no
// timer and never keeps io_context::run() from returning (nor does its idle
// connection).
//
// Return. The replicas find Redis again one by one, each when its probe
// does. With local_share, for per + 2 × limiter_defaults::probe_longest
// after its return a replica admits a call only with a permit from its local
// share as well as from the lease: the replicas still on their shares and
// those back admit no more than the shares together, and any span of `per`
// in which a replica draws the shared quota alone starts after the others
// are back (if they probe within 2 × probe_longest of the first, as their
// calls make them do), so the bound above holds across the return.
//
// While it falls back, calls make no round trip and are decided by
// fallback():
//   - local_share (the default): a local token bucket at this replica's
//     share of the quota, rate / replicas, where replicas is the largest
//     number of replicas Redis reported using the key in the last one to
//     two limiter_defaults::replicas_window (replicas_hint() until Redis
//     was reached once);
//   - fail_open: every call admitted;
//   - fail_closed: every call rejected with rate_limited.
//
// Keys. For the key "k", the bucket is "rl:{k}" and the replicas' sorted set
// "rl:{k}:replicas": one hash tag, so Redis Cluster keeps both in one slot
// and the script runs on one node. Different keys spread over the cluster.
//
// Time. The limiter's Clock times leases, waits and the local share; round
// trips and reconnects wait on a real server and are timed by the steady
// clock. time_source::local sends the Clock's time to the script in place of
// Redis's TIME: for tests on a manual_clock (the key then keeps a minute of
// margin in its expiry), or replicas whose Clock counts from one epoch (a
// clock over the system clock, synchronised: never the steady clock, whose
// epoch is each machine's boot).
//
// Threads: calls may come from any thread; the lease is a pair of atomics,
// and a call that finds it spent asks Redis on the connection's executor
// (a strand, on a multi-threaded io_context), one round trip at a time for
// all callers. The limiter must outlive every call made through it; destroy
// it before its io_context, on its executor's thread or when no thread runs
// that io_context.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/event_support.hpp>
#include <resilience/detail/sleep.hpp>
#include <resilience/stage.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/redis/connection.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace resilience::redis {

enum class fallback_mode : std::uint8_t { local_share, fail_open, fail_closed };
enum class time_source : std::uint8_t { redis, local };

struct limiter_stats {
  std::uint64_t admitted = 0;              // calls admitted, by the shared quota or the fallback
  std::uint64_t admitted_by_fallback = 0;  // of which by the fallback
  std::uint64_t rejected = 0;
  std::uint64_t round_trips = 0;         // scripts run for callers (a NOSCRIPT reload counts once)
  std::uint64_t failed_round_trips = 0;  // of which failed (the breaker's probes count in neither)
  std::uint64_t fallbacks = 0;   // times the breaker opened
  std::uint64_t leased = 0;      // permits Redis granted
  std::uint32_t replicas = 0;    // as Redis last said
};

// Every default of fleet_limiter_options and the limiter's fixed schedules,
// in one place (docs/strategies/fleet-rate-limiter.md tables them).
struct limiter_defaults {
  static constexpr std::uint32_t tokens = 100;  // for the whole fleet...
  static constexpr duration per = std::chrono::seconds(1);  // ...every second
  static constexpr std::uint32_t burst = 100;
  static constexpr std::uint32_t lease_share = 10;  // max_lease: burst / lease_share, at least 1
  static constexpr duration lease_lifetime = std::chrono::milliseconds(100);
  static constexpr std::uint32_t replicas_hint = 1;
  // Fixed: the probe's backoff while Redis is away, and the span over which
  // Redis counts the replicas using a key.
  static constexpr duration probe_first = std::chrono::milliseconds(50);
  static constexpr duration probe_longest = std::chrono::milliseconds(500);
  static constexpr duration replicas_window = std::chrono::seconds(10);
};

class fleet_limiter_options {
 public:
  // The limit's name in Redis: non-empty, at most 200 bytes, without '{' or
  // '}' (the library adds the hash tag). Required: a limiter without a key
  // throws at construction.
  fleet_limiter_options key(std::string k) const;
  // `tokens` every `per` for the whole fleet, at most `burst` saved up;
  // tokens and burst in [1, 2^31 - 1], per / tokens at least 1 us.
  fleet_limiter_options token_bucket(std::uint32_t tokens, duration per, std::uint32_t burst) const;
  fleet_limiter_options token_bucket(std::uint32_t tokens, duration per) const {
    return token_bucket(tokens, per, tokens);
  }
  // How long a call may wait for a permit: zero (the default), positive, or
  // duration::max() for no limit but the context's deadline.
  fleet_limiter_options max_wait(duration d) const;
  // Permits one round trip may lease, 1 to burst: the overshoot per replica.
  fleet_limiter_options max_lease(std::uint32_t n) const;
  // How long a leased permit may wait to be spent: positive.
  fleet_limiter_options lease_lifetime(duration d) const;
  fleet_limiter_options fallback(fallback_mode m) const;
  // Replicas assumed for the local share before Redis has told: 1 to 2^16
  // (the default, 1, gives the whole quota: set it to the fleet's size).
  fleet_limiter_options replicas_hint(std::uint32_t n) const;
  fleet_limiter_options clock_from(time_source s) const;

  const std::string& key() const noexcept { return key_; }
  std::uint32_t tokens() const noexcept { return tokens_; }
  duration per() const noexcept { return per_; }
  std::uint32_t burst() const noexcept { return burst_; }
  duration max_wait() const noexcept { return max_wait_; }
  std::uint32_t max_lease() const noexcept {
    return max_lease_ ? max_lease_ : std::max<std::uint32_t>(burst_ / limiter_defaults::lease_share, 1);
  }
  duration lease_lifetime() const noexcept { return lease_lifetime_; }
  fallback_mode fallback() const noexcept { return fallback_; }
  std::uint32_t replicas_hint() const noexcept { return replicas_hint_; }
  time_source clock_from() const noexcept { return time_source_; }

 private:
  std::string key_;
  std::uint32_t tokens_ = limiter_defaults::tokens;
  duration per_ = limiter_defaults::per;
  std::uint32_t burst_ = limiter_defaults::burst;
  duration max_wait_ = duration::zero();
  std::uint32_t max_lease_ = 0;  // 0: from the burst
  duration lease_lifetime_ = limiter_defaults::lease_lifetime;
  fallback_mode fallback_ = fallback_mode::local_share;
  std::uint32_t replicas_hint_ = limiter_defaults::replicas_hint;
  time_source time_source_ = time_source::redis;
};

}  // namespace resilience::redis

#include <resilience/redis/detail/limiter_core.hpp>  // the shared state, which holds the options

namespace resilience::redis {

namespace detail {
// A call with a permit (redis/impl/fleet_limiter.hpp).
template <class T, class Executor, class Op, class Clock>
boost::asio::awaitable<T, Executor> stage_call(Op op, limiter_core* core, const Clock* clock, context ctx);

}  // namespace detail

template <resilience::clock Clock = steady_clock>
class basic_fleet_limiter : public stage_base<basic_fleet_limiter<Clock>> {
 public:
  // Not for pipeline()'s purposes: a call that asks Redis waits for the
  // round trip (at most command_timeout) even past the context's deadline,
  // so a deadline stage outside keeps its own timer.
  static constexpr bool respects_deadline = false;
  using clock_type = Clock;

  // Connects to Redis on first use, on `ex` (a strand on a multi-threaded
  // io_context). Throws std::invalid_argument for options without a key.
  basic_fleet_limiter(boost::asio::any_io_executor ex, connection_options connection, fleet_limiter_options options,
                     Clock clock = {})
      : clock_(std::move(clock)),
        core_(detail::limiter_core::make(std::move(ex), std::move(connection), std::move(options))) {}
  ~basic_fleet_limiter() { core_->shutdown(); }
  basic_fleet_limiter(const basic_fleet_limiter&) = delete;
  basic_fleet_limiter& operator=(const basic_fleet_limiter&) = delete;

  // Until a permit is expected for a call arriving now: zero while the
  // lease holds one; else what Redis last said (or the fallback's figure).
  // For rate_limit_delay(limiter, next) and a 429's Retry-After.
  duration time_until_permit() const noexcept { return core_->time_until_permit(clock_.now()); }
  limiter_stats stats() const noexcept { return core_->stats(); }
  // The breaker is open: calls are decided by the fallback.
  bool falling_back() const noexcept { return core_->falling_back(); }
  const fleet_limiter_options& options() const noexcept { return core_->options(); }
  const Clock& clock() const noexcept { return clock_; }

 private:
  friend stage_base<basic_fleet_limiter>;
  template <class T, class Executor, class Op>
  auto call(Op op, const context& parent) const {
    return detail::stage_call<T, Executor>(std::move(op), core_.get(), &clock_, parent);
  }
  Clock clock_;
  std::shared_ptr<detail::limiter_core> core_;
};

using fleet_limiter = basic_fleet_limiter<>;

}  // namespace resilience::redis

#include <resilience/redis/impl/fleet_limiter.hpp>
