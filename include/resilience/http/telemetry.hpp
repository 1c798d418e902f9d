// resilience/http/telemetry.hpp — OpenTelemetry's HTTP metrics, recorded into
// a resilience::metrics registry and served with everything else in it.
//
//   resilience::metrics telemetry;
//   rhttp::client upstream{rhttp::client_options{}.on_call_finished(rhttp::client_meter{telemetry})};
//   const rhttp::server_meter served{telemetry};
//   rhttp::server api{handler, rhttp::server_options{}.on_request_finished(served).on_slow_client(served)};
//
// What is recorded (OpenTelemetry's HTTP semantic conventions; seconds, with
// their default buckets, http_duration_buckets(): 5 ms to 10 s):
//
//   http.client.request.duration   one per client call, retries and waits included
//       http.request.method, server.address, server.port, url.scheme,
//       http.response.status_code (empty without a response), error.type
//   resilience.http.client.attempt.duration   one per attempt (a client_meter
//       given to on_attempt_finished too), the same labels and
//       network.peer.address, the replica it went to (the address connected
//       to, or the host when it was not resolved to one), so an upstream's
//       replicas are told apart
//   http.server.request.duration   one per request the server answered or refused
//       http.request.method, url.scheme, http.response.status_code (empty when
//       none was sent: the caller was cancelled), error.type
//   resilience.http.server.slow_clients   a counter (the library's own, not
//       OpenTelemetry's) of connections closed because the client stalled,
//       by client.phase: header or body (mid-request), write (not reading
//       the answer); a server_meter given to on_slow_client() too. Its three
//       series are written from the start, at 0.
//
// http.request.method is the method for the nine of RFC 9110 and PATCH,
// "_OTHER" for any other (and for a request refused before its method was
// read). error.type: for a response, its status as text when it is an error
// (4xx and 5xx for a client, 5xx for a server); for a client call that ended
// without one, the error: this library's own by name (timeout,
// deadline_exceeded, circuit_open, ...), operation_aborted as "cancelled", any
// other as "category:value" (system:111); empty on success. The label set
// is fixed, so every series carries all of them; an empty value is an absent
// label in Prometheus' text.
//
// Cost per call: building a key in a per-thread buffer and a look-up under the
// meter's own mutex (about 50 ns uncontended); a new combination of labels
// also takes the registry's lock once. A meter is a shared handle: copies
// record into the same series. The registry must outlive it.
#pragma once

#include <resilience/detail/metric_families.hpp>
#include <resilience/http/client.hpp>
#include <resilience/http/server.hpp>
#include <resilience/metrics.hpp>

#include <array>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace resilience::http {

namespace detail {

using resilience::detail::metric_family_info;

// The meters' families: the one place their names, help and label names are
// written, for every registry they are recorded in (client_meter and
// server_meter below; prometheus_cpp.hpp's, into a prometheus::Registry).
inline constexpr const char* client_request_labels[] = {"http.request.method", "server.address", "server.port",
                                                        "url.scheme", "http.response.status_code", "error.type"};
inline constexpr metric_family_info client_request_duration{"http.client.request.duration", "s",
                                                           metric_kind::histogram, "Duration of HTTP client requests.",
                                                           client_request_labels};
inline constexpr const char* client_attempt_labels[] = {"http.request.method", "server.address", "server.port",
                                                        "url.scheme",          "http.response.status_code",
                                                        "error.type",          "network.peer.address"};
inline constexpr metric_family_info client_attempt_duration{
    "resilience.http.client.attempt.duration", "s", metric_kind::histogram,
    "Duration of each attempt of an HTTP client call, by the replica it went to.", client_attempt_labels};
inline constexpr const char* server_request_labels[] = {"http.request.method", "url.scheme",
                                                        "http.response.status_code", "error.type"};
inline constexpr metric_family_info server_request_duration{"http.server.request.duration", "s",
                                                           metric_kind::histogram, "Duration of HTTP server requests.",
                                                           server_request_labels};
inline constexpr const char* slow_client_labels[] = {"client.phase"};
inline constexpr metric_family_info server_slow_clients{
    "resilience.http.server.slow_clients", "", metric_kind::counter,
    "Connections closed because the client stalled: mid-request (header, body) or not reading the answer (write).",
    slow_client_labels};
// client.phase's values, by client_phase.
inline constexpr const char* client_phase_names[] = {"header", "body", "write"};
static_assert(static_cast<int>(client_phase::header) == 0 && static_cast<int>(client_phase::body) == 1 &&
              static_cast<int>(client_phase::write) == 2);

// One observation's series: its family and label values, in the family's
// label order, and `key`, the values joined, by which a meter finds it.
// Refilled for each observation (no allocation once its strings have grown).
struct http_series {
  const metric_family_info* family = nullptr;
  std::array<std::string, std::size(client_attempt_labels)> values;
  std::string key;

  metric_labels labels() const;  // for a new series only
};
void label_series(const client_call_event& e, http_series& into);
void label_series(const client_attempt_event& e, http_series& into);
void label_series(const request_finished& e, http_series& into);

// A meter's series by key, each made once by make(series), which may throw
// (then the observation goes unrecorded: a hook must not throw).
template <class Series>
class http_series_cache {
 public:
  template <class Make>
  std::optional<Series> find(const http_series& s, Make&& make) {
    std::unique_lock lock(mutex_);
    auto it = series_.find(s.key);
    if (it == series_.end()) {
      lock.unlock();
      // Made outside the lock: a registry has its own, and two threads
      // making the same series get the same one.
      std::optional<Series> made;
      try {
        made.emplace(make(s));
      } catch (const std::exception&) {
        return std::nullopt;
      }
      lock.lock();
      it = series_.emplace(s.key, *made).first;
    }
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, Series> series_;
};

}  // namespace detail

class client_meter {
 public:
  explicit client_meter(metrics& registry);
  explicit client_meter(metrics&& registry) = delete;  // gone before the first call
  void operator()(const client_call_event& e) const;
  // Given to on_attempt_finished: resilience.http.client.attempt.duration.
  void operator()(const client_attempt_event& e) const;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

class server_meter {
 public:
  explicit server_meter(metrics& registry);
  explicit server_meter(metrics&& registry) = delete;
  void operator()(const request_finished& e) const;
  void operator()(client_phase stalled_in) const;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

// The method as OpenTelemetry labels it ("_OTHER" for one it does not know).
const char* otel_method(boost::beast::http::verb v) noexcept;
// error.type for a call that ended without a response.
std::string otel_error_type(const error_code& ec);

}  // namespace resilience::http
