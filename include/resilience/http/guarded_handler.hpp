// resilience/http/guarded_handler.hpp — a request handler with the inbound
// deadline and load shedding around it, for sessions of your own (the
// server, server.hpp, does the same in its own sessions).
//
//   rhttp::guarded_handler guarded{handler, rhttp::server_options{}.max_concurrent(64)};
//   auto res = co_await guarded(std::move(req));   // 503, 504 or the handler's answer
//
// What it does per request is the server's (server.hpp, "Per request").
#pragma once

#include <resilience/bulkhead.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/error.hpp>
#include <resilience/http/server_options.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>

#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace resilience::http {

namespace detail {

// An answer of the server's own (503, 504, 500, 4xx) in the handler's
// response type: when its body holds a std::string, a short one naming the
// status, as text/plain, or as RFC 9457 problem details
// (application/problem+json, "type" left to its default, about:blank) with
// server_options::problem_details(); else empty.
template <class Response>
Response status_response(boost::beast::http::status status, unsigned version, bool keep_alive, bool problem) {
  namespace bhttp = boost::beast::http;
  Response res{status, version};
  res.keep_alive(keep_alive);
  if constexpr (std::is_same_v<typename Response::body_type::value_type, std::string>) {
    const auto reason = bhttp::obsolete_reason(status);
    const auto code = std::to_string(static_cast<unsigned>(status));
    if (problem) {
      res.set(bhttp::field::content_type, "application/problem+json");
      res.body() = "{\"title\":\"";
      res.body().append(reason.data(), reason.size());
      res.body() += "\",\"status\":" + code + "}\n";
    } else {
      res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
      res.body() = code + ' ';
      res.body().append(reason.data(), reason.size());
      res.body() += '\n';
    }
  }
  res.prepare_payload();
  return res;
}

template <class Guard>
boost::asio::awaitable<typename Guard::response_type> guarded_call(const Guard* guard, server_request req,
                                                                   context ctx);
template <class Guard>
struct guard_steps;
template <class Guard>
boost::asio::awaitable<void> answer_into(const Guard* guard, server_request* req, context ctx,
                                         std::optional<typename Guard::response_type>* answer, time_point* at);

}  // namespace detail

template <request_handler Handler, resilience::clock Clock = steady_clock>
class server;

// A request handler with the inbound deadline and load shedding around it.
// Shared state (the slots): neither copied nor moved, and it must outlive
// every call; a call on a temporary is refused at compile time.
template <request_handler Handler, resilience::clock Clock = steady_clock>
class guarded_handler {
 public:
  using response_type = handler_response_t<Handler>;
  using clock_type = Clock;

  explicit guarded_handler(Handler handler, server_options options = {}, Clock clock = {})
      : handler_(std::move(handler)),
        options_(std::move(options)),
        clock_(std::move(clock)),
        slots_(bulkhead_options{}.max_concurrent(options_.max_concurrent())) {}
  guarded_handler(const guarded_handler&) = delete;
  guarded_handler& operator=(const guarded_handler&) = delete;

  // The answer to `req`: the handler's, or 503, 504, 500 (see the top of
  // this header). `parent` may bring a deadline of its own; the tighter wins.
  boost::asio::awaitable<response_type> operator()(server_request req, const context& parent = {}) const& {
    return detail::guarded_call(this, std::move(req), parent);
  }
  void operator()(server_request, const context& = {}) const&& = delete;

  // Requests inside the handler now.
  std::uint32_t in_flight() const noexcept { return slots_.in_flight(); }
  const server_options& options() const noexcept { return options_; }
  const Clock& clock() const noexcept { return clock_; }
  const Handler& handler() const noexcept { return handler_; }

 private:
  template <class Guard>
  friend boost::asio::awaitable<typename Guard::response_type> detail::guarded_call(const Guard*, server_request,
                                                                                    context);
  template <class Guard>
  friend struct detail::guard_steps;
  friend class server<Handler, Clock>;  // runs the handler in its sessions' own coroutines
  template <class Guard>
  friend boost::asio::awaitable<void> detail::answer_into(const Guard*, server_request*, context,
                                                          std::optional<typename Guard::response_type>*,
                                                          time_point*);

  Handler handler_;
  server_options options_;
  Clock clock_;
  mutable resilience::detail::bulkhead_core slots_;  // a bulkhead without a queue
};

template <class Handler, class Clock = steady_clock>
guarded_handler(Handler, server_options = {}, Clock = {}) -> guarded_handler<Handler, Clock>;

}  // namespace resilience::http

#include <resilience/http/impl/guarded_handler.hpp>
