// The pool's shared state (http/detail/pool_core.hpp) and a pooled
// connection's socket operations (http/connection_pool.hpp).
#include <resilience/http/connection_pool.hpp>

#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/socket_base.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>

namespace resilience::http {

boost::asio::ip::tcp::socket& pooled_connection::socket() noexcept {
  if (auto* tcp = std::get_if<tcp_stream>(&stream_)) return tcp->socket();
  return std::get<tls_stream>(stream_).next_layer().socket();
}

void pooled_connection::abort() noexcept {
  error_code ignored;
  socket().close(ignored);
}

bool pooled_connection::peer_closed() noexcept {
  namespace asio = boost::asio;
  auto& s = socket();
#if defined(MSG_DONTWAIT)
  // One syscall on every reuse. MSG_DONTWAIT makes this receive alone
  // non-blocking; switching the socket's mode instead (non_blocking(true),
  // then false) costs two ioctls, and a third when the next async operation
  // switches it back: about 8% of a keep-alive request's CPU on loopback
  // (http_load).
  char byte;
  const auto n = ::recv(s.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  // Nothing to read: still open. End of stream, an error, or bytes nobody
  // asked for make it unfit to carry a request.
  return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
#else
  error_code ec;
  // Only this call's synchronous receive is affected: async operations
  // never block whatever the flag says.
  s.non_blocking(true, ec);
  if (ec) return true;
  char byte;
  const std::size_t n = s.receive(asio::buffer(&byte, 1), asio::socket_base::message_peek, ec);
  error_code restored;
  s.non_blocking(false, restored);
  (void)n;
  // would_block: nothing to read and still open. Anything else (end of
  // stream, reset, stray bytes) makes it unfit to carry a request.
  return ec != asio::error::would_block;
#endif
}

namespace detail {

struct pool_core::host {
  std::string key;
  std::uint32_t open = 0;  // idle, in use, or being opened
  std::vector<std::unique_ptr<pooled_connection>> idle;  // oldest first
  std::deque<std::shared_ptr<pool_waiter>> waiters;
};

namespace {
// Every link between a pool and a context it has connections on. One lock
// for all: links change only when a pool first opens a connection or queues
// a caller on a context, and when a pool or a context goes.
std::mutex links_mutex;
}  // namespace

// A context's shutdown hook: withdraws the waiters every linked pool holds
// for it and closes the idle connections on it, before the context's
// scheduler shuts down (services shut down newest first). Registered when a
// pool first opens a connection or queues a caller there: usually after the
// context's reactor, so before it; a socket closed after its reactor's
// shutdown is closed all the same.
class pool_context_service final : public boost::asio::execution_context::service {
 public:
  static boost::asio::execution_context::id id;

  explicit pool_context_service(boost::asio::execution_context& ctx) : service(ctx) {}

  std::vector<pool_core*> pools;  // under links_mutex

 private:
  void shutdown() override {
    std::lock_guard lock(links_mutex);
    for (pool_core* p : pools) {
      std::erase(p->watched_, static_cast<void*>(this));
      // Before the context's scheduler shuts down (it was registered first):
      // from here on, no grant posts to it from another thread while it
      // destroys its handlers.
      p->withdraw_waiters_on(context());
      p->close_idle_on(context());
    }
    pools.clear();
  }
};

boost::asio::execution_context::id pool_context_service::id;

// The host a thread last acquired from, in which pool: most threads send
// request after request to one host, and comparing its key costs less than
// hashing it and searching the table. Any pool's forgetting a host (a
// sweep) or going bumps `hosts_forgotten`, so that no remembered pointer
// outlives its host, nor matches a new pool at a gone one's address.
namespace {
std::atomic<std::uint64_t> hosts_forgotten{0};
struct remembered_host {
  const pool_core* pool = nullptr;
  std::uint64_t forgotten = 0;
  pool_core::host* host = nullptr;
};
thread_local remembered_host last_host;
}  // namespace

pool_core::pool_core(connection_pool_options o) : options_(std::move(o)) {}

pool_core::~pool_core() {
  hosts_forgotten.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard lock(links_mutex);
    for (void* s : watched_) std::erase(static_cast<pool_context_service*>(s)->pools, this);
    watched_.clear();
  }
  close_idle();
}

void pool_core::watch(boost::asio::execution_context& ctx) {
  auto& service = boost::asio::use_service<pool_context_service>(ctx);
  std::lock_guard lock(links_mutex);
  if (std::find(watched_.begin(), watched_.end(), static_cast<void*>(&service)) != watched_.end()) return;
  watched_.push_back(&service);
  service.pools.push_back(this);
}


void pool_core::report_opened(const host& h) const noexcept {
  if (options_.on_opened()) options_.on_opened()(h.key);
}

void pool_core::report_closed(const host& h, close_reason why) const noexcept {
  if (options_.on_closed()) options_.on_closed()(h.key, why);
}

void pool_core::close_all(host& h, std::vector<std::unique_ptr<pooled_connection>>& out, time_point now, bool all) noexcept {
  auto expired = [&](const std::unique_ptr<pooled_connection>& c) {
    return all || now - c->idle_since_ >= options_.idle_timeout();
  };
  // Oldest first: the expired ones are a prefix, usually empty.
  if (h.idle.empty() || !expired(h.idle.front())) return;
  const auto end = std::find_if_not(h.idle.begin(), h.idle.end(), expired);
  h.open -= static_cast<std::uint32_t>(end - h.idle.begin());
  for (auto it = h.idle.begin(); it != end; ++it) out.push_back(std::move(*it));
  h.idle.erase(h.idle.begin(), end);
}

pool_core::acquired pool_core::acquire(const std::string& key, time_point now,
                                       const std::shared_ptr<pool_waiter>& waiter,
                                       const boost::asio::execution_context* on, bool idle_only) {
  std::vector<std::unique_ptr<pooled_connection>> expired;
  std::unique_ptr<pooled_connection> made_room;
  acquired a{grant::busy, nullptr, nullptr};
  {
    std::lock_guard lock(mutex_);
    // Read under the lock, as a sweep of this pool bumps it under the lock.
    const std::uint64_t forgotten = hosts_forgotten.load(std::memory_order_acquire);
    host* found = nullptr;
    if (last_host.pool == this && last_host.forgotten == forgotten && last_host.host->key == key) {
      found = last_host.host;
    } else {
      auto& slot = hosts_[key];
      if (!slot) {
        slot = std::make_unique<host>();
        slot->key = key;
      }
      found = slot.get();
      last_host = {this, forgotten, found};
    }
    host& h = *found;
    a.where = &h;
    close_all(h, expired, now, false);
    // The most recently used of the caller's context: a socket's operations
    // complete on the context it was opened on, so no other can use it.
    auto mine = h.idle.end();
    for (auto it = h.idle.end(); it != h.idle.begin();) {
      --it;
      if (!on || &(*it)->context() == on) {
        mine = it;
        break;
      }
    }
    if (mine != h.idle.end()) {
      a.how = grant::reused;
      a.conn = std::move(*mine);
      h.idle.erase(mine);
    } else if (idle_only) {
      // busy: the caller opens or waits by another way
    } else if (h.open < options_.max_connections_per_host()) {
      a.how = grant::open_new;
      ++h.open;
    } else if (!h.idle.empty()) {
      // At the limit with idle connections of other contexts only: the
      // oldest one's place passes to this call (`open` does not move).
      made_room = std::move(h.idle.front());
      h.idle.erase(h.idle.begin());
      a.how = grant::open_new;
    } else if (waiter) {
      a.how = grant::queued;
      waiter->state = pool_waiter::status::queued;
      waiter->context = on;
      h.waiters.push_back(waiter);
    }
  }
  for (std::size_t i = 0; i < expired.size(); ++i) report_closed(*a.where, close_reason::idle_timeout);
  if (made_room) {
    made_room.reset();
    report_closed(*a.where, close_reason::other_context);
  }
  return a;
}

void pool_core::withdraw_waiters_on(const boost::asio::execution_context& ctx) noexcept {
  std::lock_guard lock(mutex_);
  for (auto& [key, h] : hosts_) {
    std::erase_if(h->waiters, [&](const std::shared_ptr<pool_waiter>& w) {
      if (w->context != &ctx) return false;
      w->state = pool_waiter::status::left;
      return true;
    });
  }
}

bool pool_core::withdraw(host* h, pool_waiter& w) noexcept {
  std::lock_guard lock(mutex_);
  if (w.state != pool_waiter::status::queued) return false;
  const auto it = std::find_if(h->waiters.begin(), h->waiters.end(), [&](const auto& p) { return p.get() == &w; });
  if (it != h->waiters.end()) h->waiters.erase(it);
  w.state = pool_waiter::status::left;
  return true;
}

void pool_core::release(host& h, std::unique_ptr<pooled_connection> conn, bool keep, close_reason why,
                        time_point now) noexcept {
  std::vector<std::unique_ptr<pooled_connection>> expired;
  std::unique_ptr<pooled_connection> other_context;
  const bool closing = conn && !keep;
  {
    std::lock_guard lock(mutex_);
    if (!keep) conn.reset();  // closed: its place stays counted and passes on, or is freed below
    if (!h.waiters.empty()) {
      // Dropped in this block: the waiter's last owner is its frame (or the
      // posted wake-up), never this thread after the lock is let go.
      const std::shared_ptr<pool_waiter> first = std::move(h.waiters.front());
      h.waiters.pop_front();
      first->state = pool_waiter::status::granted;
      // A waiter of another context cannot use it: it gets the place.
      if (conn && first->context && &conn->context() != first->context) other_context = std::move(conn);
      first->granted_connection = std::move(conn);  // null: open a new one in this place
      // Under the lock, as the grant: once the waiter's context begins to
      // shut down (withdraw_waiters_on takes this lock), nothing posts to it.
      first->wake();
    } else if (conn) {
      conn->idle_since_ = now;
      h.idle.push_back(std::move(conn));
      close_all(h, expired, now, false);
    } else {
      --h.open;
    }
  }
  if (closing) report_closed(h, why);
  for (std::size_t i = 0; i < expired.size(); ++i) report_closed(h, close_reason::idle_timeout);
  if (other_context) {
    other_context.reset();
    report_closed(h, close_reason::other_context);
  }
}

// Closes the idle connections `which` picks, then forgets every host left
// with no connection and no waiter (a client that met many hosts would
// otherwise keep an entry for each). No lease or waiter points at such a
// host: a place taken counts in `open`.
template <class Which>
std::size_t pool_core::sweep(Which which, close_reason why) noexcept {
  std::vector<std::pair<std::string, std::unique_ptr<pooled_connection>>> closed;
  {
    std::lock_guard lock(mutex_);
    for (auto it = hosts_.begin(); it != hosts_.end();) {
      host& h = *it->second;
      for (auto& c : h.idle)
        if (which(h, *c)) closed.emplace_back(h.key, std::move(c));
      const auto end = std::remove(h.idle.begin(), h.idle.end(), nullptr);
      h.open -= static_cast<std::uint32_t>(h.idle.end() - end);
      h.idle.erase(end, h.idle.end());
      if (h.open == 0 && h.waiters.empty()) {
        hosts_forgotten.fetch_add(1, std::memory_order_acq_rel);
        it = hosts_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [key, c] : closed) {
    c.reset();
    if (options_.on_closed()) options_.on_closed()(key, why);
  }
  return closed.size();
}

std::size_t pool_core::close_expired(time_point now) noexcept {
  return sweep([&](const host&, const pooled_connection& c) { return now - c.idle_since_ >= options_.idle_timeout(); },
               close_reason::idle_timeout);
}

std::size_t pool_core::close_idle() noexcept {
  return sweep([](const host&, const pooled_connection&) { return true; }, close_reason::pool_closed);
}

std::size_t pool_core::close_idle_on(const boost::asio::execution_context& ctx) noexcept {
  namespace asio = boost::asio;
  return sweep(
      [&](const host&, pooled_connection& c) { return &c.context() == &ctx; },
      close_reason::pool_closed);
}

std::uint32_t pool_core::open_connections(const std::string& key) const {
  std::lock_guard lock(mutex_);
  const auto it = hosts_.find(key);
  return it == hosts_.end() ? 0 : it->second->open;
}

std::size_t pool_core::hosts() const {
  std::lock_guard lock(mutex_);
  return hosts_.size();
}

std::uint32_t pool_core::idle_connections(const std::string& key) const {
  std::lock_guard lock(mutex_);
  const auto it = hosts_.find(key);
  return it == hosts_.end() ? 0 : static_cast<std::uint32_t>(it->second->idle.size());
}

std::shared_ptr<boost::asio::ssl::context> default_tls_context() {
  namespace ssl = boost::asio::ssl;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_default_verify_paths();
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

}  // namespace detail
}  // namespace resilience::http
