// The per-request cost of http::guarded_handler (deadline header read, slot
// taken and given back, events off) around a handler that answers at once,
// against calling that handler directly; with a grpc-timeout deadline (the
// handler then runs as a bounded child); and the shed path (503). No
// sockets: the connection side is I/O bound and has no baseline here.
#include "bench_support.hpp"

#include <resilience/http/server.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/empty_body.hpp>

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using resilience::bench::drive;
using response = bhttp::response<bhttp::empty_body>;

// Answers at once (opaque enough that the call is not folded away); "/hold"
// waits until its io_context is destroyed.
struct answer_ok {
  asio::awaitable<response> operator()(rhttp::server_request req, const resilience::context&) const {
    benchmark::DoNotOptimize(req.target().data());
    if (req.target() == "/hold") {
      asio::steady_timer forever(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
      co_await forever.async_wait(asio::use_awaitable);
    }
    co_return response{bhttp::status::ok, 11};
  }
};

const rhttp::server_request& plain_request() {
  static const rhttp::server_request req{bhttp::verb::get, "/", 11};
  return req;
}
const rhttp::server_request& request_with_deadline() {
  static const rhttp::server_request req = [] {
    rhttp::server_request r{bhttp::verb::get, "/", 11};
    r.set("grpc-timeout", "10S");
    return r;
  }();
  return req;
}

rhttp::guarded_handler<answer_ok>& guarded() {
  static rhttp::guarded_handler<answer_ok> g{answer_ok{}};
  return g;
}
// Always full: its one slot is held for the whole run.
rhttp::guarded_handler<answer_ok>& full() {
  static rhttp::guarded_handler<answer_ok> g{answer_ok{}, rhttp::server_options{}.max_concurrent(1)};
  return g;
}

// Every variant copies the request (the handler takes it by value), so the
// copy is in the baseline too.
void http_handler_direct(benchmark::State& s) {
  static const answer_ok handler;
  drive(s, [] { return handler(plain_request(), resilience::context{}); });
}
void http_guarded_handler(benchmark::State& s) {
  drive(s, [] { return guarded()(plain_request()); });
}
void http_guarded_handler_with_deadline(benchmark::State& s) {
  drive(s, [] { return guarded()(request_with_deadline()); });
}
void http_guarded_handler_shed(benchmark::State& s) {
  {
    // A call that holds the only slot, on an io_context of its own that is
    // never run again: destroying it ends the call and frees the slot.
    asio::io_context holder;
    asio::co_spawn(holder, full()(rhttp::server_request{bhttp::verb::get, "/hold", 11}), asio::detached);
    holder.poll();
    drive(s, [] { return full()(plain_request()); });
  }
}

BENCHMARK(http_handler_direct);
BENCHMARK(http_guarded_handler);
BENCHMARK(http_guarded_handler_with_deadline);
BENCHMARK(http_guarded_handler_shed);

const resilience::bench::ratio http_server_bench_ratio1{"http_guarded_handler", "http_handler_direct"};
const resilience::bench::ratio http_server_bench_ratio2{"http_guarded_handler_with_deadline", "http_handler_direct"};
const resilience::bench::ratio http_server_bench_ratio3{"http_guarded_handler_shed", "http_handler_direct"};

}  // namespace
