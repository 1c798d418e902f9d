// A downstream program. Built against an installed copy by the package tests
// (tests/CMakeLists.txt): with find_package and with pkg-config, with Asio
// compiled inside the library and compiled here, header-only. With WITH_HTTP
// (the copy has the HTTP library) it also makes a TLS client context: Asio's
// TLS code, compiled in that library (or here, header-only), and OpenSSL
// must then be in its link.
#include "expect_definitions.hpp"

#include <resilience/resilience.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#if defined(WITH_HTTP)
#include <boost/asio/ssl/context.hpp>
#endif

#include <stdexcept>

int main() {
#if defined(WITH_HTTP)
  boost::asio::ssl::context tls{boost::asio::ssl::context::tls_client};
  tls.set_default_verify_paths();
#endif
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
