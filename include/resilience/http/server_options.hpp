// resilience/http/server_options.hpp — what http::server and
// guarded_handler (server.hpp, guarded_handler.hpp) are built from, with
// every default they have; what they hand a handler; what their hooks
// receive.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/event.hpp>
#include <resilience/http/deadline_header.hpp>
#include <resilience/http/detail/default_concurrency.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace resilience::http {

// What the server hands a handler: the whole request, body in a string.
using server_request = boost::beast::http::request<boost::beast::http::string_body>;

// A connection phase in which a client may stall.
enum class client_phase : std::uint8_t { header, body, write };

// A request that left a handler (or never entered one): the status answered,
// 0 when none was (cancelled), and the time from its being read in full to
// its answer (the write not included). A request refused as it was read (400
// unparsable, 413 body too large, 431 header too large) is one too, with no
// time.
struct request_finished {
  unsigned status;
  duration elapsed;
  boost::beast::http::verb method = boost::beast::http::verb::unknown;  // unknown: not read far enough
};

class server_options {
 public:
  server_options() = default;

  // Requests inside handlers at once: 1 to 2^31 - 1; 100 by default, as
  // many as a client keeps connections per host (detail/default_concurrency.hpp).
  server_options max_concurrent(std::uint32_t n) const;
  // Retry-After on a 503 from shedding, in whole seconds, 0 or more; 1 by default.
  server_options retry_after(std::chrono::seconds s) const;
  // The server's own answers (503, 504, 500, 400, 413, 431) carry a short
  // body naming the status: text/plain by default; on, RFC 9457 problem
  // details (application/problem+json). Only for handlers whose response
  // body is a std::string; others get an empty body.
  server_options problem_details(bool on) const;
  // The header an inbound deadline comes in; grpc-timeout by default.
  server_options inbound_deadline(deadline_header h) const;
  // The most time a handler gets, whatever the client asks (and when it
  // asks nothing): positive, or duration::max() for no cap. 30 s by default,
  // the client's total_timeout(): a handler stuck on a dependency that never
  // answers holds its slot for that long at most, never forever.
  server_options max_deadline(duration d) const;

  // Connection bounds (see the top of this header): positive, or
  // duration::max() for none. Defaults 10 s, 30 s, 30 s, 60 s.
  server_options header_read_timeout(duration d) const;
  server_options body_read_timeout(duration d) const;
  server_options write_timeout(duration d) const;
  server_options idle_timeout(duration d) const;
  // Header (request line and fields) and body sizes: a header limit of 1 to
  // 2^32 - 1 bytes (8 KiB by default), a body limit of 0 or more (1 MiB).
  server_options max_header_bytes(std::uint64_t n) const;
  server_options max_body_bytes(std::uint64_t n) const;
  // Connections open at once: 1 or more; 10000 by default.
  server_options max_connections(std::size_t n) const;
  // How long requests in progress may go on once a drain starts: zero
  // (cancel them at once) or more; 10 s by default.
  server_options drain_grace(duration d) const;

  // Events, on the server's executor. An exception thrown by one ends the
  // connection it concerns (as a failure of that connection).
  server_options on_request_started(std::function<void(const server_request&)> f) const;
  server_options on_request_finished(std::function<void(const request_finished&)> f) const;
  // A request answered 503; its argument: the requests inside handlers.
  server_options on_shed(std::function<void(std::uint32_t in_flight)> f) const;
  // A request answered 504; its argument: the deadline it had.
  server_options on_deadline_exceeded(std::function<void(time_point deadline)> f) const;
  // A connection dropped because its client stalled in that phase.
  server_options on_slow_client(std::function<void(client_phase)> f) const;
  // Where the server reports its events (event.hpp: on_shed,
  // on_request_refused for 400, 413 and 431, on_deadline_exceeded,
  // on_slow_client), on its executor after the hooks above. Handlers' contexts
  // carry it, so what a handler calls with its context (a client, a
  // pipeline without a sink of its own) reports there too. It must outlive
  // the server; a temporary is refused.
  server_options events(event_sink& sink) const;
  server_options events(event_sink&&) const = delete;

  std::uint32_t max_concurrent() const noexcept { return max_concurrent_; }
  std::chrono::seconds retry_after() const noexcept { return retry_after_; }
  bool problem_details() const noexcept { return problem_details_; }
  const deadline_header& inbound_deadline() const noexcept { return inbound_deadline_; }
  duration max_deadline() const noexcept { return max_deadline_; }
  duration header_read_timeout() const noexcept { return header_read_timeout_; }
  duration body_read_timeout() const noexcept { return body_read_timeout_; }
  duration write_timeout() const noexcept { return write_timeout_; }
  duration idle_timeout() const noexcept { return idle_timeout_; }
  std::uint32_t max_header_bytes() const noexcept { return max_header_bytes_; }
  std::uint64_t max_body_bytes() const noexcept { return max_body_bytes_; }
  std::size_t max_connections() const noexcept { return max_connections_; }
  duration drain_grace() const noexcept { return drain_grace_; }
  const std::function<void(const server_request&)>& on_request_started() const noexcept { return started_; }
  const std::function<void(const request_finished&)>& on_request_finished() const noexcept { return finished_; }
  const std::function<void(std::uint32_t)>& on_shed() const noexcept { return shed_; }
  const std::function<void(time_point)>& on_deadline_exceeded() const noexcept { return deadline_exceeded_; }
  const std::function<void(client_phase)>& on_slow_client() const noexcept { return slow_client_; }
  event_sink* events() const noexcept { return events_; }

 private:
  std::uint32_t max_concurrent_ = detail::default_concurrency;
  std::chrono::seconds retry_after_{1};
  bool problem_details_ = false;
  deadline_header inbound_deadline_ = deadline_header::grpc_timeout();
  duration max_deadline_ = std::chrono::seconds(30);
  duration header_read_timeout_ = std::chrono::seconds(10);
  duration body_read_timeout_ = std::chrono::seconds(30);
  duration write_timeout_ = std::chrono::seconds(30);
  duration idle_timeout_ = std::chrono::seconds(60);
  std::uint32_t max_header_bytes_ = 8 * 1024;
  std::uint64_t max_body_bytes_ = 1024 * 1024;
  std::size_t max_connections_ = 10000;
  duration drain_grace_ = std::chrono::seconds(10);
  std::function<void(const server_request&)> started_;
  std::function<void(const request_finished&)> finished_;
  std::function<void(std::uint32_t)> shed_;
  std::function<void(time_point)> deadline_exceeded_;
  std::function<void(client_phase)> slow_client_;
  event_sink* events_ = nullptr;
};

namespace detail {

template <class A>
struct handler_awaitable : std::false_type {};
template <class Body, class Fields>
struct handler_awaitable<boost::asio::awaitable<boost::beast::http::response<Body, Fields>>> : std::true_type {
  using response = boost::beast::http::response<Body, Fields>;
};

template <class H>
using handler_result_t = std::remove_cvref_t<std::invoke_result_t<const H&, server_request, const context&>>;

}  // namespace detail

// What a server runs per request: a const-callable
// (server_request, const context&) -> asio::awaitable<beast::http::response<Body, Fields>>.
template <class H>
concept request_handler = std::is_invocable_v<const H&, server_request, const context&> &&
                          detail::handler_awaitable<detail::handler_result_t<H>>::value;

template <request_handler H>
using handler_response_t = typename detail::handler_awaitable<detail::handler_result_t<H>>::response;

}  // namespace resilience::http
