// resilience/http/impl/server.hpp — the coroutines of http::server: the
// accept loop with its drain (serve) and a connection's session (its
// requests read under the phase bounds the sweep keeps, the handler, the
// answers). Included at the end of resilience/http/server.hpp, which
// declares them and states the contract; not to be included on its own.
#pragma once

namespace resilience::http {

namespace detail {

// A request Beast could not parse (answered 400), as opposed to a client
// that left before finishing it.
inline bool is_parse_error(const error_code& ec) noexcept {
  namespace bhttp = boost::beast::http;
  return ec.category() == bhttp::make_error_code(bhttp::error::need_more).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
}

}  // namespace detail

// GCC 12, inlining these coroutines' starts into a caller, may take the
// frame's own operator delete for a mismatch of its operator new
// (-Wmismatched-new-delete): both are Asio's frame allocator.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
template <request_handler Handler, resilience::clock Clock>
boost::asio::awaitable<void> server<Handler, Clock>::serve(tcp::acceptor* acceptor) {
  namespace asio = boost::asio;
  if (ran_) throw std::logic_error("http::server::run: runs once");
  ran_ = true;
  co_await asio::this_coro::throw_if_cancelled(false);
  // Any cancellation of run() asks for a drain, not only a terminal one.
  co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
  const auto executor = co_await asio::this_coro::executor;
  const Clock& clock = guard_.clock();
  acceptor_ = acceptor;
  asio::steady_timer wake(executor, asio::steady_timer::time_point::max());  // a wake-up, never a time
  wake_ = &wake;
  auto sweep_timer = clock.make_timer(executor);
  sweep_timer_ = &sweep_timer;
  struct release_on_exit {
    server* self;
    ~release_on_exit() {
      self->sweep_timer_ = nullptr;
      self->wake_ = nullptr;
      self->acceptor_ = nullptr;
    }
  } release{this};

  error_code failure;
  while (!draining_) {
    auto [ec, socket] = co_await acceptor->async_accept(asio::as_tuple(asio::use_awaitable));
    const auto state = co_await asio::this_coro::cancellation_state;
    if (draining_ || state.cancelled() != asio::cancellation_type::none) break;
    if (ec) {
      if (ec == asio::error::connection_aborted) continue;  // the client gave up in the backlog
      failure = ec;
      break;
    }
    if (sessions_.size() >= options().max_connections()) {
      error_code ignored;
      socket.close(ignored);
      continue;
    }
    auto it = sessions_.emplace(sessions_.end());
    watch_connection(*it, clock.now());
    asio::co_spawn(executor, session(std::move(socket), &*it),
                   asio::bind_cancellation_slot(it->signal.slot(),
                                                [this, it](std::exception_ptr) { session_ended(it); }));
  }
  begin_drain();
  // Drained before run() began, begin_drain() had no acceptor to close:
  // left listening, it would queue connections nobody accepts.
  {
    error_code ignored;
    acceptor->close(ignored);
  }
  // A second cancellation, from here on, ends the grace.
  co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());

  const time_point grace_end = saturating_add(drain_started_, options().drain_grace());
  auto grace = clock.make_timer(executor);
  bool forced = options().drain_grace() == duration::zero();
  while (!ended()) {
    const auto state = co_await asio::this_coro::cancellation_state;
    if (state.cancelled() != asio::cancellation_type::none) forced = true;
    if (forced) {
      for (auto& e : sessions_) cancel(e);
      co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    grace.expires_at(grace_end);
    auto [order, wake_ec, grace_ec] =
        co_await asio::experimental::make_parallel_group(wake.async_wait(asio::deferred),
                                                         grace.async_wait(asio::deferred))
            .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
    (void)wake_ec;
    if (order[0] == 1 && !grace_ec) forced = true;
  }
  if (failure) throw boost::system::system_error(failure, "http::server accept");
}

template <request_handler Handler, resilience::clock Clock>
boost::asio::awaitable<void> server<Handler, Clock>::session(tcp::socket socket, detail::session_entry* entry) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace bhttp = boost::beast::http;
  entry->socket = &socket;
  struct forget_socket {
    detail::session_entry* entry;
    ~forget_socket() { entry->socket = nullptr; }
  } forget{entry};
  const server_options& o = options();
  const Clock& clock = guard_.clock();
  const resilience::detail::clock_anchor<Clock> anchor(clock);  // handlers' ctx.now() reads this clock
  // The session's own reads and writes get no cancellation slot: the sweep
  // and the drain end them through the socket, and a slot would have each of
  // them (Beast's steps included) put a cancellation handler in it and clear
  // it, about 550 instructions a request. The session's signal is for its
  // handler, whose operations take the coroutine's slot as usual.
  auto socket_op = asio::bind_cancellation_slot(asio::cancellation_slot(), asio::as_tuple(asio::use_awaitable));
  beast::flat_buffer buffer;
  // The phase's bound, for the sweep to hold the connection to.
  const auto bound = [&](duration d) { entry->deadline = saturating_add(clock.now(), d); };
  // After an operation: whether the sweep cut it, reported as a slow client in `phase`.
  // The connection's own events (a slow client, a request refused before it
  // was one) go where its requests' do.
  context connection_ctx;
  connection_ctx.events = o.events();
  const auto cut = [&](client_phase phase) {
    if (!entry->timed_out) return false;
    if (o.on_slow_client()) o.on_slow_client()(phase);
    connection_ctx.report(event{event_kind::slow_client});
    return true;
  };
  // A short answer of the server's own before it closes the connection. It
  // is a request finished like any other, for whoever counts them.
  const auto refuse = [&](bhttp::status status, unsigned version, bhttp::verb method) -> asio::awaitable<void> {
    if (o.on_request_finished()) o.on_request_finished()(request_finished{static_cast<unsigned>(status), {}, method});
    detail::guard_steps<guarded_handler<Handler, Clock>>::report(connection_ctx, event_kind::request_refused,
                                                                 static_cast<unsigned>(status));
    auto res = detail::status_response<bhttp::response<bhttp::string_body>>(status, version, false, o.problem_details());
    {
      bound(o.write_timeout());
      auto [ec, n] = co_await bhttp::async_write(socket, res, socket_op);
      (void)n;
      if (cut(client_phase::write) || ec) co_return;
    }
    // The client may still be sending the request we refused. Closing with
    // unread data resets the connection, which can destroy the answer before
    // the client reads it: so drop what comes, within bounds, until it stops.
    error_code ignored;
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    bound(o.header_read_timeout());
    for (std::size_t dropped = 0; dropped < 64 * 1024;) {
      buffer.clear();
      auto [ec, n] = co_await socket.async_read_some(buffer.prepare(4096), socket_op);
      if (ec || entry->timed_out) break;
      dropped += n;
    }
  };

  // The first request's header is bounded from the accept (serve() set it).
  for (bool first = true;; first = false) {
    if (!first) {
      if (buffer.size() == 0) {  // nothing pipelined: wait for the next request
        if (draining_) break;
        entry->idle = true;  // until it begins (see request_stream)
        bound(o.idle_timeout());
      } else {
        bound(o.header_read_timeout());
      }
    }

    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(o.max_header_bytes());
    parser.body_limit(o.max_body_bytes());
    {
      detail::request_stream<Clock> stream(socket, *entry, clock, o.header_read_timeout());
      auto [ec, n] = co_await bhttp::async_read_header(stream, buffer, parser, socket_op);
      (void)n;
      // An idle client is not a slow one, and neither is a connection that
      // never sent a byte (a preconnect, a check of the port): both are
      // closed quietly at their bound.
      const bool idle = std::exchange(entry->idle, false) || (first && !parser.got_some() && buffer.size() == 0);
      if (idle ? entry->timed_out : cut(client_phase::header)) break;
      if (entry->cancelled) break;  // drained while idle
      if (ec == bhttp::error::header_limit) {
        co_await refuse(bhttp::status::request_header_fields_too_large, 11, bhttp::verb::unknown);
        break;
      }
      if (ec == bhttp::error::body_limit) {  // a Content-Length over the limit
        co_await refuse(bhttp::status::payload_too_large, parser.get().version(), parser.get().method());
        break;
      }
      if (ec) {
        if (detail::is_parse_error(ec)) co_await refuse(bhttp::status::bad_request, 11, bhttp::verb::unknown);
        break;  // else the client left, or the connection failed
      }
    }
    if (!parser.is_done()) {
      bound(o.body_read_timeout());
      auto [ec, n] = co_await bhttp::async_read(socket, buffer, parser, socket_op);
      (void)n;
      if (cut(client_phase::body)) break;
      if (ec == bhttp::error::body_limit) {
        co_await refuse(bhttp::status::payload_too_large, parser.get().version(), parser.get().method());
        break;
      }
      if (ec) {
        if (detail::is_parse_error(ec))
          co_await refuse(bhttp::status::bad_request, parser.get().version(), parser.get().method());
        break;
      }
    }

    // What guarded_handler does, with the handler run here rather than in a
    // child coroutine bounded by a timer: its deadline is kept by the sweep,
    // which cancels it through this session's own signal.
    server_request req = parser.release();
    const bool client_keeps = req.keep_alive();
    const unsigned version = req.version();
    const detail::guard_steps<guarded_handler<Handler, Clock>> steps{&guard_, req.method()};
    context ctx;
    bool malformed_deadline = false;
    const time_point start = steps.begin(req, ctx, malformed_deadline);
    std::optional<response_type> res;
    if (malformed_deadline) {
      res.emplace(steps.bad_deadline(version, client_keeps, start, ctx));
    } else if (!guard_.slots_.try_acquire()) {
      res.emplace(steps.shed(version, client_keeps, start, ctx));
    } else {
      const bulkhead_permit permit = resilience::detail::adopt_slot(guard_.slots_);  // back on every path
      error_code why;  // a failure's code, if it had one
      if (ctx.deadline > start) {
        anchor.attach(ctx);
        watch_handler(*entry, ctx.deadline);
        ctx.watched_deadline = ctx.deadline;  // the sweep ends the handler then, and the 504 reports it
        time_point answered_at{};
        try {
          res.emplace(co_await guard_.handler_(std::move(req), std::as_const(ctx)));
          answered_at = clock.now();
        } catch (const boost::system::system_error& e) {
          why = e.code();
        } catch (...) {
        }
        entry->in_handler = false;
        entry->deadline = time_point::max();
        if (entry->cancelled) {  // the drain's grace ended: no answer
          steps.finish(0, start);
          break;
        }
        if (std::exchange(entry->handler_expired, false)) {
          co_await asio::this_coro::reset_cancellation_state();  // the session goes on to answer
          if (!res) why = error::deadline_exceeded;  // whatever the handler failed with once cut
        }
        // Past the deadline the client has stopped waiting: whatever the
        // handler made of it (a 502 from an upstream call the deadline cut,
        // a late 200), the answer is 504, and counted as one.
        if (res && answered_at >= ctx.deadline) {
          res.reset();
          why = error::deadline_exceeded;
        }
      } else {
        why = error::deadline_exceeded;  // passed on arrival: the handler is not called
      }
      if (res) {
        steps.finish(res->result_int(), start);
      } else {
        res.emplace(steps.failed(why, ctx.deadline, version, client_keeps, start, ctx));
      }
    }
    const bool again = client_keeps && res->keep_alive() && !draining_ && !entry->cancelled;
    res->keep_alive(again);
    bound(o.write_timeout());
    auto [ec, n] = co_await bhttp::async_write(socket, *res, socket_op);
    (void)n;
    if (cut(client_phase::write)) break;
    if (ec || !again) break;
  }
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace resilience::http
