// Heap memory per waiting call, per stage. N calls are started on a fresh
// io_context and left suspended on an hour-long timer; glibc's statistics
// give the bytes they hold, compared with a plain coroutine asleep on the
// same timer (the op every other row wraps). Destroying the io_context must
// then give every byte back.
//
//   build/release/tests/bench/resilience_memory_bench [--calls N] [--only NAME] [--check-leaks]
#include <resilience/circuit_breaker.hpp>
#include <resilience/deadline.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/retry.hpp>
#include <resilience/timeout.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace asio = boost::asio;
using boost::system::error_code;
using namespace std::chrono_literals;

// ---- counting allocator --------------------------------------------------
// Asio allocates coroutine frames with aligned_alloc, which a replaced
// operator new never sees, so glibc's entry points are replaced and forward
// to its internal ones. From the start of a stage's run to the end of its
// io_context, every block is also kept in a table by address (open
// addressing, linear probing, deletion by backward shift) in memory of its
// own, so the blocks held by waiting calls, or left after shutdown, can be
// listed by size. One thread only, as the program is.
namespace {

struct block {
  void* p;
  std::size_t size;
  bool measured;  // allocated while the calls under measurement started
};
unsigned table_bits = 16;  // grown with --calls: 32 slots per call
std::size_t table_mask = (std::size_t{1} << table_bits) - 1;
block* table = nullptr;
std::size_t table_used = 0;
bool tracking = false, measuring = false, overflow = false;
std::size_t allocations = 0;

std::size_t home(const void* p) {
  return static_cast<std::size_t>((reinterpret_cast<std::uintptr_t>(p) * 0x9E3779B97F4A7C15ull) >> (64 - table_bits));
}

void track(void* p, std::size_t size) {
  ++allocations;
  if (!tracking || !p) return;
  if (table_used > table_mask / 2) {
    overflow = true;
    return;
  }
  std::size_t i = home(p);
  while (table[i].p) i = (i + 1) & table_mask;
  table[i] = {p, size, measuring};
  ++table_used;
}

void untrack(void* p) {
  if (!p || table_used == 0) return;
  std::size_t i = home(p);
  for (; table[i].p != p; i = (i + 1) & table_mask)
    if (!table[i].p) return;
  for (std::size_t j = (i + 1) & table_mask; table[j].p; j = (j + 1) & table_mask) {
    const std::size_t h = home(table[j].p);
    if (((j - h) & table_mask) >= ((j - i) & table_mask)) {  // i lies on j's probe path: move j up
      table[i] = table[j];
      i = j;
    }
  }
  table[i] = {};
  --table_used;
}

}  // namespace

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);

void* malloc(std::size_t n) {
  void* p = __libc_malloc(n);
  track(p, n);
  return p;
}
void* calloc(std::size_t n, std::size_t size) {
  void* p = __libc_calloc(n, size);
  track(p, n * size);
  return p;
}
void* realloc(void* old, std::size_t n) {
  untrack(old);
  void* p = __libc_realloc(old, n);
  track(p, n);
  return p;
}
void* memalign(std::size_t alignment, std::size_t n) {
  void* p = __libc_memalign(alignment, n);
  track(p, n);
  return p;
}
void* aligned_alloc(std::size_t alignment, std::size_t n) { return memalign(alignment, n); }
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  *out = memalign(alignment, n);
  return *out ? 0 : ENOMEM;
}
void free(void* p) {
  untrack(p);
  __libc_free(p);
}
}

namespace {

// Bytes handed out by malloc, chunk headers included; large blocks are mmapped.
long long in_use() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<long long>(m.uordblks + m.hblkhd);
}

// ---- the calls -----------------------------------------------------------
std::size_t waiting = 0, failures = 0;

asio::awaitable<error_code> sleeping_op() {
  asio::steady_timer timer(co_await asio::this_coro::executor, 1h);
  ++waiting;
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  co_return ec;
}
asio::awaitable<error_code> failing_op() {
  ++failures;
  co_return make_error_code(asio::error::connection_reset);
}

const auto sleep_in_backoff = resilience::retry_policy{}.max_attempts(2).backoff(resilience::backoff::constant(1h).with_jitter(resilience::jitter::none));
const auto retry_default = resilience::retry_policy{};
const auto one_hour = resilience::timeout(1h);
const auto two_hours = resilience::deadline_stage(2h);
const auto full_pipeline =
    resilience::pipeline(resilience::deadline_stage(2h), resilience::retry_policy{}.max_attempts(3), resilience::timeout(1h));
const auto pipeline_sleeping = resilience::pipeline(
    resilience::deadline_stage(2h), resilience::retry_policy{}.max_attempts(3).backoff(resilience::backoff::constant(1h).with_jitter(resilience::jitter::none)),
    resilience::timeout(1h));
const resilience::circuit_breaker breaker;

struct row {
  const char* name;
  const char* label;
  asio::awaitable<error_code> (*call)();
  bool fails_first;  // waits in co_retry's backoff, not in the op
};
const row rows[] = {
    {"baseline", "(a) timer wait (baseline)", [] { return sleeping_op(); }, false},
    {"retry-backoff", "(b) co_retry asleep in backoff", [] { return resilience::co_retry([] { return failing_op(); }, sleep_in_backoff); }, true},
    {"retry-op", "(c) co_retry, op waiting", [] { return resilience::co_retry([] { return sleeping_op(); }, retry_default); }, false},
    {"timeout", "(d) timeout(1h)", [] { return one_hour([] { return sleeping_op(); }); }, false},
    {"deadline", "(e) deadline_stage(2h)", [] { return two_hours([] { return sleeping_op(); }); }, false},
    {"pipeline", "(f) deadline+retry+timeout", [] { return full_pipeline([] { return sleeping_op(); }); }, false},
    {"breaker", "(g) circuit_breaker", [] { return breaker([] { return sleeping_op(); }); }, false},
    {"pipeline-backoff", "(h) pipeline asleep in backoff", [] { return pipeline_sleeping([] { return failing_op(); }); }, true},
};
constexpr std::size_t row_count = sizeof rows / sizeof rows[0];

struct result {
  bool ran = false, settled = false;
  double bytes = 0, allocs = 0;
  long long leak = 0;
  char frames[200] = "";
  char leaked[200] = "";  // the blocks left, by size
};
result results[row_count];  // static: printing must not allocate between the leak check's two readings

// Starts n calls from inside the loop, as a server does (Asio's per-thread
// frame cache is then in play), and runs until every call waits.
void start(asio::io_context& io, const row& r, std::size_t n) {
  io.restart();
  asio::post(io, [&io, &r, n] {
    for (std::size_t i = 0; i < n; ++i) asio::co_spawn(io, r.call(), asio::detached);
  });
  while (io.poll() > 0) {
  }
}

// The tracked blocks still held, by size, as "448 + 768 + 2x96" per call;
// sizes held by fewer than half the calls (shared structures growing) are
// summed apart.
void describe_blocks(bool measured_only, std::size_t n, char* out, std::size_t cap) {
  if (overflow) {
    std::snprintf(out, cap, "n/a: too many blocks to track");
    return;
  }
  struct bucket {
    std::size_t size, count;
  } sizes[64];
  std::size_t kinds = 0, shared = 0;
  for (std::size_t i = 0; i <= table_mask; ++i) {
    if (!table[i].p || (measured_only && !table[i].measured)) continue;
    std::size_t k = 0;
    while (k < kinds && sizes[k].size != table[i].size) ++k;
    if (k == kinds && kinds < 64) sizes[kinds++] = {table[i].size, 0};
    if (k < kinds) ++sizes[k].count;
  }
  std::sort(sizes, sizes + kinds, [](const bucket& a, const bucket& b) { return a.size > b.size; });
  std::size_t used = 0;
  const auto append = [&](const char* format, auto... args) {
    used += static_cast<std::size_t>(std::snprintf(out + used, cap - used, format, args...));
    used = std::min(used, cap - 1);
  };
  for (std::size_t k = 0; k < kinds; ++k) {
    const double per_call = static_cast<double>(sizes[k].count) / static_cast<double>(n);
    if (per_call < 0.5) {
      shared += sizes[k].size * sizes[k].count;
    } else if (const auto times = static_cast<unsigned>(per_call + 0.5); times > 1) {
      append("%s%ux%zu", used ? " + " : "", times, sizes[k].size);
    } else {
      append("%s%zu", used ? " + " : "", sizes[k].size);
    }
  }
  if (shared >= n) append(" (+%zu B/call shared)", shared / n);
}

void measure(std::size_t index, std::size_t n) {
  const row& r = rows[index];
  result& res = results[index];
  res.ran = true;
  {  // first use of each service and thread-local, so the leak check sees only the calls
    asio::io_context io;
    start(io, r, 16);
  }
  const long long at_start = in_use();
  tracking = true;
  {
    asio::io_context io;
    start(io, r, 64);  // warm-up: services, timer queues
    waiting = failures = 0;
    const long long before = in_use();
    const std::size_t allocs_before = allocations;
    measuring = true;
    start(io, r, n);
    measuring = false;
    res.bytes = static_cast<double>(in_use() - before) / static_cast<double>(n);
    res.allocs = static_cast<double>(allocations - allocs_before) / static_cast<double>(n);
    res.settled = r.fails_first ? failures == n : waiting == n;
    describe_blocks(true, n, res.frames, sizeof res.frames);
  }  // frees every frame without resuming it
  tracking = false;
  res.leak = in_use() - at_start;
  if (res.leak > 0) describe_blocks(false, 1, res.leaked, sizeof res.leaked);
  madvise(table, sizeof(block) << table_bits, MADV_DONTNEED);  // empties the table
  table_used = 0;
  overflow = false;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc's per-thread cache (tcache) keeps freed chunks that mallinfo2 still
  // counts as in use, a few KB of noise that would hide a small leak: run
  // without it. Chunk sizes, and so the figures, stay the same.
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (!tunables || !std::strstr(tunables, "glibc.malloc.tcache_count=0")) {
    char value[512];
    std::snprintf(value, sizeof value, "%s%sglibc.malloc.tcache_count=0", tunables ? tunables : "", tunables ? ":" : "");
    setenv("GLIBC_TUNABLES", value, 1);
    execv("/proc/self/exe", argv);  // on failure, run with the cache
  }
  std::size_t calls = 100000;
  const char* only = nullptr;
  bool check_leaks = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      calls = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (std::strcmp(argv[i], "--check-leaks") == 0) {
      check_leaks = true;
    } else {
      std::fprintf(stderr, "usage: %s [--calls N] [--only NAME] [--check-leaks]\nNAME:", argv[0]);
      for (const row& r : rows) std::fprintf(stderr, " %s", r.name);
      std::fprintf(stderr, "\n");
      return 2;
    }
  }
  if (calls == 0 || (only && std::none_of(rows, rows + row_count, [&](const row& r) { return std::strcmp(r.name, only) == 0; }))) {
    std::fprintf(stderr, "--calls must be positive and --only one of the stage names (--help lists them)\n");
    return 2;
  }
  while ((std::size_t{1} << table_bits) < 32 * calls && table_bits < 40) ++table_bits;
  table_mask = (std::size_t{1} << table_bits) - 1;
  table = static_cast<block*>(mmap(nullptr, sizeof(block) << table_bits, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (table == MAP_FAILED) return 2;

  std::printf("heap per waiting call: %zu calls per stage, all suspended at once, each stage on its own io_context\n"
              "(bytes: glibc's in-use count, chunk headers included; frames: sizes requested, blocks held per call)\n\n",
              calls);
  std::printf("%-31s %10s %8s %11s  %s\n", "stage", "bytes/call", "extra", "allocs/call", "frame sizes");
  std::fflush(stdout);
  for (std::size_t i = 0; i < row_count; ++i) {
    if (only && i != 0 && std::strcmp(rows[i].name, only) != 0) continue;  // the baseline always runs
    measure(i, calls);
    const result& res = results[i];
    char extra[16] = "-";
    if (i != 0) std::snprintf(extra, sizeof extra, "%+.0f", res.bytes - results[0].bytes);
    std::printf("%-31s %10.0f %8s %11.2f  %s%s\n", rows[i].label, res.bytes, extra, res.allocs, res.frames,
                res.settled ? "" : "  [NOT ALL CALLS WAITING]");
    std::fflush(stdout);
  }

  std::printf("\ngoals (extra over the baseline):\n");
  const struct {
    std::size_t row;
    double limit;
  } goals[] = {{1, 512}, {5, 1024}, {7, 1024}};
  for (const auto& g : goals) {
    if (!results[g.row].ran) continue;
    const double extra = results[g.row].bytes - results[0].bytes;
    std::printf("  %-31s <= %4.0f B: %+6.0f B  %s\n", rows[g.row].label, g.limit, extra, extra <= g.limit ? "PASS" : "OVER");
  }

  bool leaked = false;
  for (std::size_t i = 0; i < row_count; ++i) {
    if (!results[i].ran || results[i].leak <= 0) continue;
    leaked = true;
    std::printf("LEAK %s: %lld B left after its io_context was destroyed (%.1f B/call): %s\n", rows[i].label,
                results[i].leak, static_cast<double>(results[i].leak) / static_cast<double>(calls), results[i].leaked);
  }
  if (!leaked) std::printf("shutdown: every stage gave back all its memory\n");
  return leaked && check_leaks ? 1 : 0;
}
