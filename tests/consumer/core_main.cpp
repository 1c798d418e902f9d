// A downstream program that uses co_retry and nothing else, built against
// resilience::core alone (find_package COMPONENTS core, and
// `pkg-config resilience-core`) by the package tests: its link must need
// neither the HTTP library nor OpenSSL.
#include "expect_definitions.hpp"

#include <resilience/retry.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <stdexcept>

int main() {
  boost::asio::io_context io;
  int calls = 0, result = 0;
  const auto policy = resilience::retry_policy{}.backoff(resilience::backoff::constant({}).with_jitter(resilience::jitter::none));
  auto op = [&]() -> boost::asio::awaitable<int> {
    if (++calls < 2) throw std::runtime_error("transient");
    co_return 7;
  };
  boost::asio::co_spawn(io, resilience::co_retry(op, policy), [&](std::exception_ptr, int v) { result = v; });
  io.run();
  return result == 7 && calls == 2 ? 0 : 1;
}
