// resilience/http/client.hpp — an HTTP/1.1 client (Beast) with the library's
// strategies around every request.
//
//   namespace http = boost::beast::http;
//   resilience::http::client client;  // client_options::standard()
//   http::request<http::empty_body> req{http::verb::get, "/v1/items", 11};
//   auto res = co_await client.request(resilience::http::endpoint::https("api.example.com"), std::move(req));
//   if (!res) log(res.error().message());        // the last failure, or timeout, circuit_open...
//   else if (res->result() == http::status::ok) use(res->body());
//   // a body of your choosing:  client.request<http::dynamic_body>(to, req)
//   // no copy of a request you keep:  client.request(to, std::ref(req))
//
// Its options (every default), request_options and the events its hooks
// receive are in http/client_options.hpp.
//
// Each request runs through, outermost first (the strategies of the library,
// fused into one coroutine per call and one per attempt):
//   total deadline   total_timeout() for the whole call, attempts and waits
//                    included, tightened by request_options::deadline();
//   retry            http::classifier with idempotency: a request that may have
//                    been sent is repeated only if idempotent (is_idempotent(),
//                    or request_options::idempotent()); Retry-After on a 429 or
//                    503 is honoured with the backoff's jitter on top (never
//                    sooner than asked); one past max_retry_after() or the
//                    deadline ends the call with that response; else the
//                    backoff. With max_host_hold() (off by default) it holds
//                    the host back for the client's other calls too;
//   throttle         adaptive_throttle(), none by default: one per endpoint
//                    key; refuses a share of attempts to a host that keeps
//                    turning them away (error::throttled, not retried);
//   circuit breaker  one per endpoint key ("host:port[:tls]"), judging with
//                    http::breaker_classifier (errors and 5xx; not 4xx); an
//                    open one rejects without connecting (error::circuit_open,
//                    not retried);
//   attempt timeout  each attempt: a connection (reused, waited for, or
//                    opened), the request written, the response read.
// The result is boost::system::result<response>: a final response of any
// status (interim 1xx ones are read past; a 503 that retries did not cure is
// returned as is), or the error that ended the call — the last attempt's
// own, or error::timeout, deadline_exceeded, circuit_open, bulkhead_full (no
// connection and wait_for_connection(false)), pool_exhausted (the attempt's
// time ran out waiting for a pooled connection; an event pool_wait tells each
// such wait), rate_limited (a host's hold, above), throttled. Cancelling the caller ends it with operation_aborted. A TLS
// failure (an untrusted certificate) is never retried.
//
// A call goes to an endpoint, or to an upstream's replicas (upstream.hpp):
// each attempt to one replica, a retry to one not tried yet, each replica
// with its own breaker, throttle, hold and connections.
//
// Before each attempt writes its first byte it marks
// http::request_may_have_been_sent; each attempt sends the time left to the
// server in deadline_header(), when one is set, less deadline_margin().
// Connections are kept alive and reused per endpoint (connection_pool.hpp):
// one whose exchange failed, timed out or was cancelled is closed. A
// request that may be sent twice takes an idle connection unchecked (a
// syscall saved); if the server had closed it, the request goes once more
// within the same attempt, on a connection checked or new. The request is
// taken by value, or by std::ref: then the call sets Host, Content-Length
// and the deadline header on the caller's request, which must outlive the
// call and not be used elsewhere meanwhile.
//
// The client must outlive its calls and cannot be copied; request() on a
// temporary does not compile. It is thread-safe; a call runs on its caller's
// executor (a strand on a multi-threaded io_context). The client and the
// io_context may be destroyed in either order: a context's idle connections
// leave the pool with it.
#pragma once

#include <resilience/backoff.hpp>
#include <resilience/breaker_options.hpp>
#include <resilience/breaker_registry.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/detail/spawn_result.hpp>
#include <resilience/error.hpp>
#include <resilience/http/classifier.hpp>
#include <resilience/http/connection_pool.hpp>
#include <resilience/http/client_options.hpp>
#include <resilience/http/deadline_header.hpp>
#include <resilience/http/detail/host_holds.hpp>
#include <resilience/http/detail/call_route.hpp>
#include <resilience/http/detail/client_retry_hook.hpp>
#include <resilience/http/detail/host_budget.hpp>
#include <resilience/http/detail/upstream_core.hpp>
#include <resilience/http/detail/host_tagged_events.hpp>
#include <resilience/http/detail/message_support.hpp>
#include <resilience/http/detail/per_host.hpp>
#include <resilience/http/retry_after_delay.hpp>
#include <resilience/http/upstream.hpp>
#include <resilience/properties.hpp>
#include <resilience/retry.hpp>
#include <resilience/timeout.hpp>
#include <resilience/testing/manual_clock.hpp>
#include <resilience/detail/with_option.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/system/result.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace resilience::http {

namespace detail {
template <class T>
inline constexpr bool dependent_false = false;
}  // namespace detail

template <resilience::clock Clock = steady_clock>
class basic_client {
 public:
  using clock_type = Clock;
  template <class ResBody>
  using response = boost::beast::http::response<ResBody>;
  template <class ResBody>
  using result = boost::system::result<response<ResBody>>;

  // Contradictory options (an attempt timeout longer than the total, a
  // deadline margin that leaves an attempt no time) throw
  // std::invalid_argument here.
  explicit basic_client(client_options options = client_options::standard(), Clock clock = {})
      : options_(checked(std::move(options))),
        clock_(clock),
        pool_(options_.pool(), clock),
        breakers_(options_.breaker(), options_.breaker_limits(), clock),
        retry_(detail::with_budget(options_, retry_policy{}
                               .max_attempts(options_.max_retries() + 1)
                               .backoff(options_.backoff()).fit_to_time_left(options_.fit_to_time_left())
                               .retry_if(options_.retry_classifier())
                               .on_retry(detail::client_retry_hook{&options_.on_retry(), &options_.retry_after()})
                               .clock(clock)
                               .delay_generator(options_.retry_after()))) {
    if (options_.adaptive_throttle()) throttles_.emplace(options_.adaptive_throttle()->window());
    if (options_.budget_per_host().index() != 0) budgets_.emplace(options_.breaker_limits().idle_after());
  }

  basic_client(const basic_client&) = delete;
  basic_client& operator=(const basic_client&) = delete;

  // Sends `req` to `to` (see the top of this header). The Host header is set
  // from `to` when the request has none, and Content-Length from the body.
  // An endpoint with an empty host or port 0, or a CONNECT request, throws
  // std::invalid_argument here, before anything starts.
  template <class ResBody = boost::beast::http::string_body, class ReqBody, class Fields>
  boost::asio::awaitable<result<ResBody>> request(destination to, boost::beast::http::request<ReqBody, Fields> req,
                                                  request_options options = {}) & {
    checked(to, req);
    return call_to<ResBody>(std::move(to), std::move(req), context{}, options);
  }
  // The same, inside a caller's call: `parent` (a server handler's context,
  // an outer stage's) is the call's context, as a stage's is: its deadline
  // bounds the call, its event sink receives the call's events when the
  // client has none of its own, an http::idempotent in its properties
  // stands unless request_options::idempotent() says otherwise, and as the
  // call ends request_may_have_been_sent is set in its properties if the
  // request may have reached the server (never cleared). A call its
  // deadline cuts ends with error::deadline_exceeded, also when the
  // caller's own bound cancels it as the deadline passes; a cancellation
  // before the deadline stays operation_aborted.
  // (`Context` is resilience::context: a template, so that `request(to, req,
  // {})` still means request_options.)
  template <class ResBody = boost::beast::http::string_body, class ReqBody, class Fields,
            std::same_as<context> Context>
  boost::asio::awaitable<result<ResBody>> request(destination to, boost::beast::http::request<ReqBody, Fields> req,
                                                  const Context& parent, request_options options = {}) & {
    checked(to, req);
    return call_to<ResBody>(std::move(to), std::move(req), parent, options);
  }
  template <class ResBody = boost::beast::http::string_body, class ReqBody, class Fields,
            std::same_as<context> Context>
  boost::asio::awaitable<result<ResBody>> request(
      destination to, std::reference_wrapper<boost::beast::http::request<ReqBody, Fields>> req, const Context& parent,
      request_options options = {}) & {
    checked(to, req.get());
    return call_to<ResBody>(std::move(to), req, parent, options);
  }
  // Sends the caller's own request, without a copy: std::ref(req). The call
  // sets Host, Content-Length and the deadline header on it, so it must
  // outlive the call and not be used elsewhere meanwhile.
  template <class ResBody = boost::beast::http::string_body, class ReqBody, class Fields>
  boost::asio::awaitable<result<ResBody>> request(
      destination to, std::reference_wrapper<boost::beast::http::request<ReqBody, Fields>> req,
      request_options options = {}) & {
    checked(to, req.get());
    return call_to<ResBody>(std::move(to), req, context{}, options);
  }
  template <class ResBody = boost::beast::http::string_body, class ReqBody, class Fields>
  boost::asio::awaitable<result<ResBody>> request(
      destination, std::reference_wrapper<const boost::beast::http::request<ReqBody, Fields>>,
      request_options = {}) & {
    static_assert(detail::dependent_false<ResBody>,
                  "the call sets Host, Content-Length and the deadline header on a request it refers to: "
                  "pass std::ref(request), or the request itself (a copy)");
  }
  template <class ResBody = boost::beast::http::string_body, class ReqBody, class Fields>
  boost::asio::awaitable<result<ResBody>> request(destination, boost::beast::http::request<ReqBody, Fields>,
                                                  request_options = {}) && {
    static_assert(detail::dependent_false<ResBody>,
                  "a client must outlive its calls: call request() on a named client, not a temporary");
  }

  // request() as an Asio initiating function, for code that is not a
  // coroutine: the call runs on `ex` and completes with
  // void(error_code, response<ResBody>) through any completion token (a
  // callback, asio::use_future, asio::deferred, asio::use_awaitable).
  // Cancelling it through the token's cancellation slot is cancelling the
  // caller: the call ends with operation_aborted. An exception that escapes
  // a call (only resource exhaustion can) is thrown from the completion, out
  // of the io_context's run(), as asio::detached does.
  //   client.async_request(io.get_executor(), to, req, [](error_code ec, http::response<http::string_body> res) {...});
  //   auto res = client.async_request(io.get_executor(), to, req, ctx, asio::use_future).get();
  template <class ResBody = boost::beast::http::string_body, class ReqBody, class Fields,
            boost::asio::completion_token_for<void(error_code, response<ResBody>)> Token>
  auto async_request(const boost::asio::any_io_executor& ex, destination to,
                     boost::beast::http::request<ReqBody, Fields> req, Token&& token) & {
    return async_request<ResBody>(ex, std::move(to), std::move(req), context{}, std::forward<Token>(token));
  }
  template <class ResBody = boost::beast::http::string_body, class ReqBody, class Fields, std::same_as<context> Context,
            boost::asio::completion_token_for<void(error_code, response<ResBody>)> Token>
  auto async_request(const boost::asio::any_io_executor& ex, destination to,
                     boost::beast::http::request<ReqBody, Fields> req, const Context& parent, Token&& token) & {
    checked(to, req);
    return resilience::detail::spawn_result(
        ex, call_to<ResBody>(std::move(to), std::move(req), parent, request_options{}), std::forward<Token>(token));
  }
  template <class ResBody = boost::beast::http::string_body, class... Args>
  void async_request(const boost::asio::any_io_executor&, destination, Args&&...) && {
    static_assert(detail::dependent_false<ResBody>,
                  "a client must outlive its calls: call async_request() on a named client, not a temporary");
  }

  basic_connection_pool<Clock>& pool() noexcept { return pool_; }
  basic_breaker_registry<std::string, Clock>& breakers() noexcept { return breakers_; }
  const client_options& options() const noexcept { return options_; }
  const Clock& clock() const noexcept { return clock_; }

 private:
  using retry_type = basic_retry_policy<http::classifier, detail::client_retry_hook, Clock, retry_after_delay>;
  using breaker_type = typename basic_breaker_registry<std::string, Clock>::breaker_type;
  using lease_result = typename basic_connection_pool<Clock>::lease_result;

  // A host's own retry budget (budget_per_host()) and the client's retry
  // policy consulting it (http/detail/host_budget.hpp).
  using host_budget = detail::host_budget<retry_type, Clock>;
  std::shared_ptr<host_budget> budget_for(const std::string& key, time_point now);

  // Contradictory options throw std::invalid_argument.
  static client_options checked(client_options o);

  // An endpoint built field by field skips its factory's checks; a CONNECT
  // would leave a tunnel, not a response, on a pooled connection.
  template <class Request>
  static void checked(const destination& to, const Request& req);

  // What a call's attempts share (http/detail/call_route.hpp).
  using tally = detail::call_tally;
  using upstream_route = detail::upstream_route<breaker_type>;
  template <class Request>
  using call_target = detail::call_target<Request, breaker_type>;

  // `held` is the request, or a reference_wrapper to the caller's.
  // Defined out of the class (impl/client.hpp), not inline: so that the
  // common calls declared extern below are not instantiated in a program's
  // translation units. So are the two coroutines below.
  template <class ResBody, class Held>
  boost::asio::awaitable<result<ResBody>> call(endpoint to, Held held, context parent, request_options options,
                                               upstream_route* route);
  template <class ResBody, class Held>
  boost::asio::awaitable<result<ResBody>> call_to(destination&& to, Held&& held, const context& parent,
                                                  request_options options);
  // An upstream's call and its attempts' routes (impl/client_upstream.hpp).
  template <class ResBody, class Held>
  boost::asio::awaitable<result<ResBody>> call_replicas(std::shared_ptr<detail::upstream_core> core, Held held,
                                                        context parent, request_options options);
  template <class Request>
  error_code route_attempt(call_target<Request>& target, const context& ctx,
                           const boost::asio::any_io_executor& executor, bool untried_only);
  void report_upstream(detail::upstream_news& news, const std::shared_ptr<detail::upstream_core>& core,
                       const context& ctx, const boost::asio::any_io_executor& executor);
  template <class T>
  void report_replica(upstream_route& route, const outcome<T>& out, time_point start, const context& ctx,
                      const boost::asio::any_io_executor& executor);

  // One attempt: the host's hold, the breaker's permit, a connection, then
  // the exchange on it, in a frame of its own (one frame of both would pass
  // the 1,020 bytes Asio's frame cache recycles).
  template <class ResBody, class Request>
  boost::asio::awaitable<result<ResBody>> attempt(call_target<Request>& target, const context& ctx);

  // How an attempt ended, told to its host's breaker and throttle.
  template <class T>
  void judge(breaker_permit& permit, resilience::detail::adaptive_throttle_core* throttle, const outcome<T>& out,
             const context& ctx);

  // No idle connection: a wait for one, or a new one, into `lease`, under a
  // bound of its own; a frame of its own, off the reusing attempts' path.
  // The bound passing while it still waits for a place in the pool (not
  // while a connection is opened) is error::pool_exhausted.
  boost::asio::awaitable<error_code> acquire_into(std::optional<connection_lease>& lease, const endpoint& to,
                                                  const context& ctx, duration limit);

  // A refusal completes through the executor, never inline (a loop of
  // refused calls yields); `throws`: the caller's throw_if_cancelled.
  static boost::asio::awaitable<error_code> refuse(error_code why, bool throws);
  boost::asio::awaitable<error_code> wait_out_holds(const std::string& key, const context& ctx, tally& counts);

  // Before an attempt to a held host: the wait (the rest of the hold, and a
  // spread on top when Retry-After is jittered), or error::rate_limited at
  // once when it cannot be waited (impl/client_holds.hpp).
  boost::asio::awaitable<error_code> wait_for_host(const std::string& key, detail::host_hold hold, time_point limit,
                                                   const context& ctx, tally& counts);

  // A 429 or 503 response with a Retry-After holds its host (max_host_hold()).
  template <class T>
  void note_hold(const std::string& key, const outcome<T>& o);

  struct bounded_by {  // when an attempt ends, and the error it then ends with
    time_point at;
    error_code reason;
  };

  // The request written and the response read on one connection, before
  // bound.at, the outcome left in `out`; the bound passing closes the
  // socket under them. True when the connection, taken without the peek
  // (`unchecked`), proved closed by the server before it answered: the
  // request may go once more.
  template <class ResBody, class Request>
  boost::asio::awaitable<bool> exchange(connection_lease& lease, Request& req, const context& ctx,
                                        const bounded_by& limit, time_point now, bool unchecked,
                                        const boost::asio::any_io_executor& executor,
                                        std::optional<outcome<result<ResBody>>>& out);

  client_options options_;
  Clock clock_;
  basic_connection_pool<Clock> pool_;
  basic_breaker_registry<std::string, Clock> breakers_;
  retry_type retry_;
  detail::host_holds holds_;
  std::optional<detail::per_host<resilience::detail::adaptive_throttle_core>> throttles_;  // with adaptive_throttle() only
  std::optional<detail::per_host<host_budget>> budgets_;                          // with budget_per_host() only
};

using client = basic_client<>;

// The calls most programs make (a string_body response to an empty_body or
// string_body request, sent as a copy or by std::ref, on the steady clock)
// are compiled once, in the library (lib/http/client.cpp): a program's
// translation units do not instantiate the client's coroutines for them
// (call() is defined out of the class for this: an inline function would be
// instantiated all the same). On another clock (a manual_clock in tests)
// each translation unit instantiates the calls it makes, unless the program
// compiles them once itself, as the library's tests do for the manual clock
// (tests/http_client_support.hpp):
//   RESILIENCE_HTTP_CLIENT_COMMON_CALLS_ON(RESILIENCE_HTTP_CLIENT_CALL, testing::manual_clock)
// in one file, in namespace resilience::http, and `extern` before each in
// the others.
#define RESILIENCE_HTTP_CLIENT_COMMON_CALLS_ON(X, Clock)                                          \
  X(Clock, boost::beast::http::request<boost::beast::http::empty_body>)                          \
  X(Clock, boost::beast::http::request<boost::beast::http::string_body>)                         \
  X(Clock, std::reference_wrapper<boost::beast::http::request<boost::beast::http::empty_body>>)  \
  X(Clock, std::reference_wrapper<boost::beast::http::request<boost::beast::http::string_body>>)
#define RESILIENCE_HTTP_CLIENT_COMMON_CALLS(X) RESILIENCE_HTTP_CLIENT_COMMON_CALLS_ON(X, steady_clock)
#define RESILIENCE_HTTP_CLIENT_CALL(Clock, Held)                                                  \
  template boost::asio::awaitable<basic_client<Clock>::result<boost::beast::http::string_body>>  \
  basic_client<Clock>::call<boost::beast::http::string_body, Held>(endpoint, Held, context, request_options,   \
                                                                   upstream_route*);
#define RESILIENCE_HTTP_CLIENT_EXTERN_CALL(Clock, Held) extern RESILIENCE_HTTP_CLIENT_CALL(Clock, Held)
RESILIENCE_HTTP_CLIENT_COMMON_CALLS(RESILIENCE_HTTP_CLIENT_EXTERN_CALL)
#undef RESILIENCE_HTTP_CLIENT_EXTERN_CALL

}  // namespace resilience::http

#include <resilience/http/impl/client.hpp>
