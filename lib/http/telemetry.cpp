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
      case resilience::error::pool_exhausted: return "pool_exhausted";
    }
  }
  if (is_cancellation(ec)) return "cancelled";
  return std::string(ec.category().name()) + ':' + std::to_string(ec.value());
}

namespace detail {

metric_labels http_series::labels() const {
  metric_labels labels;
  for (std::size_t i = 0; i < family->labels.size(); ++i) labels.emplace_back(family->labels[i], values[i]);
  return labels;
}

namespace {

void join_key(http_series& s) {
  s.key.clear();
  for (std::size_t i = 0; i < s.family->labels.size(); ++i) s.key.append(s.values[i]).append(1, '\n');
}

// One observation of a client call or attempt, labelled as OpenTelemetry's
// http.client.request.duration is (server.address: the host asked for). An
// attempt's also says which replica answered: network.peer.address, the
// address connected to (the host when it was not resolved to one; empty
// without an endpoint).
void label_client(http_series& into, bhttp::verb v, const endpoint* to, unsigned status_code, const error_code& error,
                  bool attempt) {
  into.family = attempt ? &client_attempt_duration : &client_request_duration;
  auto& values = into.values;
  values[0] = otel_method(v);
  values[1] = to ? std::string_view(to->host) : std::string_view();
  values[2] = to ? std::to_string(to->port) : std::string();
  values[3] = to && to->tls ? "https" : "http";
  values[4] = status_text(status_code);
  values[5] = status_code >= 400 ? values[4] : otel_error_type(error);
  if (attempt) values[6] = !to ? std::string_view() : !to->address.empty() ? std::string_view(to->address) : values[1];
  join_key(into);
}

}  // namespace

void label_series(const client_call_event& e, http_series& into) {
  label_client(into, e.method, e.to, e.status, e.error, false);
}
void label_series(const client_attempt_event& e, http_series& into) {
  label_client(into, e.method, e.to, e.status, e.error, true);
}
void label_series(const request_finished& e, http_series& into) {
  into.family = &server_request_duration;
  into.values[0] = otel_method(e.method);
  into.values[1] = "http";
  into.values[2] = status_text(e.status);
  into.values[3] = e.status >= 500 ? into.values[2] : std::string();
  join_key(into);
}

}  // namespace detail

namespace {

using series_cache = detail::http_series_cache<metric_histogram_ref>;

// Into the registry, with OpenTelemetry's HTTP buckets.
void record(metrics& registry, series_cache& cache, const detail::http_series& s, duration elapsed) {
  const auto h = cache.find(s, [&](const detail::http_series& series) {
    return registry.histogram(series.family->name, series.labels(), series.family->help, http_duration_buckets());
  });
  if (h) h->record(elapsed);
}

template <class Event>
void record(metrics& registry, series_cache& cache, const Event& e) {
  thread_local detail::http_series series;
  detail::label_series(e, series);
  record(registry, cache, series, e.elapsed);
}

}  // namespace

struct client_meter::state {
  metrics* registry;
  series_cache calls;     // http.client.request.duration
  series_cache attempts;  // resilience.http.client.attempt.duration
};
struct server_meter::state {
  metrics* registry;
  series_cache requests;                         // http.server.request.duration
  std::vector<metric_counter_ref> slow_clients;  // by client_phase
};

client_meter::client_meter(metrics& registry) : state_(std::make_shared<state>()) { state_->registry = &registry; }

void client_meter::operator()(const client_call_event& e) const { record(*state_->registry, state_->calls, e); }

void client_meter::operator()(const client_attempt_event& e) const { record(*state_->registry, state_->attempts, e); }

server_meter::server_meter(metrics& registry) : state_(std::make_shared<state>()) {
  state_->registry = &registry;
  const auto& family = detail::server_slow_clients;
  for (const char* phase : detail::client_phase_names)
    state_->slow_clients.push_back(registry.counter(family.name, {{family.labels[0], phase}}, family.help));
}

void server_meter::operator()(client_phase stalled_in) const {
  state_->slow_clients.at(static_cast<std::size_t>(stalled_in)).add();
}

void server_meter::operator()(const request_finished& e) const { record(*state_->registry, state_->requests, e); }

}  // namespace resilience::http
