// resilience/redis/detail/limiter_core.hpp — the fleet-wide limiter's
// shared state: the lease, for the call's fast path, in front of the breaker,
// the fallback and the connection (lib/redis/fleet_limiter.cpp). Not public
// API; included by redis/fleet_limiter.hpp after the options, and that
// header states the contract.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/error.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace resilience::redis {

namespace detail {

// What the limiter says to one call, and what that call met on the way, for
// it to report: the round trip it started failed (and with it the limiter
// fell back), or the limiter is back on the shared quota since the last call.
struct permit_decision {
  enum class kind : std::uint8_t { admitted, ask_redis, rejected };
  kind what;
  duration retry_after = duration::zero();  // rejected
  error_code round_trip_failed{};
  bool fell_back = false;
  bool resumed = false;
};

// The shared state: the lease (here, for the call's fast path), and behind
// it (lib/redis/fleet_limiter.cpp) the breaker, the fallback and the
// connection. Kept by a shared_ptr so that the background probe outlives
// nothing it uses.
class limiter_core {
 public:
  static std::shared_ptr<limiter_core> make(boost::asio::any_io_executor ex, connection_options c,
                                            fleet_limiter_options o);
  virtual ~limiter_core() = default;

  // A leased permit, the fallback's decision, or ask_redis. Thread-safe.
  permit_decision try_take(time_point now) noexcept {
    if (falling_back_.load(std::memory_order_acquire)) return fallback_take(now);
    permit_decision d = now.time_since_epoch().count() < held_until_.load(std::memory_order_relaxed)
                            ? held_take(now)
                            : take_shared(now);
    // The first call on the shared quota again tells its sink.
    if (resumed_untold_.load(std::memory_order_relaxed)) [[unlikely]]
      d.resumed = resumed_untold_.exchange(false, std::memory_order_relaxed);
    return d;
  }
  // A round trip (shared by every caller that finds the lease spent), then
  // the call's decision: admitted, rejected, or ask_redis again (the lease
  // it brought went to callers ahead). `done` runs on the connection's
  // executor.
  virtual void refill(time_point now, std::function<void(permit_decision)> done) = 0;
  // Counts a call turned away.
  virtual void reject() noexcept = 0;
  virtual limiter_stats stats() const noexcept = 0;
  bool falling_back() const noexcept { return falling_back_.load(std::memory_order_acquire); }
  // Zero while the lease holds a permit; else the time Redis last said the
  // next permit would come (or the fallback's figure).
  duration time_until_permit(time_point now) const noexcept {
    if (falling_back()) return fallback_time_until_permit(now);
    const auto ticks = now.time_since_epoch().count();
    const auto at = permit_expected_at_.load(std::memory_order_relaxed);
    const duration shared = at > ticks ? duration(at - ticks) : duration::zero();
    if (ticks < held_until_.load(std::memory_order_relaxed)) [[unlikely]]
      return std::max(shared, fallback_time_until_permit(now));
    return shared;
  }
  virtual const fleet_limiter_options& options() const noexcept = 0;
  // Cancels the probe and closes the connection (from ~basic_fleet_limiter).
  virtual void shutdown() noexcept = 0;

 protected:
  virtual permit_decision fallback_take(time_point now) noexcept = 0;
  // After a return from the fallback: a permit needs the local share's
  // consent as well as the lease's (see the header's "Return").
  virtual permit_decision held_take(time_point now) noexcept = 0;

  permit_decision take_shared(time_point now) noexcept {
    const auto ticks = now.time_since_epoch().count();
    // Read first: its release orders the times apply() wrote before it.
    std::int64_t left = leased_.load(std::memory_order_acquire);
    // Before the lease Redis reserved may be spent, or before a round trip
    // could bring one, a call is turned away without asking: asking would
    // only cost Redis a script (a fleet over its quota would ask for every
    // call it turns away, each replica racing the others for each permit).
    if (ticks < ask_again_at_.load(std::memory_order_relaxed)) {
      const auto expected = permit_expected_at_.load(std::memory_order_relaxed);
      return {permit_decision::kind::rejected, duration(std::max<std::int64_t>(expected - ticks, 0))};
    }
    if (ticks < lease_expires_.load(std::memory_order_relaxed)) {
      while (left > 0) {
        if (leased_.compare_exchange_weak(left, left - 1, std::memory_order_acq_rel, std::memory_order_relaxed)) {
          admitted_.fetch_add(1, std::memory_order_relaxed);
          return {permit_decision::kind::admitted};
        }
      }
    }
    return {permit_decision::kind::ask_redis};
  }
  virtual duration fallback_time_until_permit(time_point now) const noexcept = 0;

  std::atomic<bool> falling_back_{false};
  std::atomic<bool> resumed_untold_{false};
  alignas(64) std::atomic<std::int64_t> leased_{0};
  std::atomic<std::int64_t> lease_expires_{0};        // the clock's ticks
  // The clock's ticks: when the reserved lease starts, or Redis expects the
  // next permit; no round trip before ask_again_at_; the local share holds
  // the lease back until held_until_ (after a return).
  std::atomic<std::int64_t> permit_expected_at_{0};
  std::atomic<std::int64_t> ask_again_at_{0};
  std::atomic<std::int64_t> held_until_{0};
  alignas(64) std::atomic<std::uint64_t> admitted_{0};
};

}  // namespace detail
}  // namespace resilience::redis
