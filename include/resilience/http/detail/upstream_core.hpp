// resilience/http/detail/upstream_core.hpp — an upstream's replica set and
// what it keeps of each replica: its load, its latency estimate, its
// failures, its ejection. Not templated on the clock: every step takes the
// time (lib/http/upstream.cpp). Not public API; upstream.hpp states the
// contract.
//
// One mutex guards the set: a pick and a result each take it for a few
// hundred nanoseconds, without allocating once the set is built. A step
// tells what it did (an ejection, a return, a replica added or gone) in the
// caller's news, for the call to report; what no call did (a probe that
// connected, a resolution) waits for the next pick.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/event.hpp>
#include <resilience/http/endpoint.hpp>
#include <resilience/http/upstream.hpp>
#include <resilience/random.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace resilience::http::detail {

// How an attempt on a replica ended, as the upstream counts it.
enum class replica_outcome : std::uint8_t {
  success,        // an answer that is not a 5xx (a 4xx too: the replica answered)
  server_error,   // a 5xx other than 502, 503, 504
  gateway_error,  // 502, 503, 504
  local_origin,   // refused, reset, timed out: the replica did not answer
  none,           // cancelled, or refused here before reaching it: counts for nothing
};

struct replica {
  replica(endpoint e, std::uint32_t id, time_point joined);

  const endpoint to;
  const std::string key;
  const std::uint32_t id;  // unique in its upstream, never reused

  // Guarded by the core's mutex.
  time_point joined;  // for the warm-up: when it came in (or back)
  std::int32_t in_flight = 0;
  bool measured = false;  // has answered once: ewma_ns holds an estimate
  double ewma_ns = 0;     // the peak EWMA of its latency
  time_point ewma_at{};
  std::uint32_t consecutive_5xx = 0;
  std::uint32_t consecutive_gateway = 0;
  std::uint64_t interval_successes = 0;
  std::uint64_t interval_failures = 0;
  std::uint64_t requests = 0;
  std::uint64_t failures = 0;
  bool ejected = false;
  bool by_local_origin = false;  // its ejection came from errors of its own connections
  bool probing = false;
  bool gone = false;  // left the set: its calls finish, no new ones come
  std::uint32_t ejections = 0;
  time_point ejected_until{};
  time_point next_probe{};
  std::uint32_t probe_failures = 0;  // since its ejection
};

// What a step did, for the call that made it to report.
struct upstream_news {
  struct item {
    event_kind kind;
    std::string host;  // the replica's key
    duration delay{};  // an ejection's length
  };
  std::vector<item> items;
  // Replicas whose connection to probe, and whether to resolve the name
  // again: work the caller starts in the background.
  std::vector<std::shared_ptr<replica>> probes;
  bool resolve = false;

  bool empty() const noexcept { return items.empty() && probes.empty() && !resolve; }
};

class upstream_core : public std::enable_shared_from_this<upstream_core> {
 public:
  explicit upstream_core(upstream_options o);
  upstream_core(const upstream_core&) = delete;
  upstream_core& operator=(const upstream_core&) = delete;

  // A replica for an attempt: one `tried` does not hold while there is one,
  // by the balancer, among those in (all, in a panic); its request counted
  // in flight until finished(). Null when the set is empty.
  std::shared_ptr<replica> pick(time_point now, std::span<const std::uint32_t> tried, upstream_news& news);
  // The attempt on `r` ended: its latency (from the pick) and outcome.
  void finished(replica& r, replica_outcome outcome, duration latency, time_point now, upstream_news& news);

  // A probe of `r`'s connection ended (connected or not).
  void probed(replica& r, bool connected, time_point now);
  // The addresses the name resolved to (none: the resolution failed, and
  // the set stays as it is).
  void resolved(const std::vector<std::string>& addresses, time_point now);
  // A probe or a resolution that never ended (its io_context destroyed
  // under it): the next call may start another.
  void probe_abandoned(replica& r);
  void resolution_abandoned();

  // No replica yet, and a name to resolve: the first calls resolve it.
  bool awaiting_resolution() const;

  upstream_status status(time_point now) const;
  const upstream_options& options() const noexcept { return options_; }
  const std::string& name() const noexcept { return name_; }

 private:
  void sweep(time_point now, upstream_news& news);
  void return_due(time_point now, upstream_news& news);
  void eject(replica& r, bool local_origin, time_point now, upstream_news& news);
  void bring_back(replica& r, time_point now, upstream_news& news);
  void add(endpoint e, time_point now, upstream_news& news);
  bool panicking() const noexcept;
  double cost(const replica& r, time_point now) const noexcept;
  double warm_share(const replica& r, time_point now) const noexcept;
  duration probe_wait(std::uint32_t failed) const noexcept;
  std::size_t draw(std::size_t n) const noexcept;
  void take_pending(upstream_news& news);
  void publish() noexcept;  // the gauges, after a change

  const upstream_options options_;
  const std::string name_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<replica>> replicas_;  // in the set (not gone)
  std::vector<replica*> candidates_;                // a pick's scratch, kept for its capacity
  std::uint32_t next_id_ = 0;
  std::size_t next_turn_ = 0;  // round robin
  time_point next_sweep_ = time_point::min();
  time_point last_sweep_ = time_point::min();
  // The latency of the set's answers, a moving average as a replica's: what
  // a replica that has not answered yet is taken to cost.
  double typical_ns_ = 0;
  bool typical_known_ = false;
  time_point next_resolve_ = time_point::min();
  time_point earliest_refused_resolve_ = time_point::min();
  bool resolving_ = false;
  std::vector<upstream_news::item> pending_;  // what no call did, for the next pick
  std::optional<metric_gauge_ref> in_gauge_, ejected_gauge_;  // with options().meter()
};

}  // namespace resilience::http::detail
