// resilience/prometheus_cpp.hpp — the library's events and HTTP metrics
// recorded into a prometheus-cpp registry, for a service that already
// exposes its metrics with prometheus-cpp (resilience::prometheus: built
// when prometheus-cpp and resilience::http are). resilience::metrics
// (metrics.hpp) stays the default, with no dependency.
//
//   prometheus::Registry& registry = ...;  // the application's, served by its Exposer
//   resilience::prometheus_cpp::registry_sink sink{registry};
//   const auto backend = resilience::pipeline(resilience::retry_policy{}, breaker)
//                          .events(sink.events("backend"));
//   rhttp::client upstream{rhttp::client_options{}.on_call_finished(resilience::prometheus_cpp::client_meter{sink})};
//   const resilience::prometheus_cpp::server_meter served{sink};
//   rhttp::server api{handler, rhttp::server_options{}.on_request_finished(served).on_slow_client(served)};
//
// The same families, labels and values as resilience::metrics and the HTTP
// meters of http/telemetry.hpp record, named as prometheus_text() writes
// them (prometheus_name(): resilience_strategy_events_total,
// http_client_request_duration_seconds, resilience_http_client_attempt_duration_seconds,
// http_server_request_duration_seconds, resilience_http_server_slow_clients_total;
// label names with underscores), with OpenTelemetry's HTTP buckets (5 ms to
// 10 s). Not here: the metered stages' durations (resilience.pipeline.duration,
// resilience.strategy.attempt.duration) and an upstream's replica gauge,
// which only a resilience::metrics records.
//
// Each family is registered the first time something needs it (the first
// events(), client_meter or server_meter), under the sink's lock. A registry
// made with InsertBehavior::Throw that already has a family of that name
// makes it throw prometheus-cpp's std::invalid_argument.
//
// Cost. An event is a virtual call and an atomic add on a double (a CAS
// loop), the first event of each series (kind, outcome, status) adding it
// under the family's lock; an HTTP observation is a look-up under the meter's mutex,
// then prometheus::Histogram::Observe, which takes the histogram's own.
//
// Lifetime: the registry is held by reference. It must outlive the sink and
// every meter, and keep the families the sink registered (no
// Registry::Remove of them); the sink must outlive every pipeline, client
// and server given one of its events().
#pragma once

#include <resilience/event.hpp>
#include <resilience/http/client_options.hpp>
#include <resilience/http/server_options.hpp>

#include <memory>
#include <string_view>

namespace prometheus {
class Registry;
}

namespace resilience::prometheus_cpp {

class registry_sink {
 public:
  explicit registry_sink(prometheus::Registry& registry);
  ~registry_sink();
  registry_sink(const registry_sink&) = delete;
  registry_sink& operator=(const registry_sink&) = delete;

  // The event sink of one pipeline, as metrics::events(pipeline): give it to
  // pipeline(...).events(), a client's or a server's options. The same name
  // gives the same sink, owned by this one. An empty name:
  // std::invalid_argument.
  event_sink& events(std::string_view pipeline) &;
  event_sink& events(std::string_view) && = delete;  // gone before the first event

 private:
  friend class client_meter;
  friend class server_meter;
  struct state;
  std::unique_ptr<state> state_;
};

// http.client.request.duration for on_call_finished, and
// resilience.http.client.attempt.duration for on_attempt_finished. A shared
// handle: copies record into the same series. Needs the registry, not the
// sink, to outlive it.
class client_meter {
 public:
  explicit client_meter(registry_sink& sink);
  void operator()(const http::client_call_event& e) const;
  void operator()(const http::client_attempt_event& e) const;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

// http.server.request.duration for on_request_finished, and
// resilience.http.server.slow_clients for on_slow_client (its three series
// written from the start, at 0).
class server_meter {
 public:
  explicit server_meter(registry_sink& sink);
  void operator()(const http::request_finished& e) const;
  void operator()(http::client_phase stalled_in) const;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace resilience::prometheus_cpp
