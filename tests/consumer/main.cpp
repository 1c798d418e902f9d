#include <resilience/resilience.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

int main() {
  boost::asio::io_context io;
  int calls = 0, result = 0;
  const auto policy = resilience::retry_policy{}.backoff(resilience::backoff::constant({}));
  auto op = [&]() -> boost::asio::awaitable<int> {
    if (++calls < 2) throw std::runtime_error("transient");
    co_return 7;
  };
  boost::asio::co_spawn(io, resilience::co_retry(op, policy), [&](std::exception_ptr, int v) { result = v; });
  io.run();
  return result == 7 && calls == 2 ? 0 : 1;
}
