// resilience/http/impl/client_holds.hpp — the client's waits for a host's
// Retry-After that another call received (client_options::max_host_hold).
// Included at the end of resilience/http/impl/client.hpp; not to be
// included on its own.
#pragma once

namespace resilience::http {

template <resilience::clock Clock>
boost::asio::awaitable<error_code> basic_client<Clock>::wait_out_holds(const std::string& key, const context& ctx,
                                                                         tally& counts) {
  // A later 429 may extend the hold during the wait: looked at again after it.
  while (const detail::host_hold hold = holds_.find(key, clock_.now())) {
    if (const error_code held = co_await wait_for_host(key, hold, ctx.deadline, ctx, counts)) co_return held;
  }
  co_return error_code{};
}

template <resilience::clock Clock>
boost::asio::awaitable<error_code> basic_client<Clock>::wait_for_host(const std::string& key, detail::host_hold hold,
                                                                        time_point limit, const context& ctx,
                                                                        tally& counts) {
  namespace asio = boost::asio;
  const time_point now = clock_.now();
  if (now >= ctx.deadline) co_return error_code(error::deadline_exceeded);
  const duration rest = hold.until - now;
  const bool bounded = limit != time_point::max();
  // As a retry gives up on a Retry-After it cannot wait out (a wait that
  // ends at the deadline itself leaves the attempt no time).
  if (rest > options_.retry_after().max_retry_after() || (bounded && rest >= limit - now)) {
    event e{event_kind::host_held};
    e.outcome = call_outcome::error;
    e.attempt = ctx.attempt;
    e.error = error::rate_limited;
    e.delay = rest;
    e.host = key;
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    ctx.report(e);
    co_return co_await refuse(error::rate_limited, throws);
  }
  duration wait = rest;
  if (options_.retry_after().is_jittered()) {
    // Spread over up to the hold's own length past its end, so that the
    // calls it held do not all come back at once (the backoff's first delay
    // would be too narrow for a busy client's many calls), within half the
    // time the call has left after the hold.
    auto spread = duration(static_cast<duration::rep>(retry_.random().next_unit() *
                                                       static_cast<double>(hold.length.count())));
    if (bounded) spread = std::min(spread, (limit - now - rest) / 2);
    wait += spread;
  }
  auto timer = clock_.make_timer(co_await asio::this_coro::executor);
  timer.expires_after(wait);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  const duration waited = clock_.now() - now;
  counts.held += waited;
  const auto caller = co_await asio::this_coro::cancellation_state;
  if (caller.cancelled() != asio::cancellation_type::none) co_return error_code(asio::error::operation_aborted);
  event e{event_kind::host_held};
  e.attempt = ctx.attempt;
  e.delay = waited;
  e.host = key;
  ctx.report(e);
  co_return error_code{};
}

template <resilience::clock Clock>
template <class T>
void basic_client<Clock>::note_hold(const std::string& key, const outcome<T>& o) {
  const auto* r = http::detail::response_of(o);
  if (!r || (r->result_int() != 429 && r->result_int() != 503)) return;
  if (const auto asked = options_.retry_after().requested(*r); asked && *asked > duration::zero()) {
    const time_point now = clock_.now();
    holds_.hold(key, std::min(*asked, options_.max_host_hold()), now);
  }
}

}  // namespace resilience::http
