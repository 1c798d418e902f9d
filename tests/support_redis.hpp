// Test helpers for the tests of resilience/redis/.
#pragma once

#include "support.hpp"

#include <resilience/redis/connection.hpp>

#include <tuple>

namespace resilience::test {

// Sends `args` and runs `io` until the answer comes; a failed command fails the test.
inline redis::reply command(asio::io_context& io, redis::connection& c, std::vector<std::string> args) {
  std::optional<std::tuple<error_code, redis::reply>> out;
  c.async_command(std::move(args), [&](error_code ec, redis::reply r) { out.emplace(ec, std::move(r)); });
  run_until(io, [&] { return out.has_value(); });
  BOOST_TEST_REQUIRE(!std::get<0>(*out), std::get<0>(*out).message());
  return std::get<1>(*out);
}

}  // namespace resilience::test
