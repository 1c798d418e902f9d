// resilience/http/impl/guarded_handler.hpp — the coroutine of a guarded
// call and its steps (the deadline read, the refusals, the answer), which
// the server's sessions take too. Included at the end of
// resilience/http/guarded_handler.hpp, which states the contract; not to be
// included on its own.
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
    return status_response<response>(boost::beast::http::status::bad_request, version, keep_alive, options().problem_details());
  }

  response shed(unsigned version, bool keep_alive, time_point start, const context& ctx) const {
    namespace bhttp = boost::beast::http;
    if (options().on_shed()) options().on_shed()(guard->slots_.in_flight());
    report(ctx, event_kind::shed, 503);
    auto res = status_response<response>(bhttp::status::service_unavailable, version, keep_alive, options().problem_details());
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
      return status_response<response>(bhttp::status::gateway_timeout, version, keep_alive, options().problem_details());
    }
    finish(500, start);
    return status_response<response>(bhttp::status::internal_server_error, version, keep_alive, options().problem_details());
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

}  // namespace detail
}  // namespace resilience::http
