// resilience/http/upstream.hpp — an upstream made of replicas: balanced,
// its outliers ejected, its retries sent elsewhere.
//
//   namespace rhttp = resilience::http;
//   const rhttp::upstream pricing{rhttp::upstream_options{}
//                                     .name("pricing")
//                                     .resolve("pricing.internal", 8080)};  // every address a replica
//   auto res = co_await client.request(pricing, req, ctx);
//   // a static list:   .replicas({rhttp::endpoint::http("10.0.0.7", 8080), rhttp::endpoint::http("10.0.0.8", 8080)})
//
// Replicas. A static list, and/or every address a DNS name resolves to
// (a Kubernetes headless service), resolved again every resolve_every() and
// soon after a connection to one of them is refused. A replica that stays
// keeps its state; one that goes is taken out of the choice at once, and
// the calls on it finish. A request to an address keeps the name's Host
// header and, over TLS, the name for SNI and the certificate's check.
// Each replica has its own connections, breaker, Retry-After hold and
// throttle in the client; the retry budget is the upstream's.
//
// Balancing (balancer::peak_ewma, the default, as Finagle and Linkerd do):
// two replicas drawn at random, the one with the lower cost taken, a cost
// being the replica's latency, a peak-sensitive moving average that decays
// over ewma_decay() (a spike counts at once, a recovery over seconds),
// times its requests in flight plus one. A slow replica is sent little, and
// a replica that went slow is tried again once its cost has decayed.
// balancer::round_robin takes each in turn. A replica new to the set (found
// by a resolution, or back from an ejection) warms up over warm_up(): it
// takes part in one pick in ten at first, in every pick at the end, so the
// calls waiting do not all go to it at once.
//
// Outlier detection (outlier_detection_options, Envoy's and gRFC A50's
// rules and defaults): 5 consecutive failures of a replica (a 5xx, or a
// local-origin error: refused, reset, timed out) eject it for
// base_ejection_time() times the number of times it was ejected, at most
// max(base, max_ejection_time()); at most max_ejection_percent() of the set
// is ejected at once, and at least one may be. The count of ejections
// decays by one for each interval() the replica stays in. Success-rate and
// failure-percentage ejection are there to be switched on. A replica ejected
// for local-origin errors is probed with a connection 1 s after, then at
// doubling waits up to interval(): one that connects again returns at once
// (the others serve their time). When
// fewer than panic_threshold() of the replicas are left in, the calls go to
// every replica, ejected or not, as Envoy does below its healthy threshold.
//
// Retries (and an attempt its replica's breaker or throttle refused) go to
// a replica the call has not tried yet, while there is one (Envoy's
// previous_hosts); the attempt timeout and the deadline hold as for an
// endpoint.
//
// Metrics: upstream_options::meter(registry) keeps the replicas in and
// ejected as gauges; http::client_meter given to on_attempt_finished records
// each attempt's duration by the replica it went to.
//
// Events (strategy http_client, to the call's sink): on_replica_ejected
// (`delay`: how long), on_replica_returned, on_replica_added,
// on_replica_removed; `host` is the replica's key. A change no call made (a
// resolution, a probe) is reported to the next call that picks a replica.
//
// An upstream is a handle: copies share the replica set and its state,
// which lives as long as a copy or a call does. Thread-safe.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/http/endpoint.hpp>
#include <resilience/metrics.hpp>
#include <resilience/random.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace resilience::http {

namespace detail {
class upstream_core;
}

enum class balancer : std::uint8_t { peak_ewma, round_robin };

// Envoy's outlier detection (and gRFC A50's): every default is Envoy's.
class outlier_detection_options {
 public:
  // Failures of a replica in a row that eject it: 5xx responses and
  // local-origin errors (connection refused, reset, timed out), as Envoy
  // counts them without split_external_local_origin_errors. 0: never. 5.
  outlier_detection_options consecutive_5xx(std::uint32_t n) const;
  // Gateway failures in a row (502, 503, 504 and local-origin errors) that
  // eject a replica; 0, the default, for none (Envoy enforces it at 0%).
  outlier_detection_options consecutive_gateway_failure(std::uint32_t n) const;
  // How often the ejections are looked at again (success rate, failure
  // percentage, the decay of the count of ejections); the longest wait
  // between probes of an ejected replica's connection. Positive. 10 s.
  outlier_detection_options interval(duration d) const;
  // An ejection lasts this times the replica's count of ejections. Positive. 30 s.
  outlier_detection_options base_ejection_time(duration d) const;
  // The longest an ejection lasts (unless base_ejection_time() is longer). 300 s.
  outlier_detection_options max_ejection_time(duration d) const;
  // The most of the set ejected at once, in percent (0 to 100); one replica
  // may be, whatever the set's size. 10.
  outlier_detection_options max_ejection_percent(std::uint32_t percent) const;
  // Success-rate ejection (gRFC A50's success_rate_ejection): a replica
  // whose success rate over the interval is below the mean by more than
  // stdev_factor standard deviations, once minimum_hosts replicas had
  // request_volume requests each. Off by default (Envoy enforces it: say
  // success_rate() to have its 1.9, 5, 100).
  outlier_detection_options success_rate(double stdev_factor = 1.9, std::uint32_t minimum_hosts = 5,
                                         std::uint32_t request_volume = 100) const;
  // Failure-percentage ejection (gRFC A50): a replica whose failures over the
  // interval are at least `threshold` percent, once minimum_hosts replicas
  // had request_volume requests each. Off by default.
  outlier_detection_options failure_percentage(std::uint32_t threshold = 85, std::uint32_t minimum_hosts = 5,
                                               std::uint32_t request_volume = 50) const;
  // Probes a replica ejected for local-origin errors with a connection, 1 s
  // after its ejection, then at doubling waits up to interval(): it returns
  // as soon as it answers again. On by default.
  outlier_detection_options probe_ejected(bool on) const {
    return resilience::detail::with_option(*this, &outlier_detection_options::probe_, on);
  }

  std::uint32_t consecutive_5xx() const noexcept { return consecutive_5xx_; }
  std::uint32_t consecutive_gateway_failure() const noexcept { return consecutive_gateway_; }
  duration interval() const noexcept { return interval_; }
  duration base_ejection_time() const noexcept { return base_ejection_; }
  duration max_ejection_time() const noexcept { return max_ejection_; }
  std::uint32_t max_ejection_percent() const noexcept { return max_percent_; }
  struct success_rate_rule {
    double stdev_factor;
    std::uint32_t minimum_hosts;
    std::uint32_t request_volume;
  };
  const std::optional<success_rate_rule>& success_rate_ejection() const noexcept { return success_rate_; }
  struct failure_percentage_rule {
    std::uint32_t threshold;
    std::uint32_t minimum_hosts;
    std::uint32_t request_volume;
  };
  const std::optional<failure_percentage_rule>& failure_percentage_ejection() const noexcept { return failure_percentage_; }
  bool probe_ejected() const noexcept { return probe_; }

 private:
  std::uint32_t consecutive_5xx_ = 5;
  std::uint32_t consecutive_gateway_ = 0;
  duration interval_ = std::chrono::seconds(10);
  duration base_ejection_ = std::chrono::seconds(30);
  duration max_ejection_ = std::chrono::seconds(300);
  std::uint32_t max_percent_ = 10;
  std::optional<success_rate_rule> success_rate_;
  std::optional<failure_percentage_rule> failure_percentage_;
  bool probe_ = true;
};

class upstream_options {
 public:
  // The upstream's name in events, metrics and logs: 1 to 200 bytes. By
  // default the DNS name resolved, or the first replica's key.
  upstream_options name(std::string n) const;
  // Replicas named one by one (an endpoint each), in addition to those a
  // name resolves to. Each is validated as an endpoint's factory does.
  upstream_options replicas(std::vector<endpoint> list) const;
  // Every address `host` resolves to is a replica on `port` (with TLS when
  // `tls`: SNI and the certificate's check use `host`).
  upstream_options resolve(std::string host, std::uint16_t port, bool tls = false) const;
  // How often the name is resolved again: positive. 30 s. A connection to
  // one of its addresses refused resolves it again sooner (at most once a
  // second).
  upstream_options resolve_every(duration d) const;
  upstream_options balance(balancer b) const {
    return resilience::detail::with_option(*this, &upstream_options::balancer_, b);
  }
  // How fast a replica's latency estimate forgets: positive. 10 s, Finagle's.
  upstream_options ewma_decay(duration d) const;
  // How long a replica new to the set takes to get its full share: zero
  // for none. 10 s.
  upstream_options warm_up(duration d) const;
  upstream_options outlier_detection(outlier_detection_options o) const {
    return resilience::detail::with_option(*this, &upstream_options::outliers_, std::move(o));
  }
  // Below this share of replicas in (not ejected), in percent, every replica
  // is used: 0 to 100. 50, Envoy's healthy panic threshold.
  upstream_options panic_threshold(std::uint32_t percent) const;
  // Keeps the gauge resilience.http.upstream.replicas (labels upstream.name,
  // state: in, ejected) up to date in `registry`, which must outlive the
  // upstream; a temporary is refused.
  upstream_options meter(resilience::metrics& registry) const {
    return resilience::detail::with_option(*this, &upstream_options::registry_, &registry);
  }
  upstream_options meter(resilience::metrics&&) const = delete;
  // Where the balancer's draws come from; the per-thread source by default.
  // A seeded source makes the picks reproducible.
  upstream_options random(random_source r) const {
    return resilience::detail::with_option(*this, &upstream_options::random_, std::move(r));
  }

  const std::string& name() const noexcept { return name_; }
  const std::vector<endpoint>& replicas() const noexcept { return replicas_; }
  const std::optional<endpoint>& resolved_name() const noexcept { return resolve_; }
  duration resolve_every() const noexcept { return resolve_every_; }
  balancer balance() const noexcept { return balancer_; }
  duration ewma_decay() const noexcept { return ewma_decay_; }
  duration warm_up() const noexcept { return warm_up_; }
  const outlier_detection_options& outlier_detection() const noexcept { return outliers_; }
  std::uint32_t panic_threshold() const noexcept { return panic_threshold_; }
  const random_source& random() const noexcept { return random_; }
  resilience::metrics* meter() const noexcept { return registry_; }

 private:
  std::string name_;
  std::vector<endpoint> replicas_;
  std::optional<endpoint> resolve_;
  duration resolve_every_ = std::chrono::seconds(30);
  balancer balancer_ = balancer::peak_ewma;
  duration ewma_decay_ = std::chrono::seconds(10);
  duration warm_up_ = std::chrono::seconds(10);
  outlier_detection_options outliers_;
  std::uint32_t panic_threshold_ = 50;
  random_source random_;
  resilience::metrics* registry_ = nullptr;
};

// One replica as the upstream sees it now (upstream::status()).
struct replica_status {
  std::string key;  // "address:port[:tls]", the key of its connections and breaker
  bool ejected;
  bool warming_up;
  std::uint32_t ejections;     // the count an ejection's length is multiplied by
  std::int32_t in_flight;      // requests on it now
  duration latency_estimate;   // its peak EWMA
  std::uint64_t requests;      // attempts it was picked for, since it joined
  std::uint64_t failures;      // of which counted against it
};

struct upstream_status {
  std::string name;
  bool panic;  // fewer than panic_threshold() in: every replica is used
  std::vector<replica_status> replicas;
  std::size_t ejected() const noexcept;
};

class upstream {
 public:
  // Throws std::invalid_argument for options with no replica and no name to
  // resolve.
  explicit upstream(upstream_options options);

  const std::string& name() const noexcept;
  const upstream_options& options() const noexcept;
  // Every replica now, on the steady clock (see the client for another).
  upstream_status status() const;
  upstream_status status(time_point now) const;

  // The shared state, for the client.
  const std::shared_ptr<detail::upstream_core>& core() const noexcept { return core_; }

 private:
  std::shared_ptr<detail::upstream_core> core_;
};

// Where a call goes: one endpoint, or an upstream's replicas. Both convert
// to it: client.request(endpoint::http("10.0.0.7", 8080), req) and
// client.request(pricing, req) alike.
class destination {
 public:
  destination(endpoint e) : endpoint_(std::move(e)) {}
  destination(const upstream& u) : upstream_(u.core()) {}

  // The endpoint, or null for an upstream.
  const endpoint* single() const noexcept { return upstream_ ? nullptr : &endpoint_; }
  endpoint* single() noexcept { return upstream_ ? nullptr : &endpoint_; }
  detail::upstream_core* replicas() const noexcept { return upstream_.get(); }
  const std::shared_ptr<detail::upstream_core>& shared_replicas() const noexcept { return upstream_; }

 private:
  endpoint endpoint_;
  std::shared_ptr<detail::upstream_core> upstream_;
};

}  // namespace resilience::http
