// The client's coroutine frames stay small enough for Asio's frame cache.
// Asio recycles a coroutine frame of at most 1,020 bytes (a chunk count in
// one byte, chunks of 4); a larger one is allocated and freed on every
// call. GCC lays a coroutine's frame out in its front end, so a frame is
// the same at -O0 and -O3 (measured: 9 allocations per GET either way),
// but AddressSanitizer's instrumentation enlarges it: this file is compiled
// without it (tests/CMakeLists.txt), and counts with the sanitizer
// allocator's hooks, which its runtime provides (CI's ASan build runs it;
// elsewhere the benchmarks count the same with malloc hooks:
// http_client_keepalive_get against http_raw_beast_keepalive_get). A
// keep-alive GET through the client may allocate one block more than the
// same exchange written with Beast by hand (the client's own bookkeeping);
// a frame grown past the cache adds one a call, and fails here.
#include <resilience/http/client.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/test/unit_test.hpp>

#include <optional>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using tcp = asio::ip::tcp;

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <atomic>

// RESILIENCE_TEST_COUNTS_ALLOCATIONS: given by tests/CMakeLists.txt when
// the program links a sanitizer's runtime (this file itself is compiled
// without its instrumentation, which would enlarge the frames).
#ifdef RESILIENCE_TEST_COUNTS_ALLOCATIONS
// Declared here: GCC ships no <sanitizer/allocator_interface.h>, though its
// ASan and TSan runtimes export the function (Clang's header declares it so).
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, std::size_t),
                                                         void (*free_hook)(const volatile void*));
#endif

namespace {
std::atomic<bool> counting_allocations{false};
std::atomic<std::size_t> allocations{0};

#ifdef RESILIENCE_TEST_COUNTS_ALLOCATIONS
void on_malloc(const volatile void*, std::size_t) {
  if (counting_allocations.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
}
void on_free(const volatile void*) {}
#endif
}  // namespace

namespace {

// The steady clock under a type of its own: the client's coroutines, which
// the library compiles for resilience::steady_clock (with ASan, in this
// build), are compiled here instead, without it.
struct uninstrumented_clock : resilience::steady_clock {};

}  // namespace

// Its bounds share the steady clock's timer queue, as the steady clock's do
// (other clocks get a timer per call, a larger frame).
template <>
inline constexpr bool resilience::detail::uses_timer_queue<uninstrumented_clock, boost::asio::any_io_executor> = true;

namespace {

asio::awaitable<void> serve_ok(beast::tcp_stream stream) {
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res{bhttp::status::ok, 11};
  res.body() = "ok";
  res.prepare_payload();
  for (;;) {
    bhttp::request<bhttp::empty_body> req;
    auto [ec, n] = co_await bhttp::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    auto [wec, wn] = co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (wec) co_return;
  }
}

[[maybe_unused]] asio::awaitable<void> accept_ok(tcp::acceptor* acceptor) {
  for (;;) {
    auto [ec, socket] = co_await acceptor->async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    asio::co_spawn(acceptor->get_executor(), serve_ok(beast::tcp_stream(std::move(socket))), asio::detached);
  }
}

// Allocations per call of `call`, after `warm` calls that fill the caches.
template <class Call>
double allocations_per_call(asio::io_context& io, Call call, int warm = 16, int measured = 64) {
  double per_call = -1;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < warm; ++i) co_await call();
        allocations = 0;
        counting_allocations = true;
        for (int i = 0; i < measured; ++i) co_await call();
        counting_allocations = false;
        per_call = static_cast<double>(allocations.load()) / measured;
        io.stop();  // the server's accept and sessions go on: they end with the test
      },
      asio::detached);
  io.run();
  io.restart();
  return per_call;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(http_client_frames)

#ifdef RESILIENCE_TEST_COUNTS_ALLOCATIONS
constexpr bool counts_allocations = true;
#else
constexpr bool counts_allocations = false;  // reported as skipped
#endif

BOOST_AUTO_TEST_CASE(a_keep_alive_get_allocates_at_most_one_block_more_than_beast_by_hand,
                     *boost::unit_test::enable_if<counts_allocations>()) {
#ifdef RESILIENCE_TEST_COUNTS_ALLOCATIONS
  static const bool hooked = (__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free), true);
  BOOST_TEST_REQUIRE(hooked);
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  const auto port = acceptor.local_endpoint().port();
  asio::co_spawn(io, accept_ok(&acceptor), asio::detached);

  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  bhttp::request<bhttp::empty_body> raw_req{bhttp::verb::get, "/", 11};
  raw_req.set(bhttp::field::host, "127.0.0.1");
  const double raw = allocations_per_call(io, [&]() -> asio::awaitable<void> {
    if (!stream) {
      stream.emplace(co_await asio::this_coro::executor);
      co_await stream->async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), port), asio::use_awaitable);
    }
    co_await bhttp::async_write(*stream, raw_req, asio::use_awaitable);
    bhttp::response<bhttp::string_body> res;
    co_await bhttp::async_read(*stream, buffer, res, asio::use_awaitable);
    BOOST_TEST(res.result_int() == 200u);
  });
  stream.reset();

  std::optional<rhttp::basic_client<uninstrumented_clock>> client(std::in_place);
  const auto to = rhttp::endpoint::http("127.0.0.1", port);
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, "/", 11};
  const double through_client = allocations_per_call(io, [&]() -> asio::awaitable<void> {
    auto res = co_await client->request(to, req);  // a copy, as a temporary would be
    BOOST_TEST((res && res->result_int() == 200u));
  });
  client.reset();
  acceptor.close();
  io.run();

  BOOST_TEST_MESSAGE("allocations per keep-alive GET: Beast by hand " << raw << ", the client " << through_client);
  BOOST_TEST(raw > 0);
  BOOST_TEST(through_client <= raw + 1, "a coroutine frame of the client's has outgrown Asio's frame cache");
#endif
}

BOOST_AUTO_TEST_SUITE_END()
