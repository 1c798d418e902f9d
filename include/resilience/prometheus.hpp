// resilience/prometheus.hpp — a metrics registry in Prometheus's text
// exposition format (version 0.0.4).
//
//   resilience::metrics telemetry;
//   ...
//   // in the handler of GET /metrics (or any path the application chooses):
//   response.set(http::field::content_type, resilience::prometheus_content_type);
//   response.body() = resilience::prometheus_text(telemetry);
//
// Names: dots become underscores, a duration gets the unit suffix
// `_seconds` and a counter `_total` (resilience_strategy_events_total,
// resilience_strategy_attempt_duration_seconds,
// resilience_pipeline_duration_seconds); label names likewise
// (pipeline_name, strategy_name, event_name, attempt_number, outcome).
// Histograms are written as cumulative `_bucket{le="…"}` lines, `+Inf`
// included, then `_sum` (in seconds) and `_count`. Label values are escaped
// (backslash, double quote, newline). Families come in name order and
// series in label-value order, so the same counts always give the same text.
//
// Reading takes the registry's registration lock, never one that recording
// takes; it allocates, so keep it off hot paths (a scrape every few seconds
// is what it is for).
#pragma once

#include <resilience/metrics.hpp>

#include <string>
#include <string_view>

namespace resilience {

// The Content-Type of what prometheus_text() returns.
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

// A family's name as the exposition format writes it: dots to underscores,
// then `_seconds` for a unit of "s", `_total` for a counter. The one
// translation: write_prometheus, the registry's check of names that would be
// written alike, and prometheus_cpp.hpp's sink use it.
std::string prometheus_name(std::string_view name, metric_kind kind, std::string_view unit);
// A label's name: dots to underscores.
std::string prometheus_label_name(std::string_view label);

// Appends a snapshot in the exposition format to `out`.
void write_prometheus(const metrics_snapshot& snapshot, std::string& out);

// The registry's current counts in the exposition format.
std::string prometheus_text(const metrics& registry);

}  // namespace resilience
