// resilience/http/detail/default_concurrency.hpp — the one default the HTTP
// server and client share. Not public API.
#pragma once

#include <cstdint>

namespace resilience::http::detail {

// Requests a server admits into its handlers at once
// (server_options::max_concurrent()), and connections a client keeps per
// host (connection_pool_options::max_connections_per_host()), by default:
// one number, so that a service on the defaults whose handlers each call one
// upstream never queues for a connection. Such a queue makes the pool, not
// the upstream, the bottleneck: a few stalled upstream requests hold every
// connection and the calls behind them wait out their deadlines.
inline constexpr std::uint32_t default_concurrency = 100;

}  // namespace resilience::http::detail
