#include <resilience/detail/metric_families.hpp>
#include <resilience/metrics.hpp>
#include <resilience/prometheus.hpp>

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

namespace resilience {

namespace {

constexpr duration longest_bound = std::chrono::hours(24);

void check_name(std::string_view name, const char* who, const char* field) {
  if (name.empty()) throw std::invalid_argument(std::string("metrics::") + who + ": " + field + " must not be empty");
}

// OpenTelemetry's names: letters, digits, '_' and '.', not starting with a digit.
void check_instrument_name(std::string_view name, const char* who, const char* field) {
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  bool ok = !name.empty() && letter(name.front());
  for (const char c : name) ok = ok && (letter(c) || (c >= '0' && c <= '9') || c == '.');
  if (!ok)
    throw std::invalid_argument(std::string("metrics::") + who + ": " + field + " \"" + std::string(name) +
                                "\" must be letters, digits, '_' and '.', not starting with a digit");
}

constexpr std::array<duration, 14> http_bounds{
    std::chrono::milliseconds(5),   std::chrono::milliseconds(10),  std::chrono::milliseconds(25),
    std::chrono::milliseconds(50),  std::chrono::milliseconds(75),  std::chrono::milliseconds(100),
    std::chrono::milliseconds(250), std::chrono::milliseconds(500), std::chrono::milliseconds(750),
    std::chrono::seconds(1),        std::chrono::milliseconds(2500), std::chrono::seconds(5),
    std::chrono::milliseconds(7500), std::chrono::seconds(10)};

}  // namespace

std::span<const duration> http_duration_buckets() noexcept { return http_bounds; }

metrics_options::metrics_options() { *this = exponential_buckets(std::chrono::milliseconds(1), 2.0, 15); }

metrics_options metrics_options::exponential_buckets(duration first, double factor, std::size_t count) const {
  const char* field = "metrics_options::exponential_buckets";
  if (first <= duration::zero()) throw std::invalid_argument(std::string(field) + ": first must be positive");
  if (!(factor > 1.0) || !std::isfinite(factor))
    throw std::invalid_argument(std::string(field) + ": factor must be a finite number above 1");
  if (count < 1 || count > max_buckets)
    throw std::invalid_argument(std::string(field) + ": count must be in [1, 32]");
  metrics_options o = *this;
  double bound = static_cast<double>(first.count());
  for (std::size_t i = 0; i < count; ++i, bound *= factor) {
    if (bound > static_cast<double>(longest_bound.count()))
      throw std::invalid_argument(std::string(field) + ": the last bound must be at most 24 h");
    o.bounds_[i] = duration(static_cast<duration::rep>(std::llround(bound)));
    if (i > 0 && o.bounds_[i] <= o.bounds_[i - 1])
      throw std::invalid_argument(std::string(field) + ": factor too small for first: two bounds round to one");
  }
  o.size_ = count;
  return o;
}

metrics_options metrics_options::buckets(std::initializer_list<duration> bounds) const {
  const char* field = "metrics_options::buckets";
  if (bounds.size() < 1 || bounds.size() > max_buckets)
    throw std::invalid_argument(std::string(field) + ": give 1 to 32 bounds");
  metrics_options o = *this;
  std::size_t i = 0;
  for (const duration b : bounds) {
    if (b <= duration::zero()) throw std::invalid_argument(std::string(field) + ": bounds must be positive");
    if (b > longest_bound) throw std::invalid_argument(std::string(field) + ": bounds must be at most 24 h");
    if (i > 0 && b <= o.bounds_[i - 1])
      throw std::invalid_argument(std::string(field) + ": bounds must be strictly increasing");
    o.bounds_[i++] = b;
  }
  o.size_ = i;
  return o;
}

namespace detail {

call_outcome current_exception_outcome() noexcept {
  try {
    throw;
  } catch (const boost::system::system_error& e) {
    return is_cancellation(e.code()) ? call_outcome::cancelled : call_outcome::error;
  } catch (...) {
    return call_outcome::exception;
  }
}

}  // namespace detail

// Series live in maps of unique_ptr: their addresses, which hooks and stages
// keep, never move. Keys are the label values in the family's label order,
// so iterating a map gives the sorted order writers need.
struct metrics::registry {
  using event_key = std::array<std::string, 5>;     // pipeline, strategy, event, outcome, status ("": none)
  using attempt_key = std::array<std::string, 3>;   // pipeline, attempt number, outcome
  using pipeline_key = std::array<std::string, 2>;  // pipeline, outcome

  std::mutex mutex;
  std::map<event_key, std::unique_ptr<detail::metric_counter>> events;
  std::map<attempt_key, std::unique_ptr<detail::metric_histogram>> attempts;
  std::map<pipeline_key, std::unique_ptr<detail::metric_histogram>> pipelines;
  std::map<std::string, std::unique_ptr<pipeline_events>, std::less<>> sinks;
  std::map<std::tuple<bool, std::string>, std::unique_ptr<detail::duration_series>> stages;

  // The application's instruments, by name.
  struct user_family {
    metric_kind kind;
    std::string help;
    std::vector<std::string> label_names;
    std::vector<duration> bounds;  // histograms
    std::map<std::vector<std::string>, std::unique_ptr<user_series>> series;  // by label values
  };
  std::map<std::string, user_family, std::less<>> user;
  // Every family's name as Prometheus' text writes it (prometheus_name), to
  // its OpenTelemetry name: two names that would be written alike are refused.
  std::map<std::string, std::string, std::less<>> exported = [] {
    std::map<std::string, std::string, std::less<>> own;
    for (const auto* f : {&detail::pipeline_duration, &detail::attempt_duration, &detail::strategy_events})
      own.emplace(prometheus_name(f->name, f->kind, f->unit), f->name);
    return own;
  }();

  template <class Map, class Key>
  static auto* cell(Map& map, Key key) {
    auto& slot = map[std::move(key)];
    if (!slot) slot = std::make_unique<typename std::remove_cvref_t<decltype(slot)>::element_type>();
    return slot.get();
  }
};

struct metrics::user_series {
  std::atomic<std::uint64_t> count{0};  // counters
  std::atomic<std::int64_t> gauge{0};   // gauges
  detail::metric_histogram histogram;   // histograms
};


// One pipeline's sink: its counters by (event, outcome or none), found in
// the registry the first time each is seen, then read without a lock.
class metrics::pipeline_events final : public event_sink {
 public:
  pipeline_events(registry& r, std::string name) : registry_(r), name_(std::move(name)) {}

  void on_event(const event& e) noexcept override {
    detail::metric_counter* c =
        cells_.find(e, [&](const char* strategy, const char* name, const char* outcome, const char* status) {
          std::lock_guard lock(registry_.mutex);
          return registry::cell(registry_.events, registry::event_key{name_, strategy, name, outcome, status});
        });
    if (c) c->add();
  }

 private:
  registry& registry_;
  const std::string name_;
  detail::event_counters<detail::metric_counter> cells_;
};

metrics::metrics(metrics_options options) : options_(options), registry_(std::make_unique<registry>()) {}
metrics::~metrics() = default;

event_sink& metrics::events(std::string_view pipeline) & {
  check_name(pipeline, "events", "pipeline");
  std::lock_guard lock(registry_->mutex);
  auto it = registry_->sinks.find(pipeline);
  if (it == registry_->sinks.end())
    it = registry_->sinks.emplace(std::string(pipeline), std::make_unique<pipeline_events>(*registry_, std::string(pipeline))).first;
  return *it->second;
}

const detail::duration_series* metrics::durations(bool per_attempt, std::string_view pipeline, const char* who) {
  check_name(pipeline, who, "pipeline");
  std::lock_guard lock(registry_->mutex);
  auto& series = registry_->stages[{per_attempt, std::string(pipeline)}];
  if (!series) {
    auto s = std::make_unique<detail::duration_series>();
    const auto bounds = options_.bucket_bounds();
    s->bounds = bounds.data();
    s->bound_count = bounds.size();
    s->slots = per_attempt ? detail::duration_series::attempt_slots : 1;
    for (std::uint32_t slot = 0; slot < s->slots; ++slot) {
      for (std::size_t o = 0; o < call_outcome_count; ++o) {
        const std::string outcome = to_string(static_cast<call_outcome>(o));
        auto& h = s->histograms[slot * call_outcome_count + o];
        if (per_attempt) {
          std::string number = std::to_string(slot + 1);
          if (slot + 1 == detail::duration_series::attempt_slots) number += '+';
          h = registry::cell(registry_->attempts, registry::attempt_key{std::string(pipeline), number, outcome});
        } else {
          h = registry::cell(registry_->pipelines, registry::pipeline_key{std::string(pipeline), outcome});
        }
      }
    }
    series = std::move(s);
  }
  return series.get();
}

metrics::user_series& metrics::instrument(metric_kind kind, std::string_view name, const metric_labels& labels,
                                          std::string_view help, std::span<const duration> bounds, const char* who) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string("metrics::") + who + ": \"" + std::string(name) + "\" " + why);
  };
  check_instrument_name(name, who, "name");
  std::vector<std::string> written_labels;
  for (const auto& [label, value] : labels) {
    check_instrument_name(label, who, "label name");
    std::string w = prometheus_label_name(label);
    if (w.rfind("__", 0) == 0) fail("has a label starting with __, which Prometheus reserves");
    if (kind == metric_kind::histogram && w == "le") fail("has a label le, which a histogram's buckets use");
    if (std::find(written_labels.begin(), written_labels.end(), w) != written_labels.end())
      fail("has two labels that are written alike");
    written_labels.push_back(std::move(w));
  }
  const std::string exported_name = prometheus_name(name, kind, kind == metric_kind::histogram ? "s" : "");
  std::vector<duration> checked;
  if (kind == metric_kind::histogram) {
    if (bounds.empty()) bounds = options_.bucket_bounds();
    if (bounds.size() > metrics_options::max_buckets)
      throw std::invalid_argument(std::string("metrics::") + who + ": give 1 to 32 bounds");
    for (std::size_t i = 0; i < bounds.size(); ++i) {
      if (bounds[i] <= duration::zero() || bounds[i] > longest_bound || (i > 0 && bounds[i] <= bounds[i - 1]))
        throw std::invalid_argument(std::string("metrics::") + who +
                                    ": bounds must be positive, at most 24 h and strictly increasing");
    }
    checked.assign(bounds.begin(), bounds.end());
  }
  std::vector<std::string> names, values;
  for (const auto& [label, value] : labels) {
    names.push_back(label);
    values.push_back(value);
  }
  std::lock_guard lock(registry_->mutex);
  auto it = registry_->user.find(name);
  if (it == registry_->user.end()) {
    if (const auto e = registry_->exported.find(exported_name); e != registry_->exported.end())
      fail("would be written as " + exported_name + ", as \"" + e->second + "\" is");
    registry_->exported.emplace(exported_name, std::string(name));
    it = registry_->user.emplace(std::string(name), registry::user_family{kind, std::string(help), names, checked, {}})
             .first;
  } else {
    auto& f = it->second;
    if (f.kind != kind || f.label_names != names || (kind == metric_kind::histogram && f.bounds != checked))
      throw std::invalid_argument(std::string("metrics::") + who + ": \"" + std::string(name) +
                                  "\" was made with another kind, other label names or other bounds");
    if (f.help.empty()) f.help = help;
  }
  auto& slot = it->second.series[std::move(values)];
  if (!slot) slot = std::make_unique<user_series>();
  return *slot;
}

metric_counter_ref metrics::counter(std::string_view name, const metric_labels& labels, std::string_view help) & {
  return metric_counter_ref(&instrument(metric_kind::counter, name, labels, help, {}, "counter").count);
}
metric_gauge_ref metrics::gauge(std::string_view name, const metric_labels& labels, std::string_view help) & {
  return metric_gauge_ref(&instrument(metric_kind::gauge, name, labels, help, {}, "gauge").gauge);
}
metric_histogram_ref metrics::histogram(std::string_view name, const metric_labels& labels, std::string_view help,
                                        std::span<const duration> bounds) & {
  user_series& s = instrument(metric_kind::histogram, name, labels, help, bounds, "histogram");
  std::lock_guard lock(registry_->mutex);
  const auto& family_bounds = registry_->user.find(name)->second.bounds;
  return metric_histogram_ref(&s.histogram, family_bounds);
}

metered_stage metrics::stage(std::string_view pipeline) & {
  return metered_stage(durations(false, pipeline, "stage"), steady_clock{});
}
metered_stage metrics::attempt_stage(std::string_view pipeline) & {
  return metered_stage(durations(true, pipeline, "attempt_stage"), steady_clock{});
}

namespace {

template <class Key>
std::vector<std::pair<std::string, std::string>> label_pairs(const detail::metric_family_info& family, const Key& key) {
  std::vector<std::pair<std::string, std::string>> labels;
  std::size_t i = 0;
  for (const char* n : family.labels) labels.emplace_back(n, key[i++]);
  return labels;
}

template <class Map>
metric_family histogram_family(const Map& map, const detail::metric_family_info& info, std::size_t bound_count) {
  metric_family f{info.name, info.unit, info.help, info.kind, {}, {}};
  for (const auto& [key, h] : map) {
    metric_sample s;
    std::uint64_t running = 0;
    for (std::size_t b = 0; b <= bound_count; ++b) {
      running += h->counts[b].load(std::memory_order_relaxed);
      s.cumulative.push_back(running);
    }
    if (running == 0) continue;
    s.labels = label_pairs(info, key);
    s.count = running;  // the sum of the buckets, so the two always agree
    s.sum = std::chrono::nanoseconds(h->sum_ns.load(std::memory_order_relaxed));
    f.samples.push_back(std::move(s));
  }
  return f;
}

}  // namespace

metrics_snapshot metrics::snapshot() const {
  metrics_snapshot snap;
  const auto bounds = options_.bucket_bounds();
  snap.bounds.assign(bounds.begin(), bounds.end());
  std::lock_guard lock(registry_->mutex);
  // In name order.
  snap.families.push_back(histogram_family(registry_->pipelines, detail::pipeline_duration, bounds.size()));
  snap.families.push_back(histogram_family(registry_->attempts, detail::attempt_duration, bounds.size()));
  const detail::metric_family_info& info = detail::strategy_events;
  metric_family events{info.name, info.unit, info.help, info.kind, {}, {}};
  for (const auto& [key, c] : registry_->events) {
    const std::uint64_t v = c->value.load(std::memory_order_relaxed);
    if (v == 0) continue;
    metric_sample s{{}, v, {}, {}, {}};
    detail::for_each_event_label(key, [&](const char* n, const std::string& value) { s.labels.emplace_back(n, value); });
    events.samples.push_back(std::move(s));
  }
  snap.families.push_back(std::move(events));
  std::erase_if(snap.families, [](const metric_family& f) { return f.samples.empty(); });
  // The application's own, zeros included: a series exists from the moment
  // it is made, so that a rate over it starts then.
  for (const auto& [name, f] : registry_->user) {
    metric_family family{name, f.kind == metric_kind::histogram ? "s" : "", f.help.empty() ? name : f.help, f.kind, {},
                         f.bounds};
    for (const auto& [values, s] : f.series) {
      metric_sample sample;
      for (std::size_t i = 0; i < values.size(); ++i) sample.labels.emplace_back(f.label_names[i], values[i]);
      if (f.kind == metric_kind::counter) {
        sample.count = s->count.load(std::memory_order_relaxed);
      } else if (f.kind == metric_kind::gauge) {
        sample.gauge = s->gauge.load(std::memory_order_relaxed);
      } else {
        std::uint64_t running = 0;
        for (std::size_t b = 0; b <= f.bounds.size(); ++b) {
          running += s->histogram.counts[b].load(std::memory_order_relaxed);
          sample.cumulative.push_back(running);
        }
        sample.count = running;
        sample.sum = std::chrono::nanoseconds(s->histogram.sum_ns.load(std::memory_order_relaxed));
      }
      family.samples.push_back(std::move(sample));
    }
    snap.families.push_back(std::move(family));
  }
  std::sort(snap.families.begin(), snap.families.end(),
            [](const metric_family& a, const metric_family& b) { return a.name < b.name; });
  return snap;
}

}  // namespace resilience
