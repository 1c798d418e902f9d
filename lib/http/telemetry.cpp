#include <resilience/http/telemetry.hpp>

#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace resilience::http {

namespace {

namespace bhttp = boost::beast::http;

// A meter's series by their labels, joined into one key: each combination's
// histogram is made once, in the registry.
struct series_cache {
  metrics* registry;
  const char* name;
  const char* help;
  std::mutex mutex;
  std::unordered_map<std::string, metric_histogram_ref> series;

  // `labels()` makes the series' labels, on the first call with this key only.
  template <class Labels>
  void record(const std::string& key, Labels labels, duration d) {
    std::unique_lock lock(mutex);
    auto it = series.find(key);
    if (it == series.end()) {
      lock.unlock();
      // The registry has its own lock; two threads making the same series get
      // the same one. A hook must not throw: a name the application made
      // otherwise is its error, and these calls go unrecorded.
      std::optional<metric_histogram_ref> made;
      try {
        made = registry->histogram(name, labels(), help, http_duration_buckets());
      } catch (const std::exception&) {
        return;
      }
      lock.lock();
      it = series.emplace(key, *made).first;
    }
    const metric_histogram_ref h = it->second;
    lock.unlock();
    h.record(d);
  }
};

std::string status_text(unsigned status) { return status == 0 ? std::string() : std::to_string(status); }

}  // namespace

const char* otel_method(bhttp::verb v) noexcept {
  switch (v) {
    case bhttp::verb::get: return "GET";
    case bhttp::verb::head: return "HEAD";
    case bhttp::verb::post: return "POST";
    case bhttp::verb::put: return "PUT";
    case bhttp::verb::delete_: return "DELETE";
    case bhttp::verb::connect: return "CONNECT";
    case bhttp::verb::options: return "OPTIONS";
    case bhttp::verb::trace: return "TRACE";
    case bhttp::verb::patch: return "PATCH";
    default: return "_OTHER";
  }
}

std::string otel_error_type(const error_code& ec) {
  if (!ec) return {};
  if (ec.category() == resilience::error_category()) {
    switch (static_cast<resilience::error>(ec.value())) {
      case resilience::error::timeout: return "timeout";
      case resilience::error::deadline_exceeded: return "deadline_exceeded";
      case resilience::error::circuit_open: return "circuit_open";
      case resilience::error::retry_budget_exhausted: return "retry_budget_exhausted";
      case resilience::error::bulkhead_full: return "bulkhead_full";
      case resilience::error::rate_limited: return "rate_limited";
      case resilience::error::throttled: return "throttled";
      case resilience::error::no_replica: return "no_replica";
    }
  }
  if (is_cancellation(ec)) return "cancelled";
  return std::string(ec.category().name()) + ':' + std::to_string(ec.value());
}

struct client_meter::state {
  series_cache calls;     // http.client.request.duration
  series_cache attempts;  // resilience.http.client.attempt.duration
};
struct server_meter::state : series_cache {
  std::vector<metric_counter_ref> slow_clients;  // by client_phase
};

client_meter::client_meter(metrics& registry) : state_(std::make_shared<state>()) {
  state_->calls.registry = &registry;
  state_->calls.name = "http.client.request.duration";
  state_->calls.help = "Duration of HTTP client requests.";
  state_->attempts.registry = &registry;
  state_->attempts.name = "resilience.http.client.attempt.duration";
  state_->attempts.help = "Duration of each attempt of an HTTP client call, by the replica it went to.";
}

namespace {
// One observation of a client call or attempt, labelled as OpenTelemetry's
// http.client.request.duration is (server.address: the host asked for). An
// attempt's also says which replica answered: network.peer.address, the
// address connected to (the host when it was not resolved to one).
void record_client(series_cache& into, boost::beast::http::verb v, const endpoint* to, unsigned status_code,
                   const error_code& error, duration elapsed, bool with_peer) {
  const std::string error_type = status_code >= 400 ? std::to_string(status_code) : otel_error_type(error);
  const char* method = otel_method(v);
  const std::string_view host = to ? std::string_view(to->host) : std::string_view();
  const std::string_view peer = !with_peer ? std::string_view() : !to->address.empty() ? to->address : host;
  const std::string port = to ? std::to_string(to->port) : std::string();
  const char* scheme = to && to->tls ? "https" : "http";
  const std::string status = status_text(status_code);
  thread_local std::string key;
  key.clear();
  for (const std::string_view part : {std::string_view(method), host, std::string_view(port), std::string_view(scheme),
                                      std::string_view(status), std::string_view(error_type), peer})
    key.append(part).append(1, '\n');
  into.record(
      key,
      [&] {
        metric_labels labels{{"http.request.method", method}, {"server.address", std::string(host)},
                             {"server.port", port},           {"url.scheme", scheme},
                             {"http.response.status_code", status}, {"error.type", error_type}};
        if (with_peer) labels.emplace_back("network.peer.address", std::string(peer));
        return labels;
      },
      elapsed);
}
}  // namespace

void client_meter::operator()(const client_call_event& e) const {
  record_client(state_->calls, e.method, e.to, e.status, e.error, e.elapsed, false);
}

void client_meter::operator()(const client_attempt_event& e) const {
  record_client(state_->attempts, e.method, e.to, e.status, e.error, e.elapsed, e.to != nullptr);
}

server_meter::server_meter(metrics& registry) : state_(std::make_shared<state>()) {
  state_->registry = &registry;
  state_->name = "http.server.request.duration";
  state_->help = "Duration of HTTP server requests.";
  for (const char* phase : {"header", "body", "write"}) {
    state_->slow_clients.push_back(registry.counter(
        "resilience.http.server.slow_clients", {{"client.phase", phase}},
        "Connections closed because the client stalled: mid-request (header, body) or not reading the answer (write)."));
  }
}

void server_meter::operator()(client_phase stalled_in) const {
  static_assert(static_cast<int>(client_phase::header) == 0 && static_cast<int>(client_phase::body) == 1 &&
                static_cast<int>(client_phase::write) == 2);
  state_->slow_clients.at(static_cast<std::size_t>(stalled_in)).add();
}

void server_meter::operator()(const request_finished& e) const {
  const char* method = otel_method(e.method);
  const std::string status = status_text(e.status);
  thread_local std::string key;
  key.assign(method).append(1, '\n').append(status);
  state_->record(
      key,
      [&] {
        return metric_labels{{"http.request.method", method},
                             {"url.scheme", "http"},
                             {"http.response.status_code", status},
                             {"error.type", e.status >= 500 ? status : std::string()}};
      },
      e.elapsed);
}

}  // namespace resilience::http
