// A call whose awaitable gives boost::system::result<V>, started as an Asio
// initiating function that completes with void(error_code, V). Not public
// API: http::client::async_request uses it.
#pragma once

#include <resilience/error.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/system/result.hpp>

#include <exception>
#include <utility>

namespace resilience::detail {

// The awaitable runs on `ex` (co_spawn); the token's cancellation slot
// reaches it as its caller's, and the completion runs on the token's
// associated executor. An exception out of the awaitable is thrown from the
// completion (as asio::detached does).
template <class V, class Token>
auto spawn_result(const boost::asio::any_io_executor& ex, boost::asio::awaitable<boost::system::result<V>> call,
                  Token&& token) {
  namespace asio = boost::asio;
  return asio::async_initiate<Token, void(error_code, V)>(
      [](auto handler, const asio::any_io_executor& ex, asio::awaitable<boost::system::result<V>> call) {
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto completes_on = asio::get_associated_executor(handler, ex);
        asio::co_spawn(ex, std::move(call),
                       asio::bind_cancellation_slot(
                           slot, asio::bind_executor(std::move(completes_on),
                                                     [h = std::move(handler)](std::exception_ptr e,
                                                                              boost::system::result<V> r) mutable {
                                                       if (e) std::rethrow_exception(e);
                                                       if (r.has_value()) {
                                                         std::move(h)(error_code{}, std::move(*r));
                                                       } else {
                                                         std::move(h)(r.error(), V{});
                                                       }
                                                     })));
      },
      token, ex, std::move(call));
}

}  // namespace resilience::detail
