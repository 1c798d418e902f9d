// resilience/breaker_state.hpp — what a circuit breaker reports.
//
//   const resilience::breaker_metrics m = breaker.metrics();
//   std::printf("%s: %.0f%% of %llu calls failed\n", resilience::to_string(m.state),
//               100 * m.failure_ratio, static_cast<unsigned long long>(m.calls));
//   options.on_state_change([](const resilience::state_change& e) {
//     std::printf("#%llu %s -> %s\n", static_cast<unsigned long long>(e.sequence),
//                 resilience::to_string(e.from), resilience::to_string(e.to)); });
//
// The states are described in circuit_breaker.hpp.
#pragma once

#include <resilience/clock.hpp>

#include <cstdint>

namespace resilience {

enum class circuit_state : std::uint8_t { closed, open, half_open, isolated, disabled, metrics_only };

const char* to_string(circuit_state s) noexcept;

// What on_state_change callbacks receive, once per transition.
struct state_change {
  circuit_state from;
  circuit_state to;
  std::uint64_t sequence;  // transitions made so far, this one included: orders events across threads
  time_point at;
  duration open_for;  // to == open: the length of this break (duration::max(): until reset); zero otherwise
};

// What on_rejection callbacks receive, once per rejected call.
struct rejection {
  circuit_state state;  // open, half_open (every probe permit taken) or isolated
  duration retry_after;
};

// A snapshot for operators and tests. Read from several atomics, so under
// concurrent calls its fields may be a few calls apart.
struct breaker_metrics {
  circuit_state state;
  std::uint64_t calls;     // in the window
  std::uint64_t failures;  // in the window
  std::uint64_t slow_calls;
  double failure_ratio;    // failures / calls; 0 with no calls
  double slow_call_ratio;  // slow_calls / calls; 0 with no calls
  std::uint32_t consecutive_failures;  // counted only when consecutive_failures() trips it
  std::uint64_t rejections;  // since construction
  std::uint32_t probes_in_flight;
  std::uint64_t transitions;  // since construction (the sequence of the last state_change)
  duration time_until_probe;
};

}  // namespace resilience
