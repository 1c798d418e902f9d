// resilience/http/server.hpp — serving HTTP/1.1 with Beast: inbound
// deadlines, load shedding, slow clients dropped, graceful drain.
//
//   namespace rhttp = resilience::http;
//   rhttp::server api{
//       [](rhttp::server_request req, const resilience::context& ctx)
//           -> asio::awaitable<http::response<http::string_body>> {
//         co_return co_await lookup(req.target(), ctx);  // ctx.deadline: the client's
//       },
//       rhttp::server_options{}.max_concurrent(64).retry_after(std::chrono::seconds(2))};
//   tcp::acceptor acceptor{io, {tcp::v4(), 8080}};
//   asio::co_spawn(io, api.run(acceptor), asio::detached);
//   // later, on the io_context's thread:
//   api.drain();  // or cancel the coroutine that runs run()
//
//   // With sessions of your own, only the handler wrapped:
//   rhttp::guarded_handler guarded{handler, options};
//   auto res = co_await guarded(std::move(req));   // 503, 504 or the handler's answer
//
// Per request (guarded_handler, and the server alike):
//   - Deadline. The inbound deadline header (grpc-timeout by default, or a
//     milliseconds header, see deadline_header.hpp), capped by
//     max_deadline(), becomes ctx.deadline (the earliest, if the header
//     comes more than once). When it passes, the handler is cancelled
//     (terminal) and waited for, and the client gets 504, whatever the
//     handler answers after it: the client has stopped waiting. A deadline
//     already passed on arrival answers 504, and a deadline header that does
//     not parse 400, without calling the handler.
//   - Shedding. At most max_concurrent() requests are inside handlers at
//     once; the next ones get 503 with Retry-After at once: none is queued.
//     The slot goes back on every path (answer, exception, cancellation,
//     frame destroyed with its io_context).
//   - A handler's exception answers 500; the exception does not escape.
//     Cancellation of the caller is final: the call ends with
//     operation_aborted thrown, and no response.
//
// Per connection (server), on the server's clock:
//   - A new connection has header_read_timeout() to deliver its first
//     request's header, a kept-alive one idle_timeout() to start the next
//     request and then header_read_timeout() to finish its header; a body
//     must arrive within body_read_timeout() of its header, a response be
//     written within write_timeout(). A client past any of these is
//     disconnected (no answer: it is not reading, or not sending).
//   - A header over max_header_bytes() answers 431, a body over
//     max_body_bytes() 413 (a Content-Length over it as soon as the header is
//     read); a request Beast cannot parse, 400. The connection closes after
//     each of these, once what the client still sends has been read and
//     dropped (for at most header_read_timeout() and 64 KiB), so that the
//     answer is not lost to a reset.
//   - At most max_connections() connections at once: one more is closed as
//     soon as it is accepted.
//   - These bounds are kept by one timer per server, which sweeps the
//     connections (each keeps the deadline of the phase it is in), not by a
//     timer per read and write. A bound is never cut early, and at most one
//     granularity late: a tenth of the smallest of the four, between 1 ms and
//     100 ms (100 ms with the defaults). The same sweep cancels handlers at
//     their deadline, on time. It runs only while connections are open.
//   - The handler runs in the connection's own coroutine, not in a child of
//     its own: what it changes of that coroutine (this_coro's
//     throw_if_cancelled, its cancellation state) stays for the connection.
//
// Drain: drain(), or any cancellation of run()'s coroutine, stops accepting
// (the acceptor is closed, so new connections are refused), closes idle
// connections, and lets requests in progress finish for drain_grace(); their
// responses carry `Connection: close`. When the grace ends (or a second
// cancellation of run() comes), every remaining connection is cancelled:
// handlers see operation_aborted. run() completes once every session has
// ended, normally when the drain was asked for; with a system_error when the
// acceptor failed (the server drains first). A drained server does not run
// again.
//
// Threads and lifetimes: the server, its sessions, its sweep and drain() run
// on the executor run()'s coroutine runs on (a strand on a multi-threaded
// io_context). The server and the handler must outlive run(); if run() may
// be left unfinished, they must outlive the io_context too (its destruction
// frees the sessions' frames, which give their slots back to the server).
// run() keeps a reference to the acceptor: a temporary one is refused at
// compile time.
#pragma once

#include <resilience/bulkhead.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/error.hpp>
#include <resilience/http/deadline_header.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <list>
#include <optional>
#include <stdexcept>
#include <string>
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

  // Requests inside handlers at once: 1 to 2^31 - 1; 100 by default.
  server_options max_concurrent(std::uint32_t n) const;
  // Retry-After on a 503 from shedding, in whole seconds, 0 or more; 1 by default.
  server_options retry_after(std::chrono::seconds s) const;
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
  std::uint32_t max_concurrent_ = 100;
  std::chrono::seconds retry_after_{1};
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

namespace detail {

// An answer of the server's own (503, 504, 500...), empty, in the handler's
// response type.
template <class Response>
Response status_response(boost::beast::http::status status, unsigned version, bool keep_alive) {
  Response res{status, version};
  res.keep_alive(keep_alive);
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

template <class Handler, class Clock>
guarded_handler(Handler, server_options, Clock) -> guarded_handler<Handler, Clock>;
template <class Handler>
guarded_handler(Handler, server_options) -> guarded_handler<Handler>;
template <class Handler>
guarded_handler(Handler) -> guarded_handler<Handler>;

}  // namespace resilience::http

#include <resilience/http/detail/server_session.hpp>

namespace resilience::http {

template <request_handler Handler, resilience::clock Clock>
class server {
 public:
  using response_type = handler_response_t<Handler>;
  using clock_type = Clock;

  explicit server(Handler handler, server_options options = {}, Clock clock = {})
      : guard_(std::move(handler), std::move(options), std::move(clock)),
        smallest_bound_(std::min({guard_.options().header_read_timeout(), guard_.options().body_read_timeout(),
                                  guard_.options().write_timeout(), guard_.options().idle_timeout()})),
        sweep_granularity_(detail::sweep_granularity(smallest_bound_)) {}
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Accepts and serves connections until drained (see the top of this
  // header). The acceptor must be open and listening.
  boost::asio::awaitable<void> run(boost::asio::ip::tcp::acceptor& acceptor) & { return serve(&acceptor); }
  // The acceptor is kept by reference for as long as the server runs.
  void run(boost::asio::ip::tcp::acceptor&&) & = delete;
  void run(boost::asio::ip::tcp::acceptor&) && = delete;

  // Starts the drain; on the server's executor. Before run(), run() then
  // closes its acceptor and returns at once; after a drain, nothing.
  void drain() { begin_drain(); }

  bool draining() const noexcept { return draining_; }
  std::size_t connections() const noexcept { return sessions_.size(); }
  std::uint32_t in_flight() const noexcept { return guard_.in_flight(); }
  const server_options& options() const noexcept { return guard_.options(); }

 private:
  using timer_type =
      std::remove_cvref_t<decltype(std::declval<const Clock&>().make_timer(std::declval<boost::asio::any_io_executor>()))>;
  using tcp = boost::asio::ip::tcp;

  boost::asio::awaitable<void> serve(tcp::acceptor* acceptor);
  boost::asio::awaitable<void> session(tcp::socket socket, detail::session_entry* entry);

  // Bounds without a timer each. Each session keeps in its entry the
  // deadline of the phase it is in (a store per phase): a connection bound
  // (header, body, write, idle) or, while its handler runs, the handler's
  // deadline. One timer per server sweeps the entries: it closes the socket
  // of a connection past its bound, and cancels a handler past its deadline.
  //
  // Connection bounds are coarse. A sweep at `now` arms the next one at the
  // earliest bound it saw, but no sooner than one granularity and no later
  // than the smallest bound from now. A bound set after a sweep is at least
  // the smallest bound after it, so the next sweep comes no later than that
  // bound and sees it: a bound is cut on time, or up to one granularity late
  // when it falls less than one granularity after a sweep (bounds close
  // together are cut in one sweep). Handler deadlines are exact: the next sweep is
  // armed no later than the earliest, and one set earlier than the sweep
  // armed re-arms it (the default cap, 30 s, comes after the sweep, which
  // is due within 10 s, so only deadlines sent by clients pay that).
  //
  // The sweep runs only while sessions exist: with none, it is cancelled and
  // holds no work on the io_context.
  void sweep() {
    const time_point now = guard_.clock().now();
    time_point earliest_bound = time_point::max();
    time_point earliest_deadline = time_point::max();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      detail::session_entry& e = *it++;  // before an emission, which might end the session in place
      if (e.cancelled || e.timed_out) continue;  // ending already
      if (e.in_handler) {
        if (e.deadline > now) {
          earliest_deadline = std::min(earliest_deadline, e.deadline);
        } else if (!e.handler_expired) {
          e.handler_expired = true;
          e.signal.emit(boost::asio::cancellation_type::terminal);  // the session sees it and answers 504
        }
        continue;
      }
      if (e.deadline <= now && e.socket) {
        e.timed_out = true;
        // Closed, not only cancelled: an operation between two steps (a
        // completion already queued) fails on its next step, so none can
        // outlive the bound.
        error_code ignored;
        e.socket->close(ignored);
        continue;
      }
      earliest_bound = std::min(earliest_bound, e.deadline);  // a session not running yet: the next sweep
    }
    if (sessions_.empty()) return;
    arm_sweep(std::min({saturating_add(now, smallest_bound_),
                        std::max(earliest_bound, saturating_add(now, sweep_granularity_)), earliest_deadline}));
  }

  void arm_sweep(time_point at) {
    if (!sweep_timer_ || at == time_point::max()) return;  // no bound at all
    sweep_timer_->expires_at(at);  // a wait still pending ends with operation_aborted
    sweep_at_ = at;
    sweep_armed_ = true;
    ++sweep_waits_;
    sweep_timer_->async_wait([this](error_code ec) {
      --sweep_waits_;
      if (!ec) {
        sweep_armed_ = false;
        sweep();
      }
      if (ended() && wake_) wake_->cancel();
    });
  }

  // A new connection: its first header is bounded from now.
  void watch_connection(detail::session_entry& e, time_point now) {
    e.deadline = saturating_add(now, options().header_read_timeout());
    if (!sweep_armed_)
      arm_sweep(std::min(saturating_add(now, smallest_bound_),
                         std::max(e.deadline, saturating_add(now, sweep_granularity_))));
  }

  // A handler starts, with its deadline.
  void watch_handler(detail::session_entry& e, time_point deadline) {
    e.in_handler = true;
    e.deadline = deadline;
    if (deadline != time_point::max() && (!sweep_armed_ || deadline < sweep_at_)) arm_sweep(deadline);
  }

  void stop_sweep() {
    if (sweep_waits_ != 0 && sweep_timer_) sweep_timer_->cancel();
    sweep_armed_ = false;
  }

  // No session left, and no wait of the sweep pending (it refers to the server).
  bool ended() const noexcept { return sessions_.empty() && sweep_waits_ == 0; }

  void begin_drain() {
    if (draining_) return;
    draining_ = true;
    drain_started_ = guard_.clock().now();
    if (acceptor_) {
      error_code ignored;
      acceptor_->close(ignored);  // the pending accept ends; new connections are refused
    }
    // An idle connection runs no handler: cancelling its read through the
    // socket ends it. Its signal is left alone: called from outside the
    // executor, the emission would be posted, and could run after the session
    // ended and its entry was freed.
    for (auto& e : sessions_)
      if (e.idle) cancel(e, false);
  }

  static void cancel(detail::session_entry& e, bool reach_handler = true) {
    if (e.cancelled) return;
    e.cancelled = true;
    // The socket too: its operations end whether or not they honour
    // per-operation cancellation.
    if (e.socket) {
      error_code ignored;
      e.socket->cancel(ignored);
    }
    if (reach_handler) e.signal.emit(boost::asio::cancellation_type::terminal);
  }

  void session_ended(std::list<detail::session_entry>::iterator it) {
    sessions_.erase(it);
    if (sessions_.empty()) stop_sweep();
    if (ended() && wake_) wake_->cancel();
  }

  guarded_handler<Handler, Clock> guard_;
  duration smallest_bound_;     // of the four connection bounds
  duration sweep_granularity_;  // how late a bound may be cut
  std::list<detail::session_entry> sessions_;  // stable addresses: each session refers to its entry
  tcp::acceptor* acceptor_ = nullptr;
  boost::asio::steady_timer* wake_ = nullptr;  // run()'s wake-up while it drains
  timer_type* sweep_timer_ = nullptr;          // in run()'s frame, so gone with the io_context
  time_point sweep_at_{};                      // when the sweep is due, if armed
  bool sweep_armed_ = false;                   // a sweep is due
  std::size_t sweep_waits_ = 0;                // the sweep's waits not completed yet, cancelled ones included
  bool draining_ = false;
  bool ran_ = false;
  time_point drain_started_{};  // the grace counts from here
};

template <class Handler, class Clock>
server(Handler, server_options, Clock) -> server<Handler, Clock>;
template <class Handler>
server(Handler, server_options) -> server<Handler>;
template <class Handler>
server(Handler) -> server<Handler>;

}  // namespace resilience::http

#include <resilience/http/impl/server.hpp>
