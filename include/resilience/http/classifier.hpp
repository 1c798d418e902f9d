// resilience/http/classifier.hpp — which HTTP failures are worth retrying,
// which count against a circuit breaker, and when a request may be repeated.
//
//   resilience::properties props;                       // the call's own
//   props.set(resilience::http::idempotent, resilience::http::is_idempotent(req));
//   const auto policy = resilience::retry_policy{}.retry_if(resilience::http::classifier{});
//   auto res = co_await resilience::co_retry(
//       [&](const resilience::context& ctx) -> asio::awaitable<response> {
//         co_await connect(...);
//         ctx.set(resilience::http::request_may_have_been_sent, true);
//         co_return co_await exchange(req);
//       },
//       policy, resilience::context{}.with(props));
//
// What is transient (classifier says "retry"):
//   - a response whose status is in the retryable set: by default 408, 429,
//     500, 502, 503, 504. Other statuses are final: 2xx and 3xx are
//     successes, other 4xx and 5xx permanent failures;
//   - network errors that say nothing about the server having acted:
//     connection refused, reset or aborted, broken pipe, timed out
//     (asio::error::timed_out, beast::error::timeout,
//     resilience::error::timeout), the stream ending before a whole response
//     came (beast::http::error::end_of_stream and partial_message,
//     asio::error::eof, and over TLS asio::ssl::error::stream_truncated: the
//     peer closed the connection without a TLS close_notify), and a
//     temporary name-resolution failure (asio::error::host_not_found_try_again).
// What is permanent: other TLS errors (a failed handshake or certificate
// check; the "asio.ssl" and "asio.ssl.stream" categories, recognised by name
// so that this header needs no OpenSSL), HTTP parse errors (other
// beast::http::error codes), any other error, and an exception without an
// error code. A cancellation is never
// transient (and retry never retries one anyway).
//
// Idempotency. A transient failure is retried only when repeating the request
// is safe:
//   - the request certainly was not sent: the property
//     `request_may_have_been_sent` is false or absent, and the outcome is
//     not a response (a response proves it was sent); or
//   - the request is idempotent: the property `idempotent` is true. Set it
//     from is_idempotent(request): GET, HEAD, OPTIONS, PUT, DELETE and TRACE
//     are, and so is any request carrying an Idempotency-Key header. Absent
//     means not idempotent.
// So a POST without a key is retried after a connection refused before
// anything was written, never after a reset once it may have been sent, and
// never on a 503. The op marks `request_may_have_been_sent` before it writes
// the first byte; the caller sets `idempotent`. These rules need the call's
// properties: a call with none attached (context::props null) has said
// nothing about its request, and is classified by the outcome alone, as the
// one-argument shape classifier{}(outcome) does — for callers who only make
// safe requests or decide idempotency themselves. Attach properties to any
// call that may send a POST.
//
// breaker_classifier: what counts as a failure for a circuit breaker: every
// error or exception except a cancellation, and a 5xx response. A 4xx is
// the client's problem, not the dependency's, and does not count.
//
// The outcome's value may be a beast::http::response<Body, Fields>, a
// boost::system::result of one, or an asio::as_tuple tuple
// (error_code, response) — or anything with no response in it, for which only
// the error is judged.
#pragma once

#include <resilience/context.hpp>
#include <resilience/detail/event_support.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/properties.hpp>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/verb.hpp>

#include <bitset>
#include <cstring>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace resilience::http {

// Set by the op (or an HTTP client) before it writes the request's first
// byte: from then on a retry may repeat the request.
inline constexpr property_key<bool> request_may_have_been_sent{"http.request_may_have_been_sent"};
// Set by the caller: repeating this request is harmless.
inline constexpr property_key<bool> idempotent{"http.idempotent"};

// RFC 9110 §9.2.2's idempotent methods, or a request with an
// Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header).
template <class Body, class Fields>
bool is_idempotent(const boost::beast::http::request<Body, Fields>& req) {
  using boost::beast::http::verb;
  switch (req.method()) {
    case verb::get:
    case verb::head:
    case verb::options:
    case verb::put:
    case verb::delete_:
    case verb::trace:
      return true;
    default:
      return req.find("Idempotency-Key") != req.end();
  }
}

// How an error code is judged.
enum class error_kind { none, transient, permanent, cancelled };

namespace detail {
// asio::ssl::error::stream_truncated's value with OpenSSL 1.1 and later,
// named here so that this header needs no OpenSSL.
inline constexpr int ssl_stream_truncated = 1;
}  // namespace detail

inline error_kind classify_error(const error_code& ec) noexcept {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  using boost::system::errc::errc_t;
  if (!ec) return error_kind::none;
  if (is_cancellation(ec)) return error_kind::cancelled;
  const char* category = ec.category().name();
  if (std::strcmp(category, "asio.ssl.stream") == 0)  // stream_truncated is 1 (checked in connection_pool.hpp)
    return ec.value() == detail::ssl_stream_truncated ? error_kind::transient : error_kind::permanent;
  if (std::strcmp(category, "asio.ssl") == 0) return error_kind::permanent;
  if (ec.category() == beast::http::make_error_code(beast::http::error::end_of_stream).category())  // parse errors
    return ec == beast::http::error::end_of_stream || ec == beast::http::error::partial_message
               ? error_kind::transient
               : error_kind::permanent;
  if (ec == errc_t::connection_refused || ec == errc_t::connection_reset || ec == errc_t::connection_aborted ||
      ec == errc_t::broken_pipe || ec == errc_t::timed_out || ec == asio::error::timed_out ||
      ec == asio::error::eof || ec == asio::error::host_not_found_try_again || ec == beast::error::timeout ||
      ec == error::timeout)
    return error_kind::transient;
  return error_kind::permanent;
}

namespace detail {

template <class T>
struct is_response : std::false_type {};
template <class Body, class Fields>
struct is_response<boost::beast::http::response<Body, Fields>> : std::true_type {};

// Where the response is inside an op's value: `type` is void when there is
// none; get() returns null when this value holds none (an error instead).
template <class T>
struct response_access {
  using type = void;
};
template <class Body, class Fields>
struct response_access<boost::beast::http::response<Body, Fields>> {
  using type = boost::beast::http::response<Body, Fields>;
  static const type* get(const type& r) noexcept { return &r; }
};
template <class Body, class Fields>
struct response_access<boost::system::result<boost::beast::http::response<Body, Fields>, error_code>> {
  using type = boost::beast::http::response<Body, Fields>;
  static const type* get(const boost::system::result<type, error_code>& r) noexcept {
    return r.has_value() ? &*r : nullptr;
  }
};
template <class Body, class Fields>
struct response_access<std::tuple<error_code, boost::beast::http::response<Body, Fields>>> {
  using type = boost::beast::http::response<Body, Fields>;
  static const type* get(const std::tuple<error_code, type>& t) noexcept {
    return std::get<0>(t) ? nullptr : &std::get<1>(t);
  }
};

template <class T>
constexpr bool carries_response = !std::is_void_v<typename response_access<T>::type>;

// The response of an outcome, or null (an exception, an error).
template <class T>
  requires carries_response<T>
const typename response_access<T>::type* response_of(const outcome<T>& o) noexcept {
  return o.has_value() ? response_access<T>::get(o.value()) : nullptr;
}

}  // namespace detail
}  // namespace resilience::http

namespace resilience::detail {
// An event about a response (a retried 503) carries its status.
template <class T>
  requires http::detail::carries_response<T>
struct event_status<T> {
  static unsigned of(const outcome<T>& o) noexcept {
    const auto* r = http::detail::response_of(o);
    return r ? r->result_int() : 0;
  }
};
}  // namespace resilience::detail

namespace resilience::http {

class classifier {
 public:
  // 408 Request Timeout, 429 Too Many Requests, 500, 502, 503, 504.
  classifier() : classifier({408, 429, 500, 502, 503, 504}) {}

  // Exactly these statuses are transient. Each must be 400 to 599 (a success
  // or a redirect is never retried); the list may be empty (only network
  // errors are retried then). std::invalid_argument otherwise.
  explicit classifier(std::initializer_list<unsigned> retryable_statuses)
      : classifier(std::span<const unsigned>(retryable_statuses.begin(), retryable_statuses.size())) {}
  // The same from a list known at run time (a configuration document's).
  explicit classifier(std::span<const unsigned> retryable_statuses) {
    for (const unsigned s : retryable_statuses) {
      if (s < 400 || s > 599)
        throw std::invalid_argument("http::classifier: a retryable status must be 400 to 599, not " +
                                    std::to_string(s));
      statuses_.set(s - 400);
    }
  }

  bool retryable_status(unsigned status) const noexcept {
    return status >= 400 && status <= 599 && statuses_.test(status - 400);
  }
  // The retryable statuses, ascending: what classifier(std::span) takes back.
  std::vector<unsigned> retryable_statuses() const {
    std::vector<unsigned> out;
    for (unsigned s = 400; s <= 599; ++s)
      if (statuses_.test(s - 400)) out.push_back(s);
    return out;
  }

  // The outcome alone: transient status or transient network error.
  template <class T>
  bool operator()(const outcome<T>& o) const noexcept {
    if constexpr (detail::carries_response<T>) {
      if (const auto* r = detail::response_of(o)) return retryable_status(r->result_int());
    }
    if (o.has_exception() && !o.error()) return false;  // an exception without a code
    return classify_error(o.error()) == error_kind::transient;
  }

  // With idempotency (see the top of this header).
  template <class T>
  bool operator()(const outcome<T>& o, const context& ctx) const noexcept {
    if (!(*this)(o)) return false;
    if (ctx.props == nullptr) return true;  // nothing said about the request: the outcome alone
    if (ctx.value_or(idempotent, false)) return true;
    bool answered = false;
    if constexpr (detail::carries_response<T>) answered = detail::response_of(o) != nullptr;
    return !answered && !ctx.value_or(request_may_have_been_sent, false);
  }

 private:
  std::bitset<200> statuses_;  // bit s - 400
};

// For a circuit breaker: errors (not cancellations) and 5xx responses.
struct breaker_classifier {
  template <class T>
  bool operator()(const outcome<T>& o) const noexcept {
    if constexpr (detail::carries_response<T>) {
      if (const auto* r = detail::response_of(o)) return r->result_int() >= 500 && r->result_int() <= 599;
    }
    return o.failed() && !o.cancelled();
  }
};

}  // namespace resilience::http
