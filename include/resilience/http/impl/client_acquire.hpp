// resilience/http/impl/client_acquire.hpp — basic_client's wait for a
// pooled connection (reported as pool_wait) and its refusals. Included at the
// end of resilience/http/impl/client.hpp; not to be included on its own.
#pragma once

namespace resilience::http {

template <resilience::clock Clock>
boost::asio::awaitable<error_code> basic_client<Clock>::acquire_into(std::optional<connection_lease>& lease,
                                                                       const endpoint& to, const context& ctx,
                                                                       duration limit) {
  http::detail::pool_wait_note note{&ctx};
  auto acquired = co_await resilience::detail::run_bounded<lease_result, boost::asio::any_io_executor>(
      // `to` was validated where it entered: request() (checked) or upstream_options.
      [this, &to, &note] { return pool_.acquire_impl(to, time_point::max(), &note); },
      ctx, clock_, limit, boost::asio::cancellation_type::terminal);
  if (!acquired) {
    error_code why = acquired.error();
    if (note.waited && !note.granted) {
      // The bound ended the wait (the caller's own cancellation stays operation_aborted).
      if (why == error::timeout || why == error::deadline_exceeded) why = error::pool_exhausted;
      event e{event_kind::pool_wait};
      e.outcome = call_outcome::error;
      e.attempt = ctx.attempt;
      e.error = why;
      e.delay = note.waited_for;
      ctx.report(e);
    }
    co_return why;
  }
  lease.emplace(std::move(*acquired));
  co_return error_code{};
}

template <resilience::clock Clock>
boost::asio::awaitable<error_code> basic_client<Clock>::refuse(error_code why, bool throws) {
  co_await resilience::detail::yield_after_refusal<boost::asio::any_io_executor>(throws);
  co_return why;
}

}  // namespace resilience::http
