// resilience/http/impl/client_exchange.hpp — basic_client's exchange of one
// request and its response on a pooled connection, under the attempt's
// bound. Included at the end of resilience/http/impl/client.hpp; not to be
// included on its own.
#pragma once

namespace resilience::http {

// The reads and writes take the caller's own cancellation slot; the bound
// passing closes the socket under them (a connection that ran out of time is
// never reused), so no operation installs a handler of the bound's.
template <resilience::clock Clock>
template <class ResBody, class Request>
auto basic_client<Clock>::exchange(connection_lease& lease, Request& req, const context& ctx,
                                   const bounded_by& limit, time_point now, bool unchecked,
                                   const boost::asio::any_io_executor& executor,
                                   std::optional<outcome<result<ResBody>>>& out)
    -> boost::asio::awaitable<bool> {
  namespace asio = boost::asio;
  namespace bhttp = boost::beast::http;
  using T = result<ResBody>;
  const auto caller = co_await asio::this_coro::cancellation_state;
  pooled_connection& conn = lease.conn();
  resilience::detail::local_bound<Clock, asio::any_io_executor> bound;
  // The timer's side runs on this call's executor, so never while this
  // frame runs: a lease that lets `conn` go before disarm() below, with no
  // co_await in between, leaves nothing for it to touch.
  if (limit.at != time_point::max()) {
    bound.arm(clock_, executor, limit.at, [](void* c) noexcept { static_cast<pooled_connection*>(c)->abort(); }, &conn);
  }
  bool closed_unanswered = false;
  // Whether the next operation may start: the bound's firing closes the
  // socket, but one operation's completion may already be queued then.
  const auto in_time = [&] { return !bound.fired() && caller.cancelled() == asio::cancellation_type::none; };
  try {
    if (const auto& header = options_.deadline_header()) {
      // The attempt's own bound, less the margin for the way back.
      const time_point sent =
          limit.at == time_point::max() ? limit.at : saturating_add(limit.at, -options_.deadline_margin());
      header->write(req, sent, now);
    }
    ctx.set(request_may_have_been_sent, true);
    constexpr auto token = asio::as_tuple(asio::use_awaitable);
    // Closed by the server while idle, as far as this exchange can tell.
    const auto may_resend = [&] { return unchecked && in_time(); };
    const auto stale = [&](const error_code& ec, bool got_some) {
      return may_resend() && http::detail::closed_before_answering(ec, got_some);
    };
    // A file body is read from the file's position as it is written:
    // every attempt starts where the first one did.
    const auto body_start = http::detail::body_position(req.body());
    auto [write_error, written] =
        co_await conn.visit([&](auto& stream) { return bhttp::async_write(stream, req, token); });
    http::detail::rewind_body(req.body(), body_start);
    if (write_error) {
      closed_unanswered = stale(write_error, false);
      out.emplace(outcome<T>::from_error(write_error));
    } else if (in_time()) {
      // Interim responses (1xx but 101, RFC 9110 §15.2: 100 Continue,
      // 103 Early Hints) come before the final one on the connection:
      // read past them, so that no caller gets an interim status and no
      // final response is left for the connection's next request.
      std::optional<bhttp::response_parser<ResBody>> parser;
      error_code read_error;
      bool interim = false;
      for (;; interim = true) {
        parser.emplace();
        parser->body_limit(options_.max_response_body());
        parser->header_limit(options_.max_response_header());
        // A response to HEAD has no body, whatever its Content-Length says.
        if (req.method() == bhttp::verb::head) parser->skip(true);
        auto [ec, read] = co_await conn.visit(
            [&](auto& stream) { return bhttp::async_read(stream, conn.buffer(), *parser, token); });
        read_error = ec;
        const unsigned status = parser->get().result_int();
        if (ec || status < 100 || status >= 200 || status == 101) break;
        if (!in_time()) {  // an interim response, and no time left for the final one
          read_error = asio::error::operation_aborted;
          interim = true;
          break;
        }
      }
      if (read_error) {
        closed_unanswered = !interim && stale(read_error, parser->got_some());
        out.emplace(outcome<T>::from_error(read_error));
      } else if (!interim && parser->get().result() == bhttp::status::request_timeout && may_resend()) {
        // A server may say why it closes an idle connection (408, RFC 9110
        // §15.5.9) before our request reaches it: an answer to nothing sent.
        closed_unanswered = true;
        out.emplace(std::in_place, std::move(parser->get()));  // the outcome, should the resend be refused
      } else {
        // Bytes after the response were asked for by nobody: the next
        // request on this connection would read them as its answer.
        // A bound that passed as the response came in has closed the socket.
        if (!bound.fired() && parser->get().keep_alive() && req.keep_alive() && conn.buffer().size() == 0) {
          lease.keep_alive(clock_.now());
        } else {
          lease.close(close_reason::not_reusable);
        }
        out.emplace(std::in_place, std::move(parser->get()));  // one move, where release() makes two
      }
    }
  } catch (...) {
    out.emplace(outcome<T>::from_current_exception());
  }
  // The timer's side refers to this frame: wait for it if it is under way.
  if (bound.disarm()) {
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await bound.wait_timer_side();
    co_await asio::this_coro::throw_if_cancelled(throws);
  }
  if (closed_unanswered) {
    lease.close(close_reason::peer_closed);
    co_return true;
  }
  if (bound.fired() && (!out || out->failed())) {
    out.emplace(outcome<T>::from_error(limit.reason));  // a response that made it in time still counts
    resilience::detail::report_expiry(ctx, limit.reason);
  }
  co_return false;
}

}  // namespace resilience::http
