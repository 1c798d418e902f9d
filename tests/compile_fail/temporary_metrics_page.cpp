// expect: use of deleted function .*resilience::http::with_metrics_page\(const resilience::metrics&&, std::string, Handler\)
// expect: call to deleted function 'with_metrics_page'[\s\S]*?resilience/http/metrics_page\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: http_server
// The metrics page refers to its registry: a temporary one would be gone
// before the first request.
#include <resilience/http/metrics_page.hpp>

#include <boost/asio/awaitable.hpp>

namespace rhttp = resilience::http;
using page_response = boost::beast::http::response<boost::beast::http::string_body>;

void build() {
  const auto handler = [](rhttp::server_request, const resilience::context&) -> boost::asio::awaitable<page_response> {
    co_return page_response{};
  };
#ifdef RESILIENCE_MISUSE
  const auto page = rhttp::with_metrics_page(resilience::metrics{}, "/metrics", handler);
#else
  static resilience::metrics telemetry;
  const auto page = rhttp::with_metrics_page(telemetry, "/metrics", handler);
#endif
  (void)page;
}
