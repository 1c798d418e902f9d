// What the attempts of one client call share: its counts, where each
// attempt goes, and for an upstream's call the replicas it tried. Not public
// API; http::client uses it.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/adaptive_throttle.hpp>
#include <resilience/http/detail/host_tagged_events.hpp>
#include <resilience/http/detail/upstream_core.hpp>
#include <resilience/http/endpoint.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace resilience::http::detail {

// What a call counts over its attempts, for on_call_finished.
struct call_tally {
  std::uint32_t attempts = 0;  // attempts that went past the breaker
  duration held{};             // waited for other calls' Retry-After
};

// An upstream call's state across its attempts, in the frame of its entry
// (client::call_replicas): the replicas it tried, the one its attempt goes
// to, and what the client keeps for that one.
template <class Breaker>
struct upstream_route {
  std::shared_ptr<upstream_core> core;
  std::string key;  // its retry budget's and its events' until a replica is picked
  std::array<std::uint32_t, 8> tried{};
  std::uint8_t tried_count = 0;
  bool host_given = false;    // the caller's Host header stands; else each replica's
  std::uint32_t attempt = 0;  // the attempt `current` was picked for
  std::shared_ptr<replica> current;
  host_tagged_events* tagged = nullptr;
};

// What every attempt of one call refers to, kept in the call's frame. An
// upstream call's attempts point it at their replica's.
template <class Request, class Breaker>
struct call_target {
  const endpoint* to;
  const std::string* key;
  Request& req;
  std::shared_ptr<Breaker> breaker;  // the attempt's: the endpoint's, or its replica's
  std::shared_ptr<resilience::detail::adaptive_throttle_core> throttle;
  call_tally counts;
  upstream_route<Breaker>* route;  // null for an endpoint
  // The call's retry budget, if any: a resend is a request more too.
  const resilience::detail::budget_ref* budget = nullptr;
};

}  // namespace resilience::http::detail
