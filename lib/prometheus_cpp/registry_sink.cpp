#include <resilience/prometheus_cpp.hpp>

#include <resilience/detail/metric_families.hpp>
#include <resilience/http/telemetry.hpp>
#include <resilience/metrics.hpp>
#include <resilience/prometheus.hpp>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace resilience::prometheus_cpp {

namespace {

using resilience::detail::metric_family_info;
using counter_family = prometheus::Family<prometheus::Counter>;
using histogram_family = prometheus::Family<prometheus::Histogram>;

// The family's labels, named as prometheus_text() names them, with `values`
// in the family's label order.
template <class Values>
prometheus::Labels labels_of(const metric_family_info& family, const Values& values) {
  prometheus::Labels labels;
  for (std::size_t i = 0; i < family.labels.size(); ++i)
    labels.emplace(prometheus_label_name(family.labels[i]), std::string(values[i]));
  return labels;
}

// OpenTelemetry's HTTP buckets (http_duration_buckets()), in seconds.
const prometheus::Histogram::BucketBoundaries& http_bounds() {
  static const prometheus::Histogram::BucketBoundaries bounds = [] {
    prometheus::Histogram::BucketBoundaries b;
    for (const duration d : http_duration_buckets()) b.push_back(std::chrono::duration<double>(d).count());
    return b;
  }();
  return bounds;
}

// One pipeline's events, counted as metrics::events(pipeline) counts them.
class pipeline_events final : public event_sink {
 public:
  pipeline_events(counter_family& family, std::string name) : family_(family), name_(std::move(name)) {}

  void on_event(const event& e) noexcept override {
    prometheus::Counter* c =
        cells_.find(e, [&](const char* strategy, const char* name, const char* outcome, const char* status) {
          const char* values[] = {name_.c_str(), strategy, name, outcome, status};
          prometheus::Labels labels;
          resilience::detail::for_each_event_label(
              values, [&](const char* n, const char* value) { labels.emplace(prometheus_label_name(n), value); });
          return &family_.Add(labels);
        });
    if (c) c->Increment();
  }

 private:
  counter_family& family_;
  const std::string name_;
  resilience::detail::event_counters<prometheus::Counter> cells_;
};

}  // namespace

struct registry_sink::state {
  explicit state(prometheus::Registry& r) : registry(r) {}

  prometheus::Registry& registry;
  std::mutex mutex;
  // Registered on first use: a registry made with InsertBehavior::Throw
  // refuses a second registration of a name.
  std::map<const metric_family_info*, prometheus::Collectable*> families;
  std::map<std::string, std::unique_ptr<pipeline_events>, std::less<>> sinks;

  template <class Family>
  Family& family_locked(const metric_family_info& f) {
    auto& slot = families[&f];
    if (!slot) {
      const std::string name = prometheus_name(f.name, f.kind, f.unit);
      if constexpr (std::is_same_v<Family, counter_family>)
        slot = &prometheus::BuildCounter().Name(name).Help(f.help).Register(registry);
      else
        slot = &prometheus::BuildHistogram().Name(name).Help(f.help).Register(registry);
    }
    return static_cast<Family&>(*slot);
  }
  template <class Family>
  Family& family(const metric_family_info& f) {
    std::lock_guard lock(mutex);
    return family_locked<Family>(f);
  }
};

registry_sink::registry_sink(prometheus::Registry& registry) : state_(std::make_unique<state>(registry)) {}
registry_sink::~registry_sink() = default;

event_sink& registry_sink::events(std::string_view pipeline) & {
  if (pipeline.empty()) throw std::invalid_argument("prometheus_cpp::registry_sink::events: pipeline must not be empty");
  std::lock_guard lock(state_->mutex);
  auto it = state_->sinks.find(pipeline);
  if (it == state_->sinks.end()) {
    auto& family = state_->family_locked<counter_family>(resilience::detail::strategy_events);
    it = state_->sinks.emplace(std::string(pipeline), std::make_unique<pipeline_events>(family, std::string(pipeline)))
             .first;
  }
  return *it->second;
}

namespace {

using series_cache = http::detail::http_series_cache<prometheus::Histogram*>;

// As http::client_meter and http::server_meter record it: the same labels
// (label_series), into the registry's family.
template <class Event>
void record(histogram_family& family, series_cache& cache, const Event& e) {
  thread_local http::detail::http_series series;
  http::detail::label_series(e, series);
  const auto h = cache.find(series, [&](const http::detail::http_series& s) {
    return &family.Add(labels_of(*s.family, s.values), http_bounds());
  });
  if (h) (*h)->Observe(std::chrono::duration<double>(e.elapsed).count());
}

}  // namespace

// (Constructors: Clang 14 has no parenthesised aggregate initialisation.)
struct client_meter::state {
  state(histogram_family& c, histogram_family& a) : calls(c), attempts(a) {}

  histogram_family& calls;
  histogram_family& attempts;
  series_cache call_series;
  series_cache attempt_series;
};

client_meter::client_meter(registry_sink& sink)
    : state_(std::make_shared<state>(
          sink.state_->family<histogram_family>(http::detail::client_request_duration),
          sink.state_->family<histogram_family>(http::detail::client_attempt_duration))) {}

void client_meter::operator()(const http::client_call_event& e) const {
  record(state_->calls, state_->call_series, e);
}
void client_meter::operator()(const http::client_attempt_event& e) const {
  record(state_->attempts, state_->attempt_series, e);
}

struct server_meter::state {
  explicit state(histogram_family& r) : requests(r) {}

  histogram_family& requests;
  series_cache request_series;
  std::vector<prometheus::Counter*> slow_clients;  // by client_phase
};

server_meter::server_meter(registry_sink& sink)
    : state_(std::make_shared<state>(sink.state_->family<histogram_family>(http::detail::server_request_duration))) {
  const auto& info = http::detail::server_slow_clients;
  auto& family = sink.state_->family<counter_family>(info);
  for (const char* phase : http::detail::client_phase_names) {
    const char* values[] = {phase};
    state_->slow_clients.push_back(&family.Add(labels_of(info, values)));
  }
}

void server_meter::operator()(const http::request_finished& e) const {
  record(state_->requests, state_->request_series, e);
}
void server_meter::operator()(http::client_phase stalled_in) const {
  state_->slow_clients.at(static_cast<std::size_t>(stalled_in))->Increment();
}

}  // namespace resilience::prometheus_cpp
