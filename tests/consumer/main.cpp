// A downstream program. Built against an installed copy by the package tests
// (tests/CMakeLists.txt): with find_package and with pkg-config, with Asio
// compiled inside the library and compiled here, header-only.

// The definitions the package must have given this translation unit, checked
// before any Asio header can define them itself.
#if defined(EXPECT_SEPARATE_COMPILATION)
#if EXPECT_SEPARATE_COMPILATION != defined(BOOST_ASIO_SEPARATE_COMPILATION)
#error "BOOST_ASIO_SEPARATE_COMPILATION does not match how the installed library was built"
#endif
#endif
#if defined(EXPECT_FRAME_CACHE)
#if EXPECT_FRAME_CACHE == 0 && defined(BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE)
#error "the package imposes a recycling-allocator cache size it was built without"
#elif EXPECT_FRAME_CACHE != 0 && BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE != EXPECT_FRAME_CACHE
#error "BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE does not match how the installed library was built"
#endif
#endif

#include <resilience/resilience.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <stdexcept>

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
