// resilience/http/impl/connection_pool.hpp — the pool's coroutines: a
// lease (a kept connection, a place to open one, or a wait for either) and
// opening a connection (resolve, connect, TLS handshake). Included at the end
// of resilience/http/connection_pool.hpp, which declares them and states the
// contract; not to be included on its own.
#pragma once

namespace resilience::http {

template <resilience::clock Clock>
auto basic_connection_pool<Clock>::acquire_impl(endpoint to, time_point deadline, detail::pool_wait_note* note)
    -> boost::asio::awaitable<lease_result> {
  namespace asio = boost::asio;
  const auto cs = co_await asio::this_coro::cancellation_state;
  if (cs.cancelled() != asio::cancellation_type::none) co_return asio::error::operation_aborted;
  const std::string key = to.key();
  using executor_type = asio::any_io_executor;
  const executor_type ex = co_await asio::this_coro::executor;
  asio::execution_context& context = asio::query(ex, asio::execution::context);
  const asio::execution_context* const on = &context;
  sweep_now_and_then();
  for (;;) {
    detail::pool_core::acquired a = core_.acquire(key, clock_.now(), nullptr, on);
    if (a.how == detail::pool_core::grant::busy) {
      if (!core_.options().wait_for_connection()) co_return error::bulkhead_full;
      const time_point began = clock_.now();
      if (began >= deadline) co_return error::deadline_exceeded;
      auto w = std::make_shared<waiter<executor_type>>(clock_, ex);
      w->self = w;
      core_.watch(context);  // its shutdown withdraws the waiter
      a = core_.acquire(key, clock_.now(), w, on);
      if (a.how == detail::pool_core::grant::queued) {
        queue_guard guard{&core_, a.where, w.get()};
        w->timer.expires_at(deadline);
        auto [ec] = co_await w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
        const bool granted = !core_.withdraw(a.where, *w) && w->state == detail::pool_waiter::status::granted;
        if (note) {
          note->waited = true;
          note->granted = granted && cs.cancelled() == asio::cancellation_type::none;
          note->waited_for += clock_.now() - began;
          // Told as the wait ends, before a connection is opened in the place.
          if (note->granted && note->report_to) {
            event e{event_kind::pool_wait};
            e.outcome = call_outcome::success;
            e.attempt = note->report_to->attempt;
            e.delay = note->waited_for;
            note->report_to->report(e);
          }
        }
        if (granted) {
          // Granted (maybe as the timer fired or the call was cancelled).
          w->state = detail::pool_waiter::status::left;
          a.conn = std::move(w->granted_connection);
          a.how = a.conn ? detail::pool_core::grant::reused : detail::pool_core::grant::open_new;
          if (cs.cancelled() != asio::cancellation_type::none) {
            const bool keep = a.conn != nullptr;
            core_.release(*a.where, std::move(a.conn), keep, close_reason::failed, clock_.now());
            co_return asio::error::operation_aborted;
          }
        } else {
          w->state = detail::pool_waiter::status::left;
          if (cs.cancelled() != asio::cancellation_type::none || (ec && ec != asio::error::operation_aborted))
            co_return asio::error::operation_aborted;
          co_return error::deadline_exceeded;
        }
      }
    }
    connection_lease lease(core_, *a.where, std::move(a.conn));
    if (a.how == detail::pool_core::grant::reused) {
      if (!lease->peer_closed()) {
        ++lease->reuses_;
        co_return lease_result(std::move(lease));
      }
      lease.close(close_reason::peer_closed);  // its place is free again: look once more
      continue;
    }
    // A place to open a connection in: the lease gives it back on failure.
    auto opened = co_await open(to);
    if (!opened) co_return opened.error();
    lease.adopt(std::move(*opened));
    core_.report_opened(*a.where);
    co_return lease_result(std::move(lease));
  }
}

template <resilience::clock Clock>
auto basic_connection_pool<Clock>::open(const endpoint& to) -> boost::asio::awaitable<boost::system::result<std::unique_ptr<pooled_connection>>> {
  namespace asio = boost::asio;
  using tcp = asio::ip::tcp;
  const auto ex = co_await asio::this_coro::executor;
  pooled_connection::tcp_stream stream(ex);
  error_code ec;
  // An address given (a replica of an upstream) is connected to as it is.
  const auto address = asio::ip::make_address(to.address.empty() ? to.host : to.address, ec);
  const bool literal = !ec && to.address.empty();
  if (!ec) {
    std::tie(ec) = co_await stream.async_connect(tcp::endpoint(address, to.port), asio::as_tuple(asio::use_awaitable));
  } else {
    tcp::resolver resolver(ex);
    const auto resolve_bound = basic_timeout<Clock>(core_.options().resolve_timeout(), clock_);
    auto [rec, results] = co_await resolve_bound(
        [&]() -> asio::awaitable<std::tuple<error_code, tcp::resolver::results_type>> {
          co_return co_await resolver.async_resolve(to.host, std::to_string(to.port),
                                                    asio::as_tuple(asio::use_awaitable));
        });
    if (rec) co_return rec;
    tcp::endpoint connected;
    std::tie(ec, connected) = co_await stream.async_connect(results, asio::as_tuple(asio::use_awaitable));
  }
  if (ec) co_return ec;
  core_.watch(asio::query(ex, asio::execution::context));
  stream.socket().set_option(tcp::no_delay(true), ec);
  if (!to.tls) co_return std::make_unique<pooled_connection>(std::move(stream));

  pooled_connection::tls_stream tls(std::move(stream), *tls_);
  if (core_.options().verify_peer()) {
    tls.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    tls.set_verify_callback(asio::ssl::host_name_verification(to.host));
  } else {
    tls.set_verify_mode(asio::ssl::verify_none);
  }
  // SNI names hosts, never addresses (RFC 6066 §3).
  if (!literal && !SSL_set_tlsext_host_name(tls.native_handle(), to.host.c_str()))
    co_return error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category());
  std::tie(ec) = co_await tls.async_handshake(asio::ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
  if (ec) co_return ec;
  co_return std::make_unique<pooled_connection>(std::move(tls));
}

template <resilience::clock Clock>
std::optional<connection_lease> basic_connection_pool<Clock>::reuse(const std::string& key, time_point now,
                                                                    const boost::asio::execution_context* on,
                                                                    bool check_peer) {
  sweep_now_and_then(now);
  for (;;) {
    detail::pool_core::acquired a = core_.acquire(key, now, nullptr, on, true);
    if (a.how != detail::pool_core::grant::reused) return std::nullopt;
    std::optional<connection_lease> lease(std::in_place, core_, *a.where, std::move(a.conn));
    if (!check_peer || !(*lease)->peer_closed()) {
      ++(*lease)->reuses_;
      return lease;
    }
    lease->close(close_reason::peer_closed);  // look once more
  }
}

}  // namespace resilience::http
