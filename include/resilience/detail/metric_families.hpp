// resilience/detail/metric_families.hpp — what every registry the library
// records into shares: its own families (resilience::metrics; a
// prometheus::Registry through prometheus_cpp.hpp) and the mapping of events
// to their series.
#pragma once

#include <resilience/event.hpp>
#include <resilience/metrics.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <span>

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

inline constexpr const char* strategy_events_labels[] = {"pipeline.name", "strategy.name", "event.name", "outcome"};
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

// One pipeline's counters of resilience.strategy.events, one per (event
// kind, outcome or none): the one mapping of an event to its series, which
// every registry's sink shares. A counter is made the first time its pair is
// seen, then found without a lock.
template <class Counter>
class event_counters {
 public:
  // The event's counter, made by make(strategy.name, event.name, outcome)
  // (the labels after pipeline.name) the first time; two threads may both
  // make it, so make must return the same counter for the same labels.
  // nullptr for a kind out of range, or when make throws (no memory for a
  // new series: the event goes uncounted).
  template <class Make>
  Counter* find(const event& e, Make&& make) noexcept {
    const auto kind = static_cast<std::size_t>(e.kind);
    if (kind >= event_kind_count) return nullptr;
    const std::size_t outcome = e.outcome ? static_cast<std::size_t>(*e.outcome) + 1 : 0;
    auto& slot = cells_[kind * (call_outcome_count + 1) + outcome];
    Counter* c = slot.load(std::memory_order_acquire);
    if (!c) [[unlikely]] {
      try {
        c = make(e.strategy(), e.name(), e.outcome ? to_string(*e.outcome) : "none");
      } catch (...) {
        return nullptr;
      }
      slot.store(c, std::memory_order_release);
    }
    return c;
  }

 private:
  std::array<std::atomic<Counter*>, event_kind_count*(call_outcome_count + 1)> cells_{};
};

}  // namespace resilience::detail
