// The scripted test server of http_client_support.hpp, compiled once for the
// three files that use it (in a header, each would compile its Beast
// sessions, plain and TLS, again).
#include "http_client_support.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace http_client_test {
namespace {

template <class Stream>
asio::awaitable<void> serve(server* s, Stream stream) {
  beast::flat_buffer buffer;
  for (;;) {
    bhttp::request<bhttp::string_body> req;
    auto [ec, n] = co_await bhttp::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    const int k = ++s->requests;
    s->seen.push_back(req);
    const step st = s->script(k);
    if (st.what == step::reset) {
      auto& socket = beast::get_lowest_layer(stream).socket();
      socket.set_option(asio::socket_base::linger(true, 0));
      socket.close();
      co_return;
    }
    if (st.what == step::drop) {
      beast::get_lowest_layer(stream).socket().close();
      co_return;
    }
    if (st.what == step::hang) {  // reads on, after `before` if any: the client's close ends it
      if (!st.before.empty()) {
        auto [bec, bn] =
            co_await asio::async_write(stream, asio::buffer(st.before), asio::as_tuple(asio::use_awaitable));
        if (bec) co_return;
      }
      continue;
    }
    if (st.headers_only_length) {
      bhttp::response<bhttp::empty_body> res{static_cast<bhttp::status>(st.status), 11};
      res.content_length(*st.headers_only_length);
      bhttp::response_serializer<bhttp::empty_body> sr{res};
      auto [hec, hn] = co_await bhttp::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
      if (hec) co_return;
      continue;
    }
    if (st.what == step::hold) co_await s->gate.async_wait(asio::as_tuple(asio::use_awaitable));
    bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(st.status), 11};
    for (const auto& [name, value] : st.headers) res.set(name, value);
    res.body() = "reply " + std::to_string(k);
    res.keep_alive(!st.close);
    res.prepare_payload();
    error_code wec;
    if (st.before.empty() && st.after.empty()) {
      std::tie(wec, std::ignore) = co_await bhttp::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    } else {
      std::ostringstream serialized;
      serialized << res;
      const std::string raw = st.before + serialized.str() + st.after;
      std::tie(wec, std::ignore) =
          co_await asio::async_write(stream, asio::buffer(raw), asio::as_tuple(asio::use_awaitable));
    }
    if (!wec && !st.when_idle.empty()) {
      co_await s->gate.async_wait(asio::as_tuple(asio::use_awaitable));
      std::tie(wec, std::ignore) =
          co_await asio::async_write(stream, asio::buffer(st.when_idle), asio::as_tuple(asio::use_awaitable));
      auto& socket = beast::get_lowest_layer(stream).socket();
      socket.shutdown(tcp::socket::shutdown_send, wec);  // no throw out of the server; the test's own checks fail
      s->held.push_back(std::move(socket));
      co_return;
    }
    if (!wec && st.half_close) {
      auto& socket = beast::get_lowest_layer(stream).socket();
      socket.shutdown(tcp::socket::shutdown_send, wec);  // no throw out of the server; the test's own checks fail
      s->held.push_back(std::move(socket));
      co_return;
    }
    if (wec || st.close) co_return;
  }
}

asio::awaitable<void> handshake_then_serve(server* s, beast::tcp_stream tcp) {
  beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp), *s->tls);
  auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, asio::as_tuple(asio::use_awaitable));
  if (ec) {
    ++s->handshake_failures;
    co_return;
  }
  co_await serve(s, std::move(stream));
}

asio::awaitable<void> accept_loop(server* s) {
  for (;;) {
    auto [ec, socket] = co_await s->acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    ++s->accepted;
    if (s->silent) {
      s->held.push_back(std::move(socket));
    } else if (s->tls) {
      asio::co_spawn(s->io, handshake_then_serve(s, beast::tcp_stream(std::move(socket))), asio::detached);
    } else {
      asio::co_spawn(s->io, serve(s, beast::tcp_stream(std::move(socket))), asio::detached);
    }
  }
}

}  // namespace

server::server(asio::io_context& c, std::uint16_t port) : io(c), acceptor(c), gate(c, std::chrono::hours(24)) {
  const tcp::endpoint at(asio::ip::address_v4::loopback(), port);
  acceptor.open(at.protocol());
  acceptor.set_option(asio::socket_base::reuse_address(true));
  acceptor.bind(at);
  acceptor.listen();
  asio::co_spawn(io, accept_loop(this), asio::detached);
}

bool fin_acknowledged(tcp::socket& socket) {
  tcp_info info{};
  socklen_t size = sizeof info;
  return ::getsockopt(socket.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &size) == 0 &&
         info.tcpi_state == TCP_FIN_WAIT2;
}

void two_gets_get_their_own_replies(asio::io_context& io, client_t& c, server& srv) {
  for (int i = 1; i <= 2; ++i) {
    completion<result_t> done;
    spawn(io, call(c, srv.at(), get()), done);
    BOOST_REQUIRE(run_until(io, [&] { return done.done(); }));
    BOOST_TEST(status_of(done) == 200u);
    BOOST_TEST((*done.value)->body() == "reply " + std::to_string(i));
  }
}

}  // namespace http_client_test
