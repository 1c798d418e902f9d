// resilience/http/connection_pool.hpp — kept-alive HTTP connections, per host.
//
//   using namespace std::chrono_literals;
//   resilience::http::connection_pool pool{resilience::http::connection_pool_options{}
//                                              .max_connections_per_host(4)   // a 5th caller waits
//                                              .idle_timeout(30s)};
//   auto lease = co_await pool.acquire(resilience::http::endpoint::https("api.example.com"), deadline);
//   if (!lease) co_return lease.error();
//   ...exchange one request and response on lease->stream()...
//   lease->keep_alive(clock.now());  // only after a complete exchange the server kept open
//   // the lease's end gives the connection back, or closes it
//
// One pool per endpoint key "host:port", "host:port:tls". A connection is
// reused only when the lease that held it says keep_alive(): after a complete
// exchange whose response did not say `Connection: close`. Every other end of
// a lease — an error, a timeout or a cancellation (Beast's reads and writes
// support only terminal cancellation: the stream is unusable after one), an
// exception, a coroutine frame destroyed unresumed — closes the connection.
// A reused connection is first checked for a peer that has closed it meanwhile
// (a non-blocking peek); one found closed is replaced. (http::client skips
// the check, a syscall, for a request it may send twice: it sends such a
// request once more when the exchange on a reused connection ends before a
// byte of the answer.)
//
// Limits. At most max_connections_per_host() connections per key, idle or in
// use. A caller finding them all in use waits, first come first served, until
// one comes back or its deadline passes (error::deadline_exceeded), or is
// cancelled (operation_aborted); with wait_for_connection(false) it ends at
// once with error::bulkhead_full. A connection handed back goes straight to
// the first waiter; a closed one leaves its place to it.
//
// Idle connections are closed once idle_timeout() has passed: when their key
// is next used, by a sweep over every host that calls make at most twice per
// idle_timeout(), or by close_expired(); sweeps also forget hosts left with
// no connection. Name resolution is bounded by resolve_timeout()
// (error::timeout); an IP literal is not resolved.
//
// Lifetimes. The pool must outlive every call made through it (it cannot be
// copied, and acquire() on a temporary does not compile). A connection
// belongs to the execution context of the call that opened it, and only
// calls on that context reuse it: a pool (or client) shared by several
// io_contexts keeps connections of each, within one max_connections_per_host()
// (at the limit, an idle connection of another context is closed to make
// room, close_reason::other_context, and one handed back to a waiter of
// another context is closed and its place passed on). When a context shuts
// down (an io_context destroyed before the pool), its idle connections in
// the pool are closed then (close_reason::pool_closed), so the pool may be
// declared before or after it.
// Thread-safe; a connection is used by one call at a time.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/error.hpp>
#include <resilience/http/detail/default_concurrency.hpp>
#include <resilience/http/endpoint.hpp>
#include <resilience/timeout.hpp>
#include <resilience/detail/with_option.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/system/result.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace resilience::http {

// Why a connection was closed, as on_closed reports it.
enum class close_reason : std::uint8_t {
  failed,        // an error, timeout, cancellation or exception during its exchange (or before it)
  not_reusable,  // the response (or request) said Connection: close, or bytes followed the response
  peer_closed,   // found closed by the server when about to be reused
  idle_timeout,  // idle for idle_timeout()
  pool_closed,   // close_idle(), or the pool's destruction
  other_context, // idle, closed to make room for a call on another execution context
};

class connection_pool_options {
 public:
  static constexpr std::uint32_t max_limit = 0xffff;

  // Connections per endpoint key, idle or in use: 1 to 65535; 100 by default (detail/default_concurrency.hpp).
  connection_pool_options max_connections_per_host(std::uint32_t n) const {
    if (n < 1 || n > max_limit)
      throw std::invalid_argument("connection_pool_options::max_connections_per_host: must be in [1, 65535]");
    return resilience::detail::with_option(*this, &connection_pool_options::max_connections_, n);
  }
  // How long a connection may sit idle before it is closed: positive; 60 s by
  // default (servers commonly drop idle connections after a minute or more,
  // and reusing one the server is closing fails the request).
  connection_pool_options idle_timeout(duration d) const {
    if (d <= duration::zero()) throw std::invalid_argument("connection_pool_options::idle_timeout: must be positive");
    return resilience::detail::with_option(*this, &connection_pool_options::idle_timeout_, d);
  }
  // The bound on name resolution: positive; 5 s by default.
  connection_pool_options resolve_timeout(duration d) const {
    if (d <= duration::zero())
      throw std::invalid_argument("connection_pool_options::resolve_timeout: must be positive");
    return resilience::detail::with_option(*this, &connection_pool_options::resolve_timeout_, d);
  }
  // Whether a caller finding every connection in use waits (the default) or
  // ends at once with error::bulkhead_full.
  connection_pool_options wait_for_connection(bool wait) const {
    return resilience::detail::with_option(*this, &connection_pool_options::wait_, wait);
  }
  // The TLS settings for https endpoints. Null (the default): the system's
  // trusted certificates. Peers are verified, with their host name, unless
  // verify_peer(false).
  connection_pool_options tls_context(std::shared_ptr<boost::asio::ssl::context> ctx) const {
    return resilience::detail::with_option(*this, &connection_pool_options::tls_, std::move(ctx));
  }
  connection_pool_options verify_peer(bool verify) const {
    return resilience::detail::with_option(*this, &connection_pool_options::verify_, verify);
  }
  // Events, on the thread of the call that caused them, outside the pool's
  // lock. They must not throw.
  connection_pool_options on_opened(std::function<void(std::string_view key)> f) const {
    return resilience::detail::with_option(*this, &connection_pool_options::on_opened_, std::move(f));
  }
  connection_pool_options on_closed(std::function<void(std::string_view key, close_reason)> f) const {
    return resilience::detail::with_option(*this, &connection_pool_options::on_closed_, std::move(f));
  }

  std::uint32_t max_connections_per_host() const noexcept { return max_connections_; }
  duration idle_timeout() const noexcept { return idle_timeout_; }
  duration resolve_timeout() const noexcept { return resolve_timeout_; }
  bool wait_for_connection() const noexcept { return wait_; }
  const std::shared_ptr<boost::asio::ssl::context>& tls_context() const noexcept { return tls_; }
  bool verify_peer() const noexcept { return verify_; }
  const std::function<void(std::string_view)>& on_opened() const noexcept { return on_opened_; }
  const std::function<void(std::string_view, close_reason)>& on_closed() const noexcept { return on_closed_; }

 private:
  std::uint32_t max_connections_ = detail::default_concurrency;
  duration idle_timeout_ = std::chrono::seconds(60);
  duration resolve_timeout_ = std::chrono::seconds(5);
  bool wait_ = true;
  bool verify_ = true;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::function<void(std::string_view)> on_opened_;
  std::function<void(std::string_view, close_reason)> on_closed_;
};

template <resilience::clock Clock>
class basic_connection_pool;
template <resilience::clock Clock>
class basic_client;
namespace detail {
class pool_core;
}

// One open connection: a TCP stream, or TLS over one, and its read buffer
// (bytes of a next response may already sit in it).
class pooled_connection {
 public:
  using tcp_stream = boost::beast::tcp_stream;
  using tls_stream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

  explicit pooled_connection(tcp_stream s) : context_(&context_of(s)), stream_(std::in_place_type<tcp_stream>, std::move(s)) {}
  explicit pooled_connection(tls_stream s) : context_(&context_of(s)), stream_(std::in_place_type<tls_stream>, std::move(s)) {}
  pooled_connection(const pooled_connection&) = delete;
  pooled_connection& operator=(const pooled_connection&) = delete;

  // f(stream), with the stream as its own type (one instantiation each).
  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit(std::forward<F>(f), stream_);
  }
  boost::beast::flat_buffer& buffer() noexcept { return buffer_; }
  boost::asio::ip::tcp::socket& socket() noexcept;
  bool is_tls() const noexcept { return stream_.index() == 1; }
  // Requests this connection carried before the current one.
  std::uint32_t reuses() const noexcept { return reuses_; }

  // Whether the peer has closed it (or sent bytes nobody asked for): a
  // non-blocking peek at an idle socket.
  bool peer_closed() noexcept;

  // Closes the socket under the exchange on it: the operation under way ends
  // with operation_aborted, any started later fails at once. For an exchange
  // whose time is up; the connection is never used again.
  void abort() noexcept;

  // The execution context its socket belongs to: only calls on that context
  // can use it (its reactor completes the socket's operations).
  const boost::asio::execution_context& context() const noexcept { return *context_; }

 private:
  template <class Stream>
  static boost::asio::execution_context& context_of(Stream& s) noexcept {
    return boost::asio::query(s.get_executor(), boost::asio::execution::context);
  }

  const boost::asio::execution_context* context_;
  std::variant<tcp_stream, tls_stream> stream_;
  boost::beast::flat_buffer buffer_;
  time_point idle_since_{};
  std::uint32_t reuses_ = 0;
  template <resilience::clock>
  friend class basic_connection_pool;
  friend class detail::pool_core;
};

}  // namespace resilience::http

#include <resilience/http/detail/pool_core.hpp>  // detail::pool_core: the pool's state, which a lease refers to

namespace resilience::http {

// A connection on loan from a pool, or the place to open one. Its end gives
// the place back: the connection kept idle if keep_alive() was said, closed
// otherwise.
class connection_lease {
 public:
  connection_lease(detail::pool_core& core, detail::pool_core::host& h, std::unique_ptr<pooled_connection> c) noexcept
      : core_(&core), host_(&h), conn_(std::move(c)) {}
  connection_lease(connection_lease&& o) noexcept
      : core_(std::exchange(o.core_, nullptr)), host_(o.host_), conn_(std::move(o.conn_)), keep_(o.keep_), now_(o.now_) {}
  connection_lease& operator=(connection_lease&&) = delete;
  ~connection_lease() {
    if (core_) core_->release(*host_, std::move(conn_), keep_, close_reason::failed, now_);
  }

  pooled_connection& conn() noexcept { return *conn_; }
  pooled_connection* operator->() noexcept { return conn_.get(); }

  // The exchange is complete and the connection may carry another: it goes
  // back to the pool, idle from `now`.
  void keep_alive(time_point now) noexcept {
    keep_ = true;
    now_ = now;
  }
  // The exchange is complete but the connection must not be reused.
  void close(close_reason why) noexcept {
    if (core_) core_->release(*host_, std::move(conn_), false, why, now_);
    core_ = nullptr;
  }

 private:
  template <resilience::clock>
  friend class basic_connection_pool;
  void adopt(std::unique_ptr<pooled_connection> c) noexcept { conn_ = std::move(c); }

  detail::pool_core* core_;
  detail::pool_core::host* host_;
  std::unique_ptr<pooled_connection> conn_;
  bool keep_ = false;
  time_point now_{};
};

// The system's trusted certificates, peers verified.
namespace detail { std::shared_ptr<boost::asio::ssl::context> default_tls_context(); }

template <resilience::clock Clock = steady_clock>
class basic_connection_pool {
 public:
  using clock_type = Clock;
  using lease_result = boost::system::result<connection_lease>;

  explicit basic_connection_pool(connection_pool_options options = {}, Clock clock = {})
      : clock_(std::move(clock)),
        tls_(options.tls_context() ? options.tls_context() : detail::default_tls_context()),
        core_(std::move(options)) {}
  basic_connection_pool(const basic_connection_pool&) = delete;
  basic_connection_pool& operator=(const basic_connection_pool&) = delete;

  // A connection to `to`, reused or opened; waits for a place until
  // `deadline` when every one is in use. Opening it (resolution, connection,
  // TLS handshake) is bounded by the caller's own cancellation, and the
  // resolution also by resolve_timeout(). `to` is checked here
  // (std::invalid_argument, as endpoint::validate) and copied into the call.
  boost::asio::awaitable<lease_result> acquire(endpoint to, time_point deadline = time_point::max()) & {
    to.validate();
    return acquire_impl(std::move(to), deadline);
  }
  boost::asio::awaitable<lease_result> acquire(endpoint, time_point = time_point::max()) && = delete;

  // An idle connection to `to` that its peer has not closed, at once; none
  // if there is none. Nothing is opened or waited for. With `ex`, only one
  // of ex's execution context, the one a caller on `ex` can use; without,
  // one of any context (for a pool that serves only one).
  std::optional<connection_lease> try_reuse(const endpoint& to) { return reuse(to.key(), clock_.now(), nullptr); }
  template <class Executor>
  std::optional<connection_lease> try_reuse(const endpoint& to, const Executor& ex) {
    return reuse(to.key(), clock_.now(), &boost::asio::query(ex, boost::asio::execution::context));
  }

  std::size_t close_expired() noexcept { return core_.close_expired(clock_.now()); }
  std::size_t close_idle() noexcept { return core_.close_idle(); }
  std::uint32_t open_connections(const endpoint& to) const { return core_.open_connections(to.key()); }
  std::uint32_t idle_connections(const endpoint& to) const { return core_.idle_connections(to.key()); }
  // Hosts the pool keeps an entry for: those with a connection (idle, in
  // use or being opened) or a waiting caller, and any others since the last
  // close_expired() or close_idle().
  std::size_t hosts() const { return core_.hosts(); }
  const connection_pool_options& options() const noexcept { return core_.options(); }
  const Clock& clock() const noexcept { return clock_; }

 private:
  // Waits for a grant: a connection, or a place to open one.
  template <class Executor>
  struct waiter final : detail::pool_waiter {
    using timer_type = std::remove_cvref_t<decltype(std::declval<const Clock&>().make_timer(std::declval<Executor>()))>;
    waiter(const Clock& c, const Executor& ex) : executor(ex), timer(c.make_timer(ex)) {}
    // The grant is made under the pool's lock, from any thread: the timer is
    // cancelled on the waiter's own executor, and the shared state keeps the
    // timer alive until then.
    void wake() noexcept override {
      boost::asio::post(executor, [self = self.lock()] {
        if (self) self->timer.cancel();
      });
    }
    Executor executor;
    timer_type timer;
    std::weak_ptr<waiter> self;
  };

  // Leaves the queue, or hands back a grant never used, when the frame ends
  // without resuming (its io_context destroyed): a connection granted then
  // is closed, since nothing may outlive its io_context in the pool.
  struct queue_guard {
    detail::pool_core* core;
    detail::pool_core::host* where;
    detail::pool_waiter* w;
    ~queue_guard() {
      if (!core->withdraw(where, *w) && w->state == detail::pool_waiter::status::granted) {
        w->state = detail::pool_waiter::status::left;
        core->release(*where, std::move(w->granted_connection), false, close_reason::failed, time_point{});
      }
    }
  };

  // `now`: the caller's reading of the clock; `on`: the caller's context.
  // Without `check_peer`, no peek (a syscall): the caller knows a request
  // that finds the connection closed can be sent again on another.
  std::optional<connection_lease> reuse(const std::string& key, time_point now,
                                        const boost::asio::execution_context* on, bool check_peer = true);

  template <resilience::clock>
  friend class basic_client;

  // A lease: a connection kept, a place to open one, or a wait for either
  // until `deadline`, noted in `note` if given. Defined with open() in
  // http/impl/connection_pool.hpp.
  boost::asio::awaitable<lease_result> acquire_impl(endpoint to, time_point deadline,
                                                    detail::pool_wait_note* note = nullptr);

  boost::asio::awaitable<boost::system::result<std::unique_ptr<pooled_connection>>> open(const endpoint& to);

  // Closes connections idle past their time on every host (not only the one
  // asked for) at most twice per idle_timeout(), from the calls themselves:
  // a host never used again does not keep its sockets, and no timer runs.
  void sweep_now_and_then() noexcept { sweep_now_and_then(clock_.now()); }
  void sweep_now_and_then(time_point now) noexcept {
    auto due = next_sweep_.load(std::memory_order_relaxed);
    if (now.time_since_epoch().count() < due) return;
    const time_point next = saturating_add(now, std::max(core_.options().idle_timeout() / 2, duration(1)));
    if (next_sweep_.compare_exchange_strong(due, next.time_since_epoch().count(), std::memory_order_relaxed))
      core_.close_expired(now);
  }

  Clock clock_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  detail::pool_core core_;
  std::atomic<duration::rep> next_sweep_{0};
};

using connection_pool = basic_connection_pool<>;

}  // namespace resilience::http

#include <resilience/http/impl/connection_pool.hpp>
