// What a call through resilience::redis::fleet_limiter costs, against the
// local resilience::rate_limiter and a bare co_await. A plain program, not a
// timing loop: N calls, one after the other, in one coroutine on one
// io_context, every limiter with a quota no call can exhaust (so every call
// is admitted, and a round trip to Redis is made only when the lease is
// spent). The Redis limiter is measured with max_lease 1000 and 100 (a lease
// lifetime of an hour, so no permit expires), and with max_lease 1, one round
// trip per call, on fewer calls: what leasing saves. Each variant runs three
// times after a warm-up (which also grows the lease to its maximum); the
// median is printed, with the round trips to Redis per 1000 calls.
//
//   build/release/tests/bench/redis_limiter_bench [--calls N] [--redis-socket PATH]
//
// Without --redis-socket it starts a redis-server of its own on a Unix socket
// in a temporary directory and stops it at the end. Exits non-zero if a call
// was not admitted or Redis could not be reached.
#include <resilience/rate_limiter.hpp>
#include <resilience/redis/fleet_limiter.hpp>
#include <resilience/testing/redis_server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

namespace asio = boost::asio;
namespace redis = resilience::redis;
using namespace std::chrono_literals;
using resilience::error_code;
using sclock = std::chrono::steady_clock;

namespace {

// ---- the calls ------------------------------------------------------------------

// The op every variant calls: as cheap as an awaitable can be; the counter
// keeps the optimiser from folding it away.
volatile std::uint64_t op_calls = 0;
asio::awaitable<error_code> op() {
  op_calls = op_calls + 1;
  co_return error_code{};
}

struct run_result {
  double ns_per_call = 0;
  std::uint64_t admitted = 0;
  std::uint64_t round_trips = 0;
};

// `warm` unmeasured calls, then `n` measured, through `call`, in one
// coroutine on a fresh io_context. `round_trips` reads the limiter's count.
template <class Call>
run_result measure(std::uint64_t warm, std::uint64_t n, Call call,
                   const std::function<std::uint64_t()>& round_trips) {
  asio::io_context io;
  run_result r;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (std::uint64_t i = 0; i < warm; ++i) co_await call();
        const std::uint64_t trips = round_trips();
        const auto start = sclock::now();
        std::uint64_t admitted = 0;
        for (std::uint64_t i = 0; i < n; ++i) admitted += !(co_await call());
        const auto took = sclock::now() - start;
        r.ns_per_call = std::chrono::duration<double, std::nano>(took).count() / static_cast<double>(n);
        r.admitted = admitted;
        r.round_trips = round_trips() - trips;
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  return r;
}

// The median of `repeats` runs; every run's calls must all be admitted.
struct row {
  std::string name;
  std::uint64_t calls = 0;
  double ns = 0, lo = 0, hi = 0;
  double trips_per_1000 = 0;
  bool all_admitted = true;
};

template <class Run>
row repeat(std::string name, std::uint64_t n, int repeats, Run run) {
  std::vector<double> ns;
  row out{std::move(name), n};
  std::uint64_t trips = 0;
  for (int i = 0; i < repeats; ++i) {
    const run_result r = run();
    ns.push_back(r.ns_per_call);
    trips += r.round_trips;
    out.all_admitted = out.all_admitted && r.admitted == n;
  }
  std::sort(ns.begin(), ns.end());
  out.ns = ns[ns.size() / 2];
  out.lo = ns.front();
  out.hi = ns.back();
  out.trips_per_1000 = 1000.0 * static_cast<double>(trips) / static_cast<double>(n * static_cast<std::uint64_t>(repeats));
  return out;
}

std::uint64_t no_round_trips() { return 0; }

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t calls = 200'000;
  std::string socket;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      calls = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--redis-socket") == 0 && i + 1 < argc) {
      socket = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--calls N] [--redis-socket PATH]\n", argv[0]);
      return 2;
    }
  }
  if (calls < 100) {
    std::fprintf(stderr, "redis_limiter_bench: --calls must be at least 100\n");
    return 2;
  }
  std::optional<resilience::testing::redis_server> child;
  if (socket.empty()) {
    try {
      child.emplace();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "redis_limiter_bench: %s\n", e.what());
      return 1;
    }
    socket = child->socket();
  }
  const auto connection = redis::connection_options{}.unix_socket(socket);
  constexpr int repeats = 3;
  const std::uint64_t warm = std::max<std::uint64_t>(2000, calls / 100);
  const std::uint64_t per_call_trip_calls = std::min<std::uint64_t>(calls, 20'000);

  // A quota no run exhausts: the Redis script's most, a token a microsecond,
  // with the largest burst (2^31 - 1 saved up: the bucket starts full).
  // A key of each run's own: each starts with a full bucket.
  int keys = 0;
  const auto redis_options = [&](std::uint32_t max_lease) {
    return redis::fleet_limiter_options{}
        .key("bench-" + std::to_string(::getpid()) + "-" + std::to_string(++keys))
        .token_bucket(1'000'000, 1s, 0x7fffffff)
        .max_lease(max_lease)
        .lease_lifetime(1h);
  };

  std::vector<row> rows;
  rows.push_back(repeat("plain co_await op()", calls, repeats, [&] {
    return measure(warm, calls, [] { return op(); }, no_round_trips);
  }));
  rows.push_back(repeat("resilience::rate_limiter (local)", calls, repeats, [&] {
    resilience::rate_limiter limiter{resilience::rate_limiter_options{}.token_bucket(1'000'000'000, 1s, 1'000'000'000)};
    return measure(warm, calls, [&] { return limiter([] { return op(); }); }, no_round_trips);
  }));
  for (const std::uint32_t lease : {1000u, 100u, 1u}) {
    const std::uint64_t n = lease == 1 ? per_call_trip_calls : calls;
    const std::uint64_t w = lease == 1 ? 200 : warm;
    rows.push_back(repeat("redis::fleet_limiter, max_lease " + std::to_string(lease), n, repeats, [&] {
      asio::io_context io;  // the limiter's: its connection lives here
      std::optional<run_result> result;
      {
        redis::fleet_limiter limiter{io.get_executor(), connection, redis_options(lease)};
        // The calls run on this io_context too: measure() makes its own, so
        // run them here instead.
        asio::co_spawn(
            io,
            [&]() -> asio::awaitable<void> {
              const auto call = [&] { return limiter([] { return op(); }); };
              for (std::uint64_t i = 0; i < w; ++i) co_await call();
              const std::uint64_t trips = limiter.stats().round_trips;
              const auto start = sclock::now();
              std::uint64_t admitted = 0;
              for (std::uint64_t i = 0; i < n; ++i) admitted += !(co_await call());
              const auto took = sclock::now() - start;
              result = run_result{std::chrono::duration<double, std::nano>(took).count() / static_cast<double>(n),
                                  admitted, limiter.stats().round_trips - trips};
              io.stop();  // the connection's read wait would keep run() going
            },
            [](std::exception_ptr e) {
              if (e) std::rethrow_exception(e);
            });
        io.run();
      }  // the limiter goes before its io_context, with no thread running it
      if (!result) {
        std::fprintf(stderr, "redis_limiter_bench: the run did not finish\n");
        std::exit(1);
      }
      return *result;
    }));
  }

  std::printf("redis_limiter_bench: %llu calls per run (max_lease 1: %llu), one coroutine on one io_context, "
              "Redis on a Unix socket%s;\nmedian of %d runs (min-max), every quota out of reach\n\n",
              static_cast<unsigned long long>(calls), static_cast<unsigned long long>(per_call_trip_calls),
              child ? " (a redis-server of its own)" : "", repeats);
  std::printf("%-36s %10s %17s %11s %9s %22s\n", "", "ns/call", "(min-max)", "x baseline", "x local",
              "round trips/1000 calls");
  const double baseline = rows[0].ns, local = rows[1].ns;
  bool ok = true;
  for (const auto& r : rows) {
    std::printf("%-36s %10.1f %17s %11.2f %9.2f %22.2f\n", r.name.c_str(), r.ns,
                ("(" + std::to_string(static_cast<long>(r.lo)) + "-" + std::to_string(static_cast<long>(r.hi)) + ")").c_str(),
                r.ns / baseline, r.ns / local, r.trips_per_1000);
    if (!r.all_admitted) {
      std::fprintf(stderr, "redis_limiter_bench: %s: not every call was admitted\n", r.name.c_str());
      ok = false;
    }
  }
  const double saved = rows[4].ns / rows[2].ns;
  std::printf("\nleasing: max_lease 1000 costs %.1f ns a call against %.0f ns with a round trip per call "
              "(%.0fx less)\n", rows[2].ns, rows[4].ns, saved);
  return ok ? 0 : 1;
}
