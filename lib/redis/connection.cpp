// hiredis's asynchronous context on an Asio executor: its read and write
// hooks become waits on the socket's readiness, and every hiredis call runs
// on the connection's executor.
#include <resilience/redis/connection.hpp>
#include <resilience/detail/with_option.hpp>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/errc.hpp>

extern "C" {
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
}

#include <atomic>
#include <csignal>

#include <poll.h>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <utility>

namespace resilience::redis {

namespace asio = boost::asio;

connection_options connection_options::tcp(std::string host, std::uint16_t port) const {
  if (host.empty()) throw std::invalid_argument("redis::connection_options::tcp: empty host");
  if (port == 0) throw std::invalid_argument("redis::connection_options::tcp: port 0");
  auto o = *this;
  o.host_ = std::move(host);
  o.port_ = port;
  o.socket_path_.clear();
  return o;
}
connection_options connection_options::unix_socket(std::string path) const {
  if (path.empty()) throw std::invalid_argument("redis::connection_options::unix_socket: empty path");
  return resilience::detail::with_option(*this, &connection_options::socket_path_, std::move(path));
}
connection_options connection_options::password(std::string password) const {
  auto o = *this;
  o.password_ = std::move(password);
  o.username_.clear();
  return o;
}
connection_options connection_options::user(std::string username, std::string password) const {
  if (username.empty()) throw std::invalid_argument("redis::connection_options::user: empty user name");
  auto o = *this;
  o.username_ = std::move(username);
  o.password_ = std::move(password);
  return o;
}
connection_options connection_options::database(int index) const {
  if (index < 0) throw std::invalid_argument("redis::connection_options::database: negative index");
  return resilience::detail::with_option(*this, &connection_options::database_, index);
}
connection_options connection_options::connect_timeout(duration d) const {
  if (d <= duration::zero()) throw std::invalid_argument("redis::connection_options::connect_timeout: not positive");
  return resilience::detail::with_option(*this, &connection_options::connect_timeout_, d);
}
connection_options connection_options::command_timeout(duration d) const {
  if (d <= duration::zero()) throw std::invalid_argument("redis::connection_options::command_timeout: not positive");
  return resilience::detail::with_option(*this, &connection_options::command_timeout_, d);
}

namespace detail {

namespace {
// hiredis writes with write(2): a peer gone would raise SIGPIPE and end the
// process. Ignored, the write fails with EPIPE and the commands end with an
// error. A handler the program installed is left alone.
void ignore_sigpipe() {
  static const bool done = [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
    return true;
  }();
  (void)done;
}

reply copy_reply(const redisReply* r) {
  reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = reply::kind::string;
      out.text.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = reply::kind::status;
      out.text.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = reply::kind::error;
      out.text.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = reply::kind::integer;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = reply::kind::array;
      out.elements.reserve(r->elements);
      for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(copy_reply(r->element[i]));
      break;
    default:
      out.type = reply::kind::nil;
  }
  return out;
}
}  // namespace

class connection_impl : public std::enable_shared_from_this<connection_impl> {
 public:
  connection_impl(asio::any_io_executor ex, connection_options o)
      : executor_(std::move(ex)), options_(std::move(o)), connect_timer_(executor_) {}

  ~connection_impl() { shutdown(); }

  // On the executor.
  void begin(std::uint64_t id, std::vector<std::string> args, command_handler done) {
    if (closed_) {
      done(asio::error::operation_aborted, {});
      return;
    }
    auto& p = pending_[id];
    p.done = std::move(done);
    p.timer = std::make_unique<asio::steady_timer>(executor_);
    p.timer->expires_after(options_.command_timeout());
    p.timer->async_wait([self = shared_from_this(), id](error_code ec) {
      if (!ec) self->complete(id, resilience::error::timeout, {});
    });
    if (args.empty()) {
      complete(id, asio::error::invalid_argument, {});  // hiredis would assert on a command of no words
      return;
    }
    // Idle, nothing watched the socket: Redis (or a proxy) may have closed
    // it meanwhile. Read what is there first (an EOF frees the context), so
    // that a command is not written to a dead connection.
    if (context_ != nullptr && ready_ && !read_waiting_) {
      pollfd p{context_->c.fd, POLLIN, 0};
      if (::poll(&p, 1, 0) > 0) redisAsyncHandleRead(context_);
    }
    if (context_ == nullptr) connect();
    if (context_ == nullptr) return;  // connect() failed every pending command
    send(id, args);
    if (want_read_) arm(true);  // idle, the read wait was let go
  }

  void complete(std::uint64_t id, error_code ec, reply r) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;  // already ended (timed out, cancelled)
    auto done = std::move(it->second.done);
    pending_.erase(it);  // the timer's destructor cancels its wait
    // Idle and connected: no wait of ours keeps the io_context running (a
    // program whose work is done returns from run()). A reply that comes
    // late, or Redis going away, is read with the next command.
    if (pending_.empty() && ready_ && socket_) socket_->cancel();
    done(ec, std::move(r));
  }

  // Ends every command and drops the connection; later commands fail.
  void shutdown() {
    closed_ = true;
    disconnect(asio::error::operation_aborted);
    auto left = std::move(pending_);
    pending_.clear();
    for (auto& [id, p] : left) p.done(asio::error::operation_aborted, {});
  }

  void close() { disconnect(asio::error::operation_aborted); }

  bool connected() const noexcept { return context_ != nullptr && ready_; }
  const asio::any_io_executor& executor() const noexcept { return executor_; }

 private:
  struct pending_command {
    command_handler done;
    std::unique_ptr<asio::steady_timer> timer;
  };

  static connection_impl* self_of(const redisAsyncContext* ac) { return static_cast<connection_impl*>(ac->data); }

  void connect() {
    ignore_sigpipe();
    redisAsyncContext* ac = options_.socket_path().empty()
                                ? redisAsyncConnect(options_.host().c_str(), options_.port())
                                : redisAsyncConnectUnix(options_.socket_path().c_str());
    if (ac == nullptr || ac->err) {
      if (ac) redisAsyncFree(ac);
      fail_all(asio::error::not_connected);
      return;
    }
    context_ = ac;
    ready_ = false;
    ac->data = this;
    socket_ = std::make_unique<asio::posix::stream_descriptor>(executor_, ac->c.fd);
    ++generation_;
    want_read_ = want_write_ = false;
    ac->ev.data = this;
    ac->ev.addRead = [](void* p) { static_cast<connection_impl*>(p)->want(true, true); };
    ac->ev.delRead = [](void* p) { static_cast<connection_impl*>(p)->want(true, false); };
    ac->ev.addWrite = [](void* p) { static_cast<connection_impl*>(p)->want(false, true); };
    ac->ev.delWrite = [](void* p) { static_cast<connection_impl*>(p)->want(false, false); };
    ac->ev.cleanup = [](void* p) { static_cast<connection_impl*>(p)->detach(); };
    redisAsyncSetConnectCallback(ac, [](const redisAsyncContext* c, int status) {
      if (status == REDIS_OK) self_of(c)->on_connected();
    });
    redisAsyncSetDisconnectCallback(ac, [](const redisAsyncContext*, int) {});
    connect_timer_.expires_after(options_.connect_timeout());
    connect_timer_.async_wait([self = shared_from_this(), gen = generation_](error_code ec) {
      if (!ec && gen == self->generation_ && self->context_ && !self->ready_) self->disconnect(resilience::error::timeout);
    });
    // Sent once connected (hiredis keeps them until then), before any command.
    if (!options_.secret().empty()) {
      if (options_.username().empty())
        send_internal({"AUTH", options_.secret()});
      else
        send_internal({"AUTH", options_.username(), options_.secret()});
    }
    if (options_.database() != 0) send_internal({"SELECT", std::to_string(options_.database())});
  }

  void on_connected() {
    ready_ = true;
    connect_timer_.cancel();
  }

  static void on_reply(redisAsyncContext* ac, void* r, void* privdata) {
    auto* self = self_of(ac);
    const auto id = reinterpret_cast<std::uintptr_t>(privdata);
    if (r == nullptr) {
      // The context is being freed: why, from what it recorded.
      self->complete(id, self->closing_reason(ac), {});
      return;
    }
    self->complete(id, {}, copy_reply(static_cast<redisReply*>(r)));
  }

  // AUTH and SELECT: an error reply ends the connection.
  static void on_internal_reply(redisAsyncContext* ac, void* r, void*) {
    auto* self = self_of(ac);
    if (r != nullptr && static_cast<redisReply*>(r)->type == REDIS_REPLY_ERROR) {
      self->reason_ = boost::system::errc::make_error_code(boost::system::errc::permission_denied);
      redisAsyncFree(ac);  // deferred by hiredis until this callback returns
    }
  }

  error_code closing_reason(const redisAsyncContext* ac) const {
    if (reason_) return reason_;
    switch (ac->err) {
      case 0: return asio::error::operation_aborted;
      case REDIS_ERR_EOF: return asio::error::eof;
      case REDIS_ERR_IO: return ready_ ? error_code(asio::error::connection_reset) : error_code(asio::error::not_connected);
      default: return asio::error::connection_aborted;  // a protocol error
    }
  }

  void send(std::uint64_t id, const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAsyncCommandArgv(context_, &on_reply, reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)),
                              static_cast<int>(args.size()), argv.data(), lens.data()) != REDIS_OK)
      complete(id, asio::error::not_connected, {});
  }

  void send_internal(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAsyncCommandArgv(context_, &on_internal_reply, nullptr, static_cast<int>(args.size()), argv.data(),
                          lens.data());
  }

  // Frees the context: its commands end with `why`.
  void disconnect(error_code why) {
    if (context_ == nullptr) return;
    reason_ = why;
    redisAsyncFree(context_);  // runs every callback, then detach()
  }

  void fail_all(error_code ec) {
    auto left = std::move(pending_);
    pending_.clear();
    for (auto& [id, p] : left) p.done(ec, {});
  }

  // hiredis's cleanup hook: the context is about to be freed (and its socket
  // closed by hiredis, so the descriptor is released, not closed, here).
  void detach() {
    if (socket_) {
      socket_->release();  // cancels the waits, which see a new generation
      socket_.reset();
    }
    context_ = nullptr;
    ready_ = false;
    reason_ = {};
    // The released socket's waits end with the old generation: the next
    // connection's must not wait for them to clear these.
    read_waiting_ = write_waiting_ = false;
    ++generation_;
    connect_timer_.cancel();
  }

  void want(bool read, bool on) {
    (read ? want_read_ : want_write_) = on;
    if (on && (!read || busy())) arm(read);
  }

  // Connecting, or a command of ours waits for its reply.
  bool busy() const noexcept { return !ready_ || !pending_.empty(); }

  void arm(bool read) {
    bool& waiting = read ? read_waiting_ : write_waiting_;
    if (waiting || !socket_) return;
    waiting = true;
    socket_->async_wait(read ? asio::posix::stream_descriptor::wait_read : asio::posix::stream_descriptor::wait_write,
                        [self = shared_from_this(), read, gen = generation_](error_code ec) {
                          self->on_ready(read, gen, ec);
                        });
  }

  void on_ready(bool read, std::uint64_t gen, error_code ec) {
    if (gen != generation_ || context_ == nullptr) return;  // a released socket's wait
    (read ? read_waiting_ : write_waiting_) = false;
    // Cancelled by complete() going idle: armed again below if a command came
    // meanwhile (its arm() saw this wait still pending).
    if (ec && ec != asio::error::operation_aborted) return;
    if (!ec && (read ? want_read_ : want_write_)) {
      if (read)
        redisAsyncHandleRead(context_);
      else
        redisAsyncHandleWrite(context_);
    }
    // The context may be gone (freed by hiredis on an error or EOF).
    if (gen == generation_ && context_ != nullptr && (read ? want_read_ : want_write_) && (!read || busy())) arm(read);
  }

  asio::any_io_executor executor_;
  connection_options options_;
  redisAsyncContext* context_ = nullptr;
  std::unique_ptr<asio::posix::stream_descriptor> socket_;
  asio::steady_timer connect_timer_;
  std::uint64_t generation_ = 0;
  bool ready_ = false;
  bool closed_ = false;
  bool want_read_ = false, want_write_ = false;
  bool read_waiting_ = false, write_waiting_ = false;
  error_code reason_;
  std::map<std::uint64_t, pending_command> pending_;
};

namespace {
std::atomic<std::uint64_t> next_command_id{1};

struct command_canceller {
  std::weak_ptr<connection_impl> impl;
  std::uint64_t id;
  void operator()(asio::cancellation_type type) {
    if (type == asio::cancellation_type::none) return;
    if (auto p = impl.lock())
      asio::dispatch(p->executor(), [p, id = id] { p->complete(id, asio::error::operation_aborted, {}); });
  }
};
}  // namespace

void start_command(const std::shared_ptr<connection_impl>& impl, std::vector<std::string> args,
                   command_handler done, asio::cancellation_slot slot) {
  const std::uint64_t id = next_command_id.fetch_add(1, std::memory_order_relaxed);
  if (slot.is_connected()) slot.template emplace<command_canceller>(command_canceller{impl, id});
  asio::dispatch(impl->executor(), [impl, id, args = std::move(args), done = std::move(done)]() mutable {
    impl->begin(id, std::move(args), std::move(done));
  });
}

}  // namespace detail

connection::connection(executor_type ex, connection_options options)
    : options_(std::move(options)), impl_(std::make_shared<detail::connection_impl>(std::move(ex), options_)) {}

connection::~connection() { impl_->shutdown(); }

bool connection::connected() const noexcept { return impl_->connected(); }
void connection::close() { impl_->close(); }
connection::executor_type connection::get_executor() const noexcept { return impl_->executor(); }
connection::executor_type connection::impl_executor(const std::shared_ptr<detail::connection_impl>& impl) noexcept {
  return impl->executor();
}

}  // namespace resilience::redis
