// The client's compiled parts: its common calls, instantiated once (see the
// end of client.hpp), and the classifier's check on the TLS error it names.
#include <resilience/http/classifier.hpp>
#include <resilience/http/client.hpp>

#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http/empty_body.hpp>

namespace resilience::http {

// The classifier recognises a truncated TLS stream without OpenSSL's headers.
static_assert(boost::asio::ssl::error::stream_truncated == detail::ssl_stream_truncated);

namespace detail {
bool closed_before_answering(const error_code& ec, bool got_some) noexcept {
  namespace asio = boost::asio;
  if (ec == boost::beast::http::error::end_of_stream) return true;  // the end, before any octet
  if (got_some) return false;
  return ec == asio::error::broken_pipe || ec == asio::error::connection_reset ||
         ec == asio::error::connection_aborted || ec == asio::error::eof ||
         ec == asio::ssl::error::stream_truncated;
}

void spawn_background(const boost::asio::any_io_executor& executor, boost::asio::awaitable<void> work) {
  boost::asio::co_spawn(executor, std::move(work), [](std::exception_ptr) noexcept {});
}
}  // namespace detail

RESILIENCE_HTTP_CLIENT_COMMON_CALLS(RESILIENCE_HTTP_CLIENT_CALL)

}  // namespace resilience::http
