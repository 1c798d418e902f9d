// resilience/detail/metric_families.hpp — what every registry the library
// records into shares: its own families (resilience::metrics; a
// prometheus::Registry through prometheus_cpp.hpp) and the mapping of events
// to their series.
#pragma once

#include <resilience/event.hpp>
#include <resilience/metrics.hpp>

#include <array>
#include <atomic>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string_view>

namespace resilience::detail {

// One of the library's own families: the one place its OpenTelemetry name,
// unit, help and label names are written, for every registry it is recorded
// in (resilience::metrics, or a prometheus::Registry through
// prometheus_cpp.hpp). The HTTP meters' are in http/telemetry.hpp.
struct metric_family_info {
  const char* name;
  const char* unit;  // "s" for durations, "" for counts
  metric_kind kind;
  const char* help;
  std::span<const char* const> labels;
};

// The last, http.response.status_code, only on a series that has one
// (for_each_event_label).
inline constexpr const char* strategy_events_labels[] = {"pipeline.name", "strategy.name", "event.name", "outcome",
                                                         "http.response.status_code"};
inline constexpr std::size_t status_code_label = 4;
inline constexpr metric_family_info strategy_events{"resilience.strategy.events", "", metric_kind::counter,
                                                   "Events reported by resilience strategies.", strategy_events_labels};
inline constexpr const char* attempt_duration_labels[] = {"pipeline.name", "attempt.number", "outcome"};
inline constexpr metric_family_info attempt_duration{"resilience.strategy.attempt.duration", "s",
                                                    metric_kind::histogram,
                                                    "Duration of each attempt inside a resilience pipeline.",
                                                    attempt_duration_labels};
inline constexpr const char* pipeline_duration_labels[] = {"pipeline.name", "outcome"};
inline constexpr metric_family_info pipeline_duration{"resilience.pipeline.duration", "s", metric_kind::histogram,
                                                     "Duration of calls through a resilience pipeline.",
                                                     pipeline_duration_labels};

// The kinds whose series carry the event's status as
// http.response.status_code: the server's (503 shed, 400, 413 and 431
// refused, 504 past the deadline), so that its answers count by status.
// Labelled as OpenTelemetry labels an HTTP response's status: when there is
// one, and only then (on_slow_client has none).
inline constexpr auto status_labelled = [] {
  std::array<bool, event_kind_count> kinds{};
  for (std::size_t k = 0; k < event_kind_count; ++k)
    kinds[k] = std::string_view(strategy_of(static_cast<event_kind>(k))) == "http_server";
  return kinds;
}();

// f(label name, value) for each label of a resilience.strategy.events series
// whose values, in strategy_events_labels' order, are `values`: every one
// but an empty status code. Both registries write a series through this.
template <class Values, class F>
void for_each_event_label(const Values& values, F&& f) {
  for (std::size_t i = 0; i < std::size(strategy_events_labels); ++i)
    if (i != status_code_label || !std::string_view(values[i]).empty()) f(strategy_events_labels[i], values[i]);
}

// One pipeline's counters of resilience.strategy.events, one per (event
// kind, outcome or none, and for a status_labelled kind its status): the one
// mapping of an event to its series, which every registry's sink shares. A
// counter is made the first time its labels are seen, then found without a
// lock.
template <class Counter>
class event_counters {
 public:
  // The event's counter, made by make(strategy.name, event.name, outcome,
  // http.response.status_code) (the labels after pipeline.name; the status
  // "" when the series has none) the first time; two threads may both make
  // it, so make must return the same counter for the same labels. nullptr
  // for a kind out of range, or when make throws (no memory for a new
  // series: the event goes uncounted).
  template <class Make>
  Counter* find(const event& e, Make&& make) noexcept {
    const auto kind = static_cast<std::size_t>(e.kind);
    if (kind >= event_kind_count) return nullptr;
    const std::size_t outcome = e.outcome ? static_cast<std::size_t>(*e.outcome) + 1 : 0;
    const std::size_t cell = kind * (call_outcome_count + 1) + outcome;
    if (status_labelled[kind] && e.status >= 100 && e.status <= 999) {
      if (auto* slot = status_slot(cell, e.status)) return get(*slot, e, make, e.status);
    }
    return get(cells_[cell], e, make, 0);
  }

 private:
  template <class Make>
  static Counter* get(std::atomic<Counter*>& slot, const event& e, Make& make, unsigned status) noexcept {
    Counter* c = slot.load(std::memory_order_acquire);
    if (!c) [[unlikely]] {
      try {
        char code[4] = {};  // "" or three digits
        if (status) std::to_chars(code, code + 3, status);
        c = make(e.strategy(), e.name(), e.outcome ? to_string(*e.outcome) : "none", static_cast<const char*>(code));
      } catch (...) {
        return nullptr;
      }
      slot.store(c, std::memory_order_release);
    }
    return c;
  }

  // The counter's place for (cell, status): an entry of a small open-addressed
  // table, claimed by setting its key once (never changed after). nullptr
  // when every entry holds another key: more distinct statuses than a
  // server answers itself, counted then without theirs.
  std::atomic<Counter*>* status_slot(std::size_t cell, unsigned status) noexcept {
    const auto key = static_cast<std::uint32_t>(cell << 10 | status);  // status < 1024, so never 0
    for (std::size_t i = 0; i < status_cells_.size(); ++i) {
      auto& entry = status_cells_[(key + i) % status_cells_.size()];
      std::uint32_t seen = entry.key.load(std::memory_order_acquire);
      if (seen == 0 && entry.key.compare_exchange_strong(seen, key, std::memory_order_acq_rel)) return &entry.counter;
      if (seen == key) return &entry.counter;  // (a failed exchange read the key that won)
    }
    return nullptr;
  }

  struct status_cell {
    std::atomic<std::uint32_t> key{0};
    std::atomic<Counter*> counter{nullptr};
  };
  std::array<std::atomic<Counter*>, event_kind_count*(call_outcome_count + 1)> cells_{};
  std::array<status_cell, 32> status_cells_{};
};

}  // namespace resilience::detail
