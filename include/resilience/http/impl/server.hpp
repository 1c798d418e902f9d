// resilience/http/impl/server.hpp — the coroutines of guarded_handler (its
// steps, the bounded handler) and of http::server: the accept loop with its
// drain (serve) and a connection's session (its requests read under the
// phase bounds the sweep keeps, the handler, the answers). Included at the end of resilience/http/server.hpp, which declares
// them and states the contract; not to be included on its own.
#pragma once

namespace resilience::http {

namespace detail {

// The parts of a guarded call that do not wait, out of its coroutine: its
// frame stays small enough for Asio's frame cache (at most 1020 bytes).
template <class Guard>
struct guard_steps {
  using response = typename Guard::response_type;
  const Guard* guard;
  boost::beast::http::verb method;

  const server_options& options() const noexcept { return guard->options_; }

  // The call's deadline into ctx; the start event. Returns the start time;
  // `malformed` tells that the deadline header is there but unreadable.
  time_point begin(const server_request& req, context& ctx, bool& malformed) const {
    const server_options& o = options();
    const time_point start = guard->clock_.now();
    if (const auto sent = o.inbound_deadline().read_all(req, start); sent.present) {
      if (sent.deadline) ctx.deadline = std::min(ctx.deadline, *sent.deadline);
      malformed = !sent.deadline;
    }
    if (o.max_deadline() != duration::max())
      ctx.deadline = std::min(ctx.deadline, saturating_add(start, o.max_deadline()));
    if (o.events()) ctx.events = o.events();  // else the caller's, if any
    if (o.on_request_started()) o.on_request_started()(req);
    return start;
  }

  // To the call's sink: the server's, else its caller's.
  static void report(const context& ctx, event_kind kind, unsigned status) noexcept {
    event e{kind};
    e.status = status;
    ctx.report(e);
  }

  void finish(unsigned status, time_point start) const {
    if (options().on_request_finished())
      options().on_request_finished()(request_finished{status, guard->clock_.now() - start, method});
  }

  // A deadline header that does not parse is the client's error (as gRPC
  // answers it): running without the bound it meant to set would hide it.
  response bad_deadline(unsigned version, bool keep_alive, time_point start, const context& ctx) const {
    report(ctx, event_kind::request_refused, 400);
    finish(400, start);
    return status_response<response>(boost::beast::http::status::bad_request, version, keep_alive);
  }

  response shed(unsigned version, bool keep_alive, time_point start, const context& ctx) const {
    namespace bhttp = boost::beast::http;
    if (options().on_shed()) options().on_shed()(guard->slots_.in_flight());
    report(ctx, event_kind::shed, 503);
    auto res = status_response<response>(bhttp::status::service_unavailable, version, keep_alive);
    res.set(bhttp::field::retry_after, std::to_string(options().retry_after().count()));
    finish(503, start);
    return res;
  }

  // The answer to a handler that failed: 504 past the deadline, else 500.
  response failed(const error_code& why, time_point deadline, unsigned version, bool keep_alive,
                  time_point start, const context& ctx) const {
    namespace bhttp = boost::beast::http;
    if (why == error::deadline_exceeded) {
      if (options().on_deadline_exceeded()) options().on_deadline_exceeded()(deadline);
      report(ctx, event_kind::server_deadline_exceeded, 504);
      finish(504, start);
      return status_response<response>(bhttp::status::gateway_timeout, version, keep_alive);
    }
    finish(500, start);
    return status_response<response>(bhttp::status::internal_server_error, version, keep_alive);
  }
};

// The handler's answer, and when it came (with a deadline to judge it by):
// an answer made in time is kept even if this frame resumes late.
template <class Guard>
boost::asio::awaitable<void> answer_into(const Guard* guard, server_request* req, context ctx,
                                         std::optional<typename Guard::response_type>* answer, time_point* at) {
  answer->emplace(co_await guard->handler_(std::move(*req), ctx));
  if (ctx.has_deadline()) *at = guard->clock_.now();
}

template <class Guard>
boost::asio::awaitable<typename Guard::response_type> guarded_call(const Guard* guard, server_request req,
                                                                   context ctx) {
  namespace asio = boost::asio;
  const guard_steps<Guard> steps{guard, req.method()};
  bool malformed_deadline = false;
  const time_point start = steps.begin(req, ctx, malformed_deadline);
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  if (malformed_deadline) co_return steps.bad_deadline(version, keep_alive, start, ctx);
  if (!guard->slots_.try_acquire()) co_return steps.shed(version, keep_alive, start, ctx);
  const bulkhead_permit permit = resilience::detail::adopt_slot(guard->slots_);  // back on every path

  // The handler runs as a child bounded by the deadline (run_bounded): on
  // expiry it is cancelled and waited for. No deadline: it runs in place.
  // Its answer comes back through `answer`, so that the bounded run is that
  // of a void op: a frame small enough for Asio's frame cache.
  std::optional<typename Guard::response_type> answer;
  time_point answered_at{};
  error_code why;  // a failure's code, if it had one
  // The server reports the deadline's expiry (the 504 below): the bound,
  // and any stage inside whose bound is that deadline, leave it to it.
  ctx.watched_deadline = ctx.deadline;
  try {
    co_await resilience::detail::run_bounded<void, asio::any_io_executor>(
        [guard, &req, &answer, &answered_at](const context& c) {
          return answer_into(guard, &req, c, &answer, &answered_at);
        },
        ctx,
        guard->clock_, duration::max(), asio::cancellation_type::terminal, error::deadline_exceeded);
  } catch (const boost::system::system_error& e) {
    why = e.code();
  } catch (...) {
  }
  if (answer) {
    // Past the deadline the client has stopped waiting: whatever the handler
    // made of it (a 502 from an upstream call the deadline cut, a late 200),
    // the answer is 504, and counted as one.
    if (!ctx.has_deadline() || answered_at < ctx.deadline) {
      steps.finish(answer->result_int(), start);
      co_return std::move(*answer);
    }
    why = error::deadline_exceeded;
  }
  const auto caller = co_await asio::this_coro::cancellation_state;
  if (caller.cancelled() != asio::cancellation_type::none) {
    steps.finish(0, start);
    throw boost::system::system_error(asio::error::operation_aborted);
  }
  co_return steps.failed(why, ctx.deadline, version, keep_alive, start, ctx);
}


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
    auto res = detail::status_response<bhttp::response<bhttp::empty_body>>(status, version, false);
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
      const bool idle = std::exchange(entry->idle, false);
      if (idle ? entry->timed_out : cut(client_phase::header)) break;  // an idle client is not a slow one
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
