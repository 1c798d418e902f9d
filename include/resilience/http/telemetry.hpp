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

#include <resilience/http/client.hpp>
#include <resilience/http/server.hpp>
#include <resilience/metrics.hpp>

#include <memory>

namespace resilience::http {

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
