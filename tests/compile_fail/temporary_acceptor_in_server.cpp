// expect: use of deleted function .*resilience::http::server<Handler, Clock>::run\(boost::asio::ip::tcp::acceptor&&\) &
// expect: call to deleted member function 'run'[\s\S]*?resilience/http/server\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: http_server
// A running server keeps a reference to its acceptor (drain closes it): not to
// a temporary, which would be gone before the first connection.
#include <resilience/http/server.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/beast/http/string_body.hpp>

namespace {
struct handler {
  boost::asio::awaitable<boost::beast::http::response<boost::beast::http::string_body>> operator()(
      resilience::http::server_request, const resilience::context&) const {
    co_return boost::beast::http::response<boost::beast::http::string_body>{};
  }
};
}  // namespace

void build(boost::asio::io_context& io) {
  static resilience::http::server<handler> api{handler{}};
#ifdef RESILIENCE_MISUSE
  auto run = api.run(boost::asio::ip::tcp::acceptor(io));
#else
  static boost::asio::ip::tcp::acceptor acceptor(io);
  auto run = api.run(acceptor);
#endif
  (void)run;
}
