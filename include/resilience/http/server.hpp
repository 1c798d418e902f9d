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
#include <resilience/http/guarded_handler.hpp>
#include <resilience/http/server_options.hpp>
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

template <class Handler, class Clock = steady_clock>
server(Handler, server_options = {}, Clock = {}) -> server<Handler, Clock>;

}  // namespace resilience::http

#include <resilience/http/impl/server.hpp>
