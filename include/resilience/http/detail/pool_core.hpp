// The state of a connection pool, by key, not templated on the clock
// (lib/http/connection_pool.cpp), and the callers waiting in it. Not public API;
// included by resilience/http/connection_pool.hpp after `connection`.
#pragma once

#include <resilience/clock.hpp>

#include <boost/asio/execution_context.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace resilience {
struct context;
}

namespace resilience::http {

class pooled_connection;

namespace detail {

class pool_core;

// A caller waiting for a connection: shared between its frame and the
// pool's queue; woken by the pool once the grant is made.
struct pool_waiter {
  enum class status : std::uint8_t { queued, granted, left };
  status state = status::queued;
  const boost::asio::execution_context* context = nullptr;  // the waiting call's
  std::unique_ptr<pooled_connection> granted_connection;  // null: a place to open one in
  virtual ~pool_waiter() = default;
  virtual void wake() noexcept = 0;
};

// The pool's state, by key; not templated on the clock (lib/http/connection_pool.cpp).
class pool_core {
 public:
  struct host;
  enum class grant : std::uint8_t { reused, open_new, busy, queued };
  struct acquired {
    grant how;
    host* where;
    std::unique_ptr<pooled_connection> conn;
  };

  explicit pool_core(connection_pool_options o);
  ~pool_core();
  pool_core(const pool_core&) = delete;
  pool_core& operator=(const pool_core&) = delete;

  // An idle connection of `key` on the caller's context `on` (the most
  // recently used; null: any context), else room to open one (an idle
  // connection of another context closed for it if need be), else busy;
  // with `waiter`, busy queues it instead. `idle_only`: an idle connection
  // or busy. Closes expired idle connections of that key on the way.
  acquired acquire(const std::string& key, time_point now, const std::shared_ptr<pool_waiter>& waiter,
                   const boost::asio::execution_context* on, bool idle_only = false);
  // Takes a waiter out of the queue; false when it was granted meanwhile
  // (or withdrawn by its context's shutdown, after which `h` may be gone:
  // it is read only while `w` is queued there).
  bool withdraw(host* h, pool_waiter& w) noexcept;
  // At the shutdown of `ctx`: its waiters leave every queue, so that no
  // grant posts to a context that is destroying its handlers.
  void withdraw_waiters_on(const boost::asio::execution_context& ctx) noexcept;
  // Gives a place back: `conn` kept idle (since `now`) when `keep`, closed
  // otherwise (with `why`); to the first waiter if there is one.
  void release(host& h, std::unique_ptr<pooled_connection> conn, bool keep, close_reason why, time_point now) noexcept;
  void report_opened(const host& h) const noexcept;
  void report_closed(const host& h, close_reason why) const noexcept;

  std::size_t close_expired(time_point now) noexcept;
  std::size_t close_idle() noexcept;
  // Connections are being opened, or a caller waits, on `ctx`: its shutdown
  // will close those left idle here and withdraw its waiters
  // (lib/http/client.cpp keeps the links).
  void watch(boost::asio::execution_context& ctx);
  // Closes the idle connections whose socket belongs to `ctx`.
  std::size_t close_idle_on(const boost::asio::execution_context& ctx) noexcept;
  std::uint32_t open_connections(const std::string& key) const;
  std::uint32_t idle_connections(const std::string& key) const;
  std::size_t hosts() const;
  const connection_pool_options& options() const noexcept { return options_; }

 private:
  void close_all(host& h, std::vector<std::unique_ptr<pooled_connection>>& out, time_point now, bool all) noexcept;
  template <class Which>
  std::size_t sweep(Which which, close_reason why) noexcept;

  connection_pool_options options_;
  mutable std::mutex mutex_;
  // A host stays put while a place of it is taken or a caller waits for
  // one (leases and waiters point at it); sweeps forget the others.
  std::unordered_map<std::string, std::unique_ptr<host>> hosts_;
  // The contexts this pool has connections on (their shutdown hooks); under
  // the links' own lock, not mutex_.
  std::vector<void*> watched_;
  friend class pool_context_service;
};

// A caller's wait for a place in the pool, for http::client's pool_wait
// event: filled in only by a caller that found every connection in use, so
// one served at once reads the clock no more than before.
struct pool_wait_note {
  const context* report_to = nullptr;  // told of a wait that ended with a grant
  bool waited = false;
  bool granted = false;
  duration waited_for{};
};

}  // namespace detail
}  // namespace resilience::http
