// HTTP/1.1 over real sockets: a server to put load on, and a keep-alive load
// client that compares resilience::http::client with the same exchange
// written by hand with Beast.
//
//   http_load serve [--address A] [--port P] [--handler bare|guarded|server] [--max-concurrent N]
//                   [--threads T] [--handler-delay-ms D]
//   http_load client --target host:port [--concurrency C] [--duration S] [--mode plain|resilient|both]
//                    [--rounds R]
//                    [--breaker polly]
//   http_load [self] [client and server options]   # a server on a thread of its own, then client --mode both
//
// serve answers every request 200 "ok" (after D ms when asked) and prints
// `port P` once it listens; on SIGINT or SIGTERM it prints the requests
// served (answered other than 503), shed (503), its peak RSS and the CPU
// seconds it used. Handlers:
//   bare     a Beast session loop calling the handler directly;
//   guarded  the same loop calling it through http::guarded_handler (the
//            wrapper alone: the fair comparison with bare);
//   server   http::server, which also bounds every read, write and idle
//            wait of a connection (the whole library path).
// With T threads, each runs an io_context of its own with its own acceptor
// on the same port (SO_REUSEPORT); a guarded handler's slots are shared by
// all, a server's limit is divided among the T servers.
//
// client runs C users for S seconds per round, each a keep-alive connection
// of its own, one request at a time, all on one thread. plain: a
// beast::tcp_stream per user; resilient: http::client (defaults, a pool of C
// connections per host, so no user waits for one). Requests are counted in
// a window that starts once warm-up is over; CPU is that thread's own
// (getrusage RUSAGE_THREAD), so a server in the same process does not count.
// `both` runs the modes alternately, R rounds each (each mode first in every
// other round), and reports medians, each round's ratio resilient / plain
// and the median of those ratios. The exit status is non-zero when a request
// failed or none completed.
// --breaker polly: the resilient client with Polly's breaker defaults (opens
// at 10% failures of at least 100 attempts in 30 s, for 5 s) instead of the
// client's: against a server failing 10% of requests it opens, and its
// refused calls must still give the thread back (tests/bench/nginx.sh).
#include "allocation_counter.hpp"

#include <resilience/http/client.hpp>
#include <resilience/http/server.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using asio::ip::tcp;
using wall_clock = std::chrono::steady_clock;
using response = bhttp::response<bhttp::string_body>;

// ---------------------------------------------------------------- options

enum class handler_kind { bare, guarded, server };
enum class client_mode { plain, resilient, both };

struct settings {
  // serve
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;
  handler_kind handler = handler_kind::bare;
  std::uint32_t max_concurrent = 100;
  unsigned threads = 1;
  std::chrono::milliseconds handler_delay{0};
  // client
  std::string target_host;
  std::uint16_t target_port = 0;
  unsigned concurrency = 16;
  double duration_s = 5;
  client_mode mode = client_mode::both;
  unsigned rounds = 3;
  bool polly_breaker = false;
};

template <class T>
T number(std::string_view field, std::string_view text, T min, T max) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < min || value > max)
    throw std::invalid_argument(std::string(field) + ": must be a number in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], not '" + std::string(text) + "'");
  return value;
}

// Each subcommand takes only the options it uses; anything else is refused.
settings parse(std::string_view command, int argc, char** argv, int first) {
  const bool serving = command == "serve" || command == "self";
  const bool loading = command == "client" || command == "self";
  settings s;
  if (command == "self") s.duration_s = 2;  // a quick run
  bool has_target = false;
  for (int i = first; i < argc; ++i) {
    const std::string_view name = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(std::string(name) + ": needs a value");
    const std::string_view value = argv[++i];
    if (serving && name == "--handler") {
      if (value == "bare") s.handler = handler_kind::bare;
      else if (value == "guarded") s.handler = handler_kind::guarded;
      else if (value == "server") s.handler = handler_kind::server;
      else throw std::invalid_argument("--handler: bare, guarded or server, not '" + std::string(value) + "'");
    } else if (serving && name == "--max-concurrent") {
      s.max_concurrent = number<std::uint32_t>(name, value, 1, 1u << 30);
    } else if (serving && name == "--handler-delay-ms") {
      s.handler_delay = std::chrono::milliseconds(number<unsigned>(name, value, 0, 60'000));
    } else if (command == "serve" && name == "--address") {
      s.address = value;
    } else if (command == "serve" && name == "--port") {
      s.port = number<std::uint16_t>(name, value, 0, 65535);
    } else if (command == "serve" && name == "--threads") {
      s.threads = number<unsigned>(name, value, 1, 256);
    } else if (command == "client" && name == "--target") {
      const auto colon = value.rfind(':');
      if (colon == std::string_view::npos || colon == 0)
        throw std::invalid_argument("--target: host:port, not '" + std::string(value) + "'");
      s.target_host = value.substr(0, colon);
      if (s.target_host.size() > 2 && s.target_host.front() == '[' && s.target_host.back() == ']')
        s.target_host = s.target_host.substr(1, s.target_host.size() - 2);  // [::1]:8080
      s.target_port = number<std::uint16_t>("--target's port", value.substr(colon + 1), 1, 65535);
      has_target = true;
    } else if (loading && name == "--concurrency") {
      s.concurrency = number<unsigned>(name, value, 1, 10'000);
    } else if (loading && name == "--duration") {
      s.duration_s = number<unsigned>(name, value, 1, 3600);
    } else if (loading && name == "--rounds") {
      s.rounds = number<unsigned>(name, value, 1, 100);
    } else if (loading && name == "--mode") {
      if (value == "plain") s.mode = client_mode::plain;
      else if (value == "resilient") s.mode = client_mode::resilient;
      else if (value == "both") s.mode = client_mode::both;
      else throw std::invalid_argument("--mode: plain, resilient or both, not '" + std::string(value) + "'");
    } else if (loading && name == "--breaker") {
      if (value == "polly") s.polly_breaker = true;
      else throw std::invalid_argument("--breaker: polly, not '" + std::string(value) + "'");
    } else {
      throw std::invalid_argument(std::string(name) + ": not an option of '" + std::string(command) + "'");
    }
  }
  if (command == "client" && !has_target) throw std::invalid_argument("--target: required");
  if (s.handler == handler_kind::server && s.max_concurrent < s.threads)
    throw std::invalid_argument("--max-concurrent: at least --threads with --handler server (it is divided among them)");
  return s;
}

// ----------------------------------------------------------------- server

// What every variant serves: 200 "ok", after `delay` when there is one.
struct answer_ok {
  std::chrono::milliseconds delay{0};

  asio::awaitable<response> operator()(rhttp::server_request req, const resilience::context&) const {
    if (delay.count() > 0) {
      asio::steady_timer wait(co_await asio::this_coro::executor, delay);
      co_await wait.async_wait(asio::use_awaitable);
    }
    response res{bhttp::status::ok, req.version()};
    res.set(bhttp::field::content_type, "text/plain");
    res.body() = "ok";
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    co_return res;
  }
};

struct served_counts {
  std::atomic<std::uint64_t> served{0};  // answered, other than 503
  std::atomic<std::uint64_t> shed{0};    // 503
  void count(unsigned status) noexcept { (status == 503 ? shed : served).fetch_add(1, std::memory_order_relaxed); }
};

// The session loop of bare and guarded: `answer` is the handler itself or
// the guarded_handler around it, called the same way.
template <class Answer>
asio::awaitable<void> session(tcp::socket socket, const Answer* answer, served_counts* counts) {
  beast::flat_buffer buffer;
  const resilience::context ctx;  // outlives every call made with it
  for (;;) {
    rhttp::server_request req;
    auto [read_error, read] = co_await bhttp::async_read(socket, buffer, req, asio::as_tuple(asio::use_awaitable));
    if (read_error) break;
    const bool keep_alive = req.keep_alive();
    response res = co_await (*answer)(std::move(req), ctx);
    res.keep_alive(keep_alive);
    auto [write_error, written] = co_await bhttp::async_write(socket, res, asio::as_tuple(asio::use_awaitable));
    if (write_error) break;
    counts->count(res.result_int());
    if (!keep_alive) break;
  }
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  socket.close(ignored);
}

template <class Answer>
asio::awaitable<void> accept_loop(tcp::acceptor* acceptor, const Answer* answer, served_counts* counts) {
  for (;;) {
    auto [ec, socket] = co_await acceptor->async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::connection_aborted) continue;  // the client gave up in the backlog
    if (ec) {
      if (ec != asio::error::operation_aborted) std::fprintf(stderr, "http_load: accept: %s\n", ec.message().c_str());
      co_return;
    }
    asio::co_spawn(acceptor->get_executor(), session(std::move(socket), answer, counts), asio::detached);
  }
}

// A server on `threads` threads, each with an io_context and an acceptor of
// its own on one port. Stops (and frees every session) when destroyed.
class load_server {
 public:
  explicit load_server(const settings& s) : handler_{s.handler_delay} {
    if (s.handler == handler_kind::guarded)
      guard_.emplace(handler_, rhttp::server_options{}.max_concurrent(s.max_concurrent));
    const auto address = asio::ip::make_address(s.address);
    std::uint16_t port = s.port;
    for (unsigned i = 0; i < s.threads; ++i) {
      auto& l = *listeners_.emplace_back(std::make_unique<listener>());
      const tcp::endpoint at(address, port);
      l.acceptor.open(at.protocol());
      l.acceptor.set_option(tcp::acceptor::reuse_address(true));
      if (s.threads > 1) l.acceptor.set_option(asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true));
      l.acceptor.bind(at);
      l.acceptor.listen(asio::socket_base::max_listen_connections);
      port = l.acceptor.local_endpoint().port();  // the others join the first one's port
      switch (s.handler) {
        case handler_kind::bare:
          asio::co_spawn(l.io, accept_loop(&l.acceptor, &handler_, &counts_), asio::detached);
          break;
        case handler_kind::guarded:
          asio::co_spawn(l.io, accept_loop(&l.acceptor, &*guard_, &counts_), asio::detached);
          break;
        case handler_kind::server: {
          const std::uint32_t share = (s.max_concurrent + s.threads - 1) / s.threads;
          auto& srv = servers_.emplace_back(
              handler_, rhttp::server_options{}.max_concurrent(share).on_request_finished(
                            [counts = &counts_](const rhttp::request_finished& f) {
                              if (f.status != 0) counts->count(f.status);  // 0: cancelled, unanswered
                            }));
          asio::co_spawn(l.io, srv.run(l.acceptor), asio::detached);
          break;
        }
      }
    }
    port_ = port;
    for (auto& l : listeners_) threads_.emplace_back([io = &l->io] { io->run(); });
  }
  load_server(const load_server&) = delete;
  load_server& operator=(const load_server&) = delete;
  ~load_server() {
    stop();
    listeners_.clear();  // their io_contexts free the sessions, which refer to what follows
  }

  std::uint16_t port() const noexcept { return port_; }
  void stop() {
    for (auto& l : listeners_) l->io.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  std::uint64_t served() const noexcept { return counts_.served.load(); }
  std::uint64_t shed() const noexcept { return counts_.shed.load(); }

 private:
  struct listener {
    asio::io_context io{1};
    tcp::acceptor acceptor{io};
  };

  answer_ok handler_;
  std::optional<rhttp::guarded_handler<answer_ok>> guard_;
  std::list<rhttp::server<answer_ok>> servers_;
  served_counts counts_;
  std::vector<std::unique_ptr<listener>> listeners_;
  std::vector<std::thread> threads_;
  std::uint16_t port_ = 0;
};

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; }

const char* name_of(handler_kind h) {
  return h == handler_kind::bare ? "bare" : h == handler_kind::guarded ? "guarded" : "server";
}

int serve(const settings& s) {
  // Blocked before the threads start, so that they inherit the mask and the
  // signals come to sigwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  load_server server(s);
  std::printf("port %u\nhttp_load: serving on %s:%u, handler %s, max-concurrent %u, threads %u, handler delay %lld ms\n",
              server.port(), s.address.c_str(), server.port(), name_of(s.handler), s.max_concurrent, s.threads,
              static_cast<long long>(s.handler_delay.count()));
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  server.stop();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  // The process's CPU: nearly all of it serving, since waiting costs none.
  std::printf("served %llu shed %llu peak_rss_kib %ld cpu_s %.3f\n", static_cast<unsigned long long>(server.served()),
              static_cast<unsigned long long>(server.shed()), ru.ru_maxrss, seconds(ru.ru_utime) + seconds(ru.ru_stime));
  return 0;
}

// ----------------------------------------------------------------- client

// Latencies in microseconds: exact below 64 us, then 32 buckets per power of
// two (at most 3% wide). Fixed size: recording allocates nothing.
class latency_histogram {
 public:
  void add(wall_clock::duration d) noexcept {
    const auto us = static_cast<std::uint64_t>(std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::microseconds>(d).count()));
    ++counts_[index(us)];
    ++total_;
  }
  // The lower bound of the bucket holding quantile q.
  double quantile_us(double q) const noexcept {
    if (total_ == 0) return 0;
    const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_ - 1)) + 1;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) return static_cast<double>(lower_bound(i));
    }
    return static_cast<double>(lower_bound(counts_.size() - 1));
  }

 private:
  static constexpr unsigned max_shift = 40;
  static std::size_t index(std::uint64_t us) noexcept {
    if (us < 64) return us;
    const unsigned shift = std::min<unsigned>(static_cast<unsigned>(std::bit_width(us)) - 6, max_shift);
    const std::uint64_t mantissa = std::min<std::uint64_t>(us >> shift, 63);  // 32..63
    return 64 + (shift - 1) * 32 + (mantissa - 32);
  }
  static std::uint64_t lower_bound(std::size_t i) noexcept {
    if (i < 64) return i;
    const std::size_t shift = (i - 64) / 32 + 1;
    return (32 + (i - 64) % 32) << shift;
  }
  std::array<std::uint64_t, 64 + max_shift * 32> counts_{};
  std::uint64_t total_ = 0;
};

double thread_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return seconds(ru.ru_utime) + seconds(ru.ru_stime);
}

// One round's shared state: every user runs on the same thread.
struct round_state {
  bool measuring = false;
  bool stop = false;
  std::uint64_t requests = 0;  // answered 200 inside the window
  std::uint64_t errors = 0;    // anywhere in the round
  latency_histogram latency;
  // The plain users' open streams, for a server that stops answering: the
  // resilient client's own timeouts end its calls. A deque: the users keep
  // references to their elements.
  std::deque<beast::tcp_stream*> plain_streams;
  unsigned running = 0;                  // users not yet returned
  asio::steady_timer* grace = nullptr;  // the meter's wait for them, if it waits

  void record(wall_clock::time_point start, bool ok) noexcept {
    if (!ok) ++errors;
    if (!ok || !measuring) return;
    ++requests;
    latency.add(wall_clock::now() - start);
  }
};

// A user's presence in its round; the last one out ends the meter's wait.
class user_scope {
 public:
  explicit user_scope(round_state* round) : round_(round) { ++round_->running; }
  user_scope(const user_scope&) = delete;
  user_scope& operator=(const user_scope&) = delete;
  ~user_scope() {
    if (--round_->running == 0 && round_->grace) round_->grace->cancel();
  }

 private:
  round_state* round_;
};

struct round_result {
  client_mode mode;
  double seconds = 0;
  double cpu_seconds = 0;
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;
  double allocations = 0;  // per request
  double p50_us = 0;
  double p99_us = 0;
  double per_second = 0;
  double per_cpu_second = 0;  // "per core": the client runs on one thread
};

using get_request = bhttp::request<bhttp::empty_body>;

asio::awaitable<void> plain_user(tcp::endpoint target, const get_request* req, round_state* round) {
  const user_scope scope(round);
  const auto executor = co_await asio::this_coro::executor;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  auto& registered = round->plain_streams.emplace_back(nullptr);
  struct forget {
    beast::tcp_stream*& registered;
    ~forget() { registered = nullptr; }
  } forget_on_exit{registered};
  while (!round->stop) {
    const auto start = wall_clock::now();
    if (!stream) {
      stream.emplace(executor);
      auto [ec] = co_await stream->async_connect(target, asio::as_tuple(asio::use_awaitable));
      if (ec) {
        stream.reset();
        round->record(start, false);
        continue;
      }
      boost::system::error_code ignored;
      stream->socket().set_option(tcp::no_delay(true), ignored);  // as the client's pool does
      registered = &*stream;
    }
    auto [write_error, written] = co_await bhttp::async_write(*stream, *req, asio::as_tuple(asio::use_awaitable));
    response res;
    boost::system::error_code read_error;
    if (!write_error)
      std::tie(read_error, std::ignore) =
          co_await bhttp::async_read(*stream, buffer, res, asio::as_tuple(asio::use_awaitable));
    const bool exchanged = !write_error && !read_error;
    round->record(start, exchanged && res.result() == bhttp::status::ok);
    if (!exchanged || !res.keep_alive()) {
      registered = nullptr;
      stream.reset();
      buffer.clear();
    }
  }
}

asio::awaitable<void> resilient_user(rhttp::client* client, const rhttp::endpoint* to, const get_request* req,
                                     round_state* round) {
  const user_scope scope(round);
  // The user's own request, sent by reference (std::ref): the call sets its
  // Host header, so users must not share one. The plain users write theirs
  // unchanged, without a copy, too.
  get_request own = *req;
  while (!round->stop) {
    const auto start = wall_clock::now();
    auto res = co_await client->request(*to, std::ref(own));
    round->record(start, res && res->result() == bhttp::status::ok);
  }
}

// Opens the window after the warm-up (every connection open by then), and
// closes it `length` later.
asio::awaitable<void> meter(round_state* round, wall_clock::duration warm_up, wall_clock::duration length,
                            round_result* out) {
  asio::steady_timer timer(co_await asio::this_coro::executor, warm_up);
  co_await timer.async_wait(asio::use_awaitable);
  const double cpu_before = thread_cpu_seconds();
  const std::size_t allocations_before = resilience::bench::thread_allocations();
  const auto wall_before = wall_clock::now();
  round->measuring = true;
  timer.expires_after(length);
  co_await timer.async_wait(asio::use_awaitable);
  round->measuring = false;
  round->stop = true;
  out->seconds = std::chrono::duration<double>(wall_clock::now() - wall_before).count();
  out->cpu_seconds = thread_cpu_seconds() - cpu_before;
  out->requests = round->requests;
  out->per_second = out->seconds > 0 ? static_cast<double>(out->requests) / out->seconds : 0;
  out->per_cpu_second = out->cpu_seconds > 0 ? static_cast<double>(out->requests) / out->cpu_seconds : 0;
  out->allocations = round->requests == 0 ? 0
                                          : static_cast<double>(resilience::bench::thread_allocations() -
                                                                allocations_before) /
                                                static_cast<double>(round->requests);
  if (round->running == 0) co_return;
  // A plain exchange still waiting after a grace will not end by itself.
  round->grace = &timer;
  timer.expires_after(std::chrono::seconds(2));
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  round->grace = nullptr;
  if (ec) co_return;  // cancelled: every user has returned
  for (auto* stream : round->plain_streams)
    if (stream) stream->socket().cancel();
}

round_result run_round(client_mode mode, const settings& s, const tcp::endpoint& resolved) {
  asio::io_context io(1);
  round_state round;
  round_result result;
  result.mode = mode;
  get_request req{bhttp::verb::get, "/", 11};
  const auto to = rhttp::endpoint::http(s.target_host, s.target_port);
  req.set(bhttp::field::host, to.authority());
  req.set(bhttp::field::user_agent, "http_load");
  // After io: destroyed first, closing its connections on their io_context.
  std::optional<rhttp::client> client;
  if (mode == client_mode::resilient) {
    client.emplace(rhttp::client_options::standard().pool(
        rhttp::connection_pool_options{}.max_connections_per_host(s.concurrency)));
  }
  if (client && s.polly_breaker) {
    client.reset();
    client.emplace(rhttp::client_options::standard()
                       .pool(rhttp::connection_pool_options{}.max_connections_per_host(s.concurrency))
                       .breaker(resilience::breaker_options{}
                                    .failure_ratio(0.1)
                                    .minimum_calls(100)
                                    .time_window(std::chrono::seconds(30))
                                    .open_duration(std::chrono::seconds(5))));
  }
  for (unsigned i = 0; i < s.concurrency; ++i) {
    if (client)
      asio::co_spawn(io, resilient_user(&*client, &to, &req, &round), asio::detached);
    else
      asio::co_spawn(io, plain_user(resolved, &req, &round), asio::detached);
  }
  const auto length = std::chrono::duration_cast<wall_clock::duration>(std::chrono::duration<double>(s.duration_s));
  asio::co_spawn(io, meter(&round, std::chrono::milliseconds(300), length, &result), asio::detached);
  io.run();
  result.errors = round.errors;
  result.p50_us = round.latency.quantile_us(0.50);
  result.p99_us = round.latency.quantile_us(0.99);
  return result;
}

const char* name_of(client_mode m) { return m == client_mode::plain ? "plain" : "resilient"; }

void print(const char* label, const round_result& r) {
  std::printf("%-16s %-9s %9llu req %9.0f req/s  cpu %6.2f s %9.0f req/cpu-s  p50 %7.0f us  p99 %7.0f us  errors %llu",
              label, name_of(r.mode), static_cast<unsigned long long>(r.requests), r.per_second, r.cpu_seconds,
              r.per_cpu_second, r.p50_us, r.p99_us, static_cast<unsigned long long>(r.errors));
  if (resilience::bench::counting_allocations()) std::printf("  allocs/req %.1f", r.allocations);
  std::printf("\n");
  std::fflush(stdout);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

template <class F>
double median_of(const std::vector<round_result>& rs, F f) {
  std::vector<double> v;
  for (const auto& r : rs) v.push_back(f(r));
  return median_of(std::move(v));
}

// Each figure the median of its own over the rounds; errors summed.
round_result median(const std::vector<round_result>& rs) {
  round_result m;
  m.mode = rs.front().mode;
  m.seconds = median_of(rs, [](const auto& r) { return r.seconds; });
  m.cpu_seconds = median_of(rs, [](const auto& r) { return r.cpu_seconds; });
  m.requests = static_cast<std::uint64_t>(median_of(rs, [](const auto& r) { return static_cast<double>(r.requests); }));
  for (const auto& r : rs) m.errors += r.errors;
  m.allocations = median_of(rs, [](const auto& r) { return r.allocations; });
  m.p50_us = median_of(rs, [](const auto& r) { return r.p50_us; });
  m.p99_us = median_of(rs, [](const auto& r) { return r.p99_us; });
  m.per_second = median_of(rs, [](const auto& r) { return r.per_second; });
  m.per_cpu_second = median_of(rs, [](const auto& r) { return r.per_cpu_second; });
  return m;
}

int load(const settings& s) {
  asio::io_context resolving;
  tcp::resolver resolver(resolving);
  const tcp::endpoint resolved = resolver.resolve(s.target_host, std::to_string(s.target_port)).begin()->endpoint();
  std::vector<client_mode> order;
  for (unsigned i = 0; i < s.rounds; ++i) {
    // Each mode goes first in every other round: a machine that speeds up
    // or slows down through a run favours neither.
    const bool plain_first = i % 2 == 0;
    if (s.mode != client_mode::resilient && plain_first) order.push_back(client_mode::plain);
    if (s.mode != client_mode::plain) order.push_back(client_mode::resilient);
    if (s.mode != client_mode::resilient && !plain_first) order.push_back(client_mode::plain);
  }
  std::printf("http_load: %s:%u, %u users, %g s per round, %u round(s) each, one client thread\n",
              s.target_host.c_str(), s.target_port, s.concurrency, s.duration_s, s.rounds);
  std::vector<round_result> plain, resilient;
  std::vector<double> paired_cpu, paired_wall;  // resilient / plain, per round
  for (std::size_t i = 0; i < order.size(); ++i) {
    const round_result r = run_round(order[i], s, resolved);
    const std::string label = "round " + std::to_string(i / (s.mode == client_mode::both ? 2 : 1) + 1);
    print(label.c_str(), r);
    (order[i] == client_mode::plain ? plain : resilient).push_back(r);
    if (s.mode == client_mode::both && i % 2 == 1) {
      // The two modes of one round ran back to back, on the machine as it
      // was then: their ratio is the least disturbed by the host's noise.
      const round_result& p = plain.back();
      const round_result& q = resilient.back();
      if (p.per_cpu_second == 0 || p.per_second == 0) continue;  // a round with no request: no ratio
      paired_cpu.push_back(q.per_cpu_second / p.per_cpu_second);
      paired_wall.push_back(q.per_second / p.per_second);
      std::printf("%-16s resilient / plain: req/cpu-s %.3f, req/s %.3f\n", label.c_str(), paired_cpu.back(),
                  paired_wall.back());
    }
  }
  std::uint64_t errors = 0;
  bool empty_round = false;
  for (const auto* rs : {&plain, &resilient}) {
    if (rs->empty()) continue;
    const round_result m = median(*rs);
    print("median", m);
    errors += m.errors;
    for (const auto& r : *rs) empty_round = empty_round || r.requests == 0;
  }
  if (!plain.empty() && !resilient.empty()) {
    const round_result p = median(plain), r = median(resilient);
    std::printf("resilient / plain: req/cpu-s %.3f, req/s %.3f (median of the rounds' ratios; of the medians: "
                "%.3f, %.3f)\n",
                median_of(paired_cpu), median_of(paired_wall), r.per_cpu_second / p.per_cpu_second,
                r.per_second / p.per_second);
  }
  if (errors > 0) std::fprintf(stderr, "http_load: %llu request(s) failed\n", static_cast<unsigned long long>(errors));
  if (empty_round) std::fprintf(stderr, "http_load: a round completed no request\n");
  return errors == 0 && !empty_round ? 0 : 1;
}

int self(settings s) {
  load_server server(s);
  s.target_host = "127.0.0.1";
  s.target_port = server.port();
  std::printf("http_load: server (handler %s) on a thread of its own, port %u\n", name_of(s.handler), server.port());
  const int status = load(s);
  server.stop();
  std::printf("server: served %llu shed %llu\n", static_cast<unsigned long long>(server.served()),
              static_cast<unsigned long long>(server.shed()));
  return status;
}

constexpr const char* usage =
    "usage: http_load serve [--address A] [--port P] [--handler bare|guarded|server] [--max-concurrent N]\n"
    "                       [--threads T] [--handler-delay-ms D]\n"
    "       http_load client --target host:port [--concurrency C] [--duration S] [--mode plain|resilient|both]\n"
    "                        [--rounds R]\n"
    "                        [--breaker polly]\n"
    "       http_load [self] [--concurrency C] [--duration S] [--mode M] [--rounds R] [--handler H]\n"
    "                        [--max-concurrent N] [--handler-delay-ms D]\n";

}  // namespace

int main(int argc, char** argv) {
  const std::string_view first = argc > 1 ? argv[1] : "self";
  const bool named = first == "serve" || first == "client" || first == "self";
  const std::string_view command = named ? first : "self";
  try {
    const settings s = parse(command, argc, argv, named ? 2 : 1);
    if (command == "serve") return serve(s);
    if (command == "client") return load(s);
    return self(s);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "http_load: %s\n%s", e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_load: %s\n", e.what());
    return 1;
  }
}
