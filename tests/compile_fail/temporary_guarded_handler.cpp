// expect: use of deleted function .*resilience::http::guarded_handler<Handler, Clock>::operator\(\)\(resilience::http::server_request, const resilience::context&\) const &&
// expect: call to deleted function call operator in type 'resilience::http::guarded_handler<handler>'[\s\S]*?resilience/http/guarded_handler\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: http_server
// A guarded handler is shared state (its slots) that the call refers to: a
// temporary one would be gone before the call ends.
#include <resilience/http/server.hpp>

#include <boost/beast/http/string_body.hpp>

namespace {
struct handler {
  boost::asio::awaitable<boost::beast::http::response<boost::beast::http::string_body>> operator()(
      resilience::http::server_request, const resilience::context&) const {
    co_return boost::beast::http::response<boost::beast::http::string_body>{};
  }
};
}  // namespace

void build(resilience::http::server_request req) {
#ifdef RESILIENCE_MISUSE
  auto call = resilience::http::guarded_handler<handler>{handler{}}(std::move(req));
#else
  static resilience::http::guarded_handler<handler> guarded{handler{}};
  auto call = guarded(std::move(req));
#endif
  (void)call;
}
