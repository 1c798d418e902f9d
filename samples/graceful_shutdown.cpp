// graceful_shutdown: Ctrl-C stops every call in flight, cleanly.
//
//   graceful_shutdown [--clients N] [--signal-after MS]
//
// Many clients call a flaky backend through one pipeline (deadline, retry,
// attempt timeout). Each client runs under a cancellation signal of its own,
// bound to its co_spawn. On SIGINT or SIGTERM the signal_set handler emits
// terminal cancellation on all of them: whatever each call is doing — an
// attempt, a backoff wait, a timeout winding down — it ends at once with
// operation_aborted, every started attempt finishes exactly once, and the
// program exits when the io_context runs out of work. --signal-after raises
// SIGINT by itself after MS milliseconds, so the sample can run unattended.
#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <random>
#include <string_view>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;

namespace {

struct tally {
  long attempts_started = 0;
  long attempts_finished = 0;
  long calls_ok = 0;
  long calls_failed = 0;
  long calls_aborted = 0;
  int clients_stopped = 0;
};

// A backend that answers in 20 to 400 ms and fails one call in three.
asio::awaitable<boost::system::result<int>> flaky_backend(tally& t, std::minstd_rand& rng) {
  ++t.attempts_started;
  asio::steady_timer work(co_await asio::this_coro::executor, std::chrono::milliseconds(20 + rng() % 380));
  auto [ec] = co_await work.async_wait(asio::as_tuple(asio::use_awaitable));
  ++t.attempts_finished;
  if (ec) co_return ec;
  if (rng() % 3 == 0) co_return error_code(asio::error::connection_reset);
  co_return 200;
}

template <class Pipeline>
asio::awaitable<void> client(const Pipeline& call, tally& t, unsigned seed) {
  std::minstd_rand rng(seed);
  for (;;) {
    const auto answer = co_await call([&] { return flaky_backend(t, rng); });
    if (answer) {
      ++t.calls_ok;
    } else if (answer.error() == asio::error::operation_aborted) {
      ++t.calls_aborted;
      co_return;  // stopped from outside: final
    } else {
      ++t.calls_failed;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int clients = 200;
  long signal_after_ms = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--clients" && i + 1 < argc) {
      clients = std::atoi(argv[++i]);
    } else if (arg == "--signal-after" && i + 1 < argc) {
      signal_after_ms = std::atol(argv[++i]);
    } else {
      fmt::print(stderr, "usage: graceful_shutdown [--clients N] [--signal-after MS]\n");
      return 2;
    }
  }
  if (clients < 1) {
    fmt::print(stderr, "graceful_shutdown: --clients must be at least 1\n");
    return 2;
  }

  asio::io_context io;
  const auto call = resilience::pipeline(
      resilience::deadline_stage(5s),
      resilience::retry_policy{}.max_attempts(5).backoff(resilience::backoff::exponential(100ms, 2.0, 2s)),
      resilience::timeout(300ms));

  tally t;
  std::deque<asio::cancellation_signal> stop(static_cast<std::size_t>(clients));  // stable addresses
  for (int c = 0; c < clients; ++c) {
    asio::co_spawn(io, client(call, t, static_cast<unsigned>(c + 1)),
                   asio::bind_cancellation_slot(stop[static_cast<std::size_t>(c)].slot(),
                                                [&t](std::exception_ptr e) {
                                                  ++t.clients_stopped;
                                                  if (e) fmt::print(stderr, "a client ended with an exception\n");
                                                }));
  }

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const error_code& ec, int number) {
    if (ec) return;
    fmt::print("\n{} received: stopping {} clients ({} attempts in flight)\n",
               number == SIGINT ? "SIGINT" : "SIGTERM", clients, t.attempts_started - t.attempts_finished);
    for (auto& s : stop) s.emit(asio::cancellation_type::terminal);
  });
  asio::steady_timer self_signal(io);
  if (signal_after_ms >= 0) {
    self_signal.expires_after(std::chrono::milliseconds(signal_after_ms));
    self_signal.async_wait([](const error_code& ec) {
      if (!ec) std::raise(SIGINT);
    });
  } else {
    fmt::print("{} clients calling a flaky backend; press Ctrl-C to stop them\n", clients);
  }

  io.run();

  const bool clean = t.clients_stopped == clients && t.attempts_started == t.attempts_finished &&
                     t.calls_aborted == clients;
  fmt::print("clients stopped: {}/{}\n"
             "calls: {} ok, {} failed after retries, {} aborted by the shutdown\n"
             "attempts: {} started, {} finished\n"
             "{}\n",
             t.clients_stopped, clients, t.calls_ok, t.calls_failed, t.calls_aborted, t.attempts_started,
             t.attempts_finished, clean ? "clean shutdown: every call completed exactly once"
                                        : "NOT CLEAN: some call did not complete as it should");
  return clean ? 0 : 1;
}
