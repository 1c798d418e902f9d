// resilience/http/metrics_page.hpp — a metrics registry served, in
// Prometheus' text format, at a path of the server's own choosing.
//
//   resilience::metrics telemetry;   // the registry the strategies record into
//   rhttp::server api{rhttp::with_metrics_page(telemetry, "/internal/metrics", handler), options};
//
// A GET or HEAD of exactly that path (a query string is ignored) answers
// 200 with the registry's current text; any other request goes to the
// wrapped handler, which must answer with a string_body response (the page's
// own type). The page is written by the request's own coroutine, without a
// lock on the registry's recording side. The registry is referred to and must
// outlive the handler: a temporary one does not compile.
#pragma once

#include <resilience/context.hpp>
#include <resilience/http/server.hpp>
#include <resilience/metrics.hpp>
#include <resilience/prometheus.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>

#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace resilience::http {

template <class Handler>
class metrics_page_handler {
 public:
  using response_type = boost::beast::http::response<boost::beast::http::string_body>;

  metrics_page_handler(const metrics& registry, std::string path, Handler next)
      : registry_(&registry), path_(std::move(path)), next_(std::move(next)) {
    if (path_.empty() || path_.front() != '/' || path_.find_first_of("?# ") != std::string::npos)
      throw std::invalid_argument("http::with_metrics_page: path must start with '/' and hold no '?', '#' or space");
  }

  boost::asio::awaitable<response_type> operator()(server_request req, const context& ctx) const {
    namespace bhttp = boost::beast::http;
    if (is_page(req)) {
      response_type res{bhttp::status::ok, req.version()};
      res.set(bhttp::field::content_type, prometheus_content_type);
      res.body() = prometheus_text(*registry_);
      res.prepare_payload();
      if (req.method() == bhttp::verb::head) res.body().clear();  // the length stays that of the page
      res.keep_alive(req.keep_alive());
      co_return res;
    }
    static_assert(std::is_same_v<decltype(std::declval<const Handler&>()(std::move(req), ctx)),
                                 boost::asio::awaitable<response_type>>,
                  "with_metrics_page: the wrapped handler must return "
                  "asio::awaitable<beast::http::response<beast::http::string_body>>");
    co_return co_await next_(std::move(req), ctx);
  }

 private:
  bool is_page(const server_request& req) const {
    namespace bhttp = boost::beast::http;
    if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) return false;
    std::string_view target(req.target().data(), req.target().size());
    target = target.substr(0, target.find('?'));
    return target == path_;
  }

  const metrics* registry_;
  std::string path_;
  Handler next_;
};

template <class Handler>
metrics_page_handler<Handler> with_metrics_page(const metrics& registry, std::string path, Handler next) {
  return {registry, std::move(path), std::move(next)};
}
// The handler refers to the registry: a temporary one would be gone.
template <class Handler>
metrics_page_handler<Handler> with_metrics_page(const metrics&& registry, std::string path, Handler next) = delete;

}  // namespace resilience::http
