// fleet: one rate limit shared by four replicas through Redis, and what the
// limiter does when Redis goes away and comes back.
//
//   fleet [--seconds N] [--quota Q] [--redis-socket PATH | --redis-port P [--redis-host H]]
//         [--outage A-B | --outage none] [--svg FILE] [--report-json FILE]
//
// Four replicas, each a thread with its own io_context and its own
// resilience::redis::fleet_limiter (its own connection), share one key: Q calls
// a second for the whole fleet (200 by default), a burst of Q / 10, the
// default lease (a tenth of the burst) and no waiting for a permit. The load
// is uneven: replica i runs 4 (i + 1) callers, each calling through its
// limiter in a loop; a call the limiter turns away (rate_limited) backs off
// 2 to 6 ms. The op the limiter admits is the "server": it only counts the
// call in a per-second, per-replica counter, with its time.
//
// Without --redis-socket or --redis-port the program starts a redis-server of
// its own on a Unix socket in a temporary directory (no persistence), kills
// it at A s and starts it again at B s (--outage, 8-12 by default): in
// between, each limiter falls back to its local share (Q / replicas), then
// resumes the shared quota once its probe (the script for one permit, which
// its calls send on a jittered schedule) runs on Redis again.
// With a Redis of your own there is no outage.
//
// It prints a table, one row a second, then a summary, and exits 1 unless:
//   - no second, the first and the outage's included, admitted more than the
//     documented bound (quota + burst + replicas x max_lease), and over the
//     whole run the fleet admitted the quota within 5% plus the leases'
//     overshoot (replicas x max_lease);
//   - over the seconds Redis was up all through, the fleet made at most one
//     round trip to Redis per admitted call;
//   - during the outage no gap between two admitted calls (across the fleet)
//     was longer than 1 s;
//   - every replica was back on the shared quota within 2 s of Redis's return.
#include <resilience/error.hpp>
#include <resilience/redis/fleet_limiter.hpp>
#include <resilience/testing/redis_server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

namespace asio = boost::asio;
namespace redis = resilience::redis;
using namespace std::chrono_literals;
using resilience::error_code;
using sclock = std::chrono::steady_clock;

namespace {

constexpr int replicas = 4;

double seconds_between(sclock::time_point from, sclock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::atomic<bool> interrupted{false};
extern "C" void on_signal(int) { interrupted.store(true); }

// ---- the replicas ------------------------------------------------------------

struct settings {
  int seconds = 20;
  std::uint32_t quota = 200;
  std::string socket;  // a Redis of the user's own...
  std::string host = "127.0.0.1";
  int port = 0;        // ...or over TCP
  bool outage = true;
  bool outage_given = false;
  double outage_from = 8, outage_to = 12;
  std::string svg, json;

  bool own_redis() const { return socket.empty() && port == 0; }
  std::uint32_t burst() const { return std::max<std::uint32_t>(1, quota / 10); }
};

// What one replica counted. The counters are written by the replica's thread
// and read live by the main one; the times only after the run.
struct replica {
  int index = 0;
  int callers = 0;
  std::unique_ptr<std::atomic<std::uint64_t>[]> admitted;     // per second
  std::unique_ptr<std::atomic<std::uint64_t>[]> round_trips;  // per second, sampled at its end
  std::vector<sclock::time_point> admitted_at;                // every admitted call
  std::uint64_t other_errors = 0;

  struct mode_change {
    bool fell_back;  // else resumed
    sclock::time_point at;
    error_code why;
  };
  mutable std::mutex events_mutex;
  std::vector<mode_change> events;
  struct failure {
    sclock::time_point at;
    error_code why;
    bool falling_back;  // the limiter's state when it was reported
  };
  std::vector<failure> failures;  // round_trip_failed, every one
  redis::limiter_stats final_stats;
  const redis::fleet_limiter* limiter = nullptr;  // while it runs

  std::vector<mode_change> changes() const {
    std::lock_guard lock(events_mutex);
    return events;
  }

  // The limiter's fall-backs, returns and failed round trips, as its calls
  // report them.
  struct recorder final : resilience::event_sink {
    explicit recorder(replica& r) : self(r) {}
    replica& self;
    void on_event(const resilience::event& e) noexcept override {
      using kind = resilience::event_kind;
      if (e.kind != kind::fleet_round_trip_failed && e.kind != kind::fleet_fell_back && e.kind != kind::fleet_resumed)
        return;
      std::lock_guard lock(self.events_mutex);
      if (e.kind == kind::fleet_round_trip_failed)
        self.failures.push_back({sclock::now(), e.error, self.limiter && self.limiter->falling_back()});
      else
        self.events.push_back({e.kind == kind::fleet_fell_back, sclock::now(), e.error});
    }
  } sink{*this};
};

asio::awaitable<error_code> count_admitted(replica& r, sclock::time_point t0, int slots) {
  const auto now = sclock::now();
  const auto second = (now - t0) / 1s;
  if (second >= 0 && second < slots) r.admitted[static_cast<std::size_t>(second)].fetch_add(1, std::memory_order_relaxed);
  r.admitted_at.push_back(now);
  co_return error_code{};
}

asio::awaitable<void> caller(const redis::fleet_limiter& limiter, replica& r, sclock::time_point t0,
                             sclock::time_point end, int slots, unsigned seed) {
  asio::steady_timer pause{co_await asio::this_coro::executor};
  pause.expires_at(t0);
  co_await pause.async_wait(asio::use_awaitable);
  std::minstd_rand random{seed};
  std::uniform_int_distribution<int> backoff_us{2000, 6000};
  while (sclock::now() < end && !interrupted.load(std::memory_order_relaxed)) {
    resilience::context ctx;
    ctx.events = &r.sink;
    const error_code ec = co_await limiter([&] { return count_admitted(r, t0, slots); }, ctx);
    if (!ec) continue;
    if (ec != resilience::error::rate_limited) ++r.other_errors;
    pause.expires_after(std::chrono::microseconds(backoff_us(random)));
    co_await pause.async_wait(asio::use_awaitable);
  }
}

// Round trips made in each second, read at the second's end.
asio::awaitable<void> sampler(const redis::fleet_limiter& limiter, replica& r, sclock::time_point t0, int slots) {
  asio::steady_timer tick{co_await asio::this_coro::executor};
  std::uint64_t before = 0;
  for (int k = 0; k < slots; ++k) {
    tick.expires_at(t0 + std::chrono::seconds(k + 1));
    co_await tick.async_wait(asio::use_awaitable);
    const std::uint64_t now = limiter.stats().round_trips;
    r.round_trips[static_cast<std::size_t>(k)].store(now - before, std::memory_order_relaxed);
    before = now;
  }
}

void run_replica(replica& r, const redis::connection_options& connection, const redis::fleet_limiter_options& options,
                 sclock::time_point t0, int slots) {
  asio::io_context io;
  {
    redis::fleet_limiter limiter{io.get_executor(), connection, options};
    r.limiter = &limiter;
    const auto end = t0 + std::chrono::seconds(slots);
    // Stopped once every caller is done and the last second sampled (or at
    // once on Ctrl-C): the connection's read wait would keep run() going.
    int callers = r.callers;
    bool sampled = false;
    for (int c = 0; c < r.callers; ++c)
      asio::co_spawn(io, caller(limiter, r, t0, end, slots, static_cast<unsigned>(1000 * r.index + c + 1)),
                     [&](std::exception_ptr e) {
                       if (e) ++r.other_errors;
                       if (--callers == 0 && (sampled || interrupted.load())) io.stop();
                     });
    asio::co_spawn(io, sampler(limiter, r, t0, slots), [&](std::exception_ptr) {
      sampled = true;
      if (callers == 0) io.stop();
    });
    io.run();
    r.final_stats = limiter.stats();
    r.limiter = nullptr;
  }  // the limiter goes before its io_context, with no thread running it
}

// ---- what happened, second by second -------------------------------------------

enum class state { up, down, transition };

struct timeline {
  sclock::time_point t0;
  std::optional<sclock::time_point> killed_at, back_at;

  // The fraction of second k during which Redis did not run.
  double down_fraction(int k, sclock::time_point now) const {
    if (!killed_at) return 0;
    const double a = seconds_between(t0, *killed_at);
    const double b = back_at ? seconds_between(t0, *back_at) : seconds_between(t0, now);
    const double from = std::max<double>(k, a), to = std::min<double>(k + 1, b);
    return std::max(0.0, to - from);
  }
};

// Whether a replica relied on its fallback at any time in [from, to): it was
// falling back at `from`, or fell back before `to`.
bool fell_back_within(const std::vector<replica::mode_change>& changes, sclock::time_point from, sclock::time_point to) {
  bool at_from = false;
  for (const auto& c : changes) {
    if (c.at < from) {
      at_from = c.fell_back;
    } else if (c.at < to) {
      if (c.fell_back) return true;
    } else {
      break;
    }
  }
  return at_from;
}

// When the last replica went back to the shared quota after Redis returned
// (`now` if one has not yet).
std::optional<sclock::time_point> all_resumed(const std::vector<std::unique_ptr<replica>>& fleet,
                                              const timeline& tl, sclock::time_point now) {
  if (!tl.back_at) return std::nullopt;
  sclock::time_point last = *tl.back_at;
  for (const auto& r : fleet) {
    std::optional<sclock::time_point> resumed;
    for (const auto& c : r->changes()) {
      if (!c.fell_back && c.at >= *tl.back_at) {
        resumed = c.at;
        break;
      }
    }
    last = std::max(last, resumed.value_or(now));
  }
  return last;
}

struct row {
  std::array<std::uint64_t, replicas> admitted{};
  std::uint64_t total = 0;
  std::uint64_t round_trips = 0;
  int falling_back = 0;  // replicas that used their fallback in this second
  std::array<bool, replicas> fell_back{};  // which
  double down = 0;       // fraction of the second Redis was down
  state what = state::up;
};

row make_row(const std::vector<std::unique_ptr<replica>>& fleet, const timeline& tl, int k, sclock::time_point now) {
  row out;
  const auto from = tl.t0 + std::chrono::seconds(k), to = from + 1s;
  for (const auto& r : fleet) {
    const auto i = static_cast<std::size_t>(r->index);
    out.admitted[i] = r->admitted[static_cast<std::size_t>(k)].load(std::memory_order_relaxed);
    out.total += out.admitted[i];
    out.round_trips += r->round_trips[static_cast<std::size_t>(k)].load(std::memory_order_relaxed);
    out.fell_back[i] = fell_back_within(r->changes(), from, to);
    out.falling_back += out.fell_back[i];
  }
  out.down = tl.down_fraction(k, now);
  // Down: Redis away (nearly) all the second. A transition: Redis away part
  // of it, or back but some replica not yet on the shared quota again. A
  // replica falling back while Redis runs does not make a second a
  // transition: that is judged with the rest.
  const auto resumed = all_resumed(fleet, tl, now);
  if (out.down >= 0.95)
    out.what = state::down;
  else if (out.down > 0 || (tl.back_at && resumed && from <= *resumed && to > *tl.back_at))
    out.what = state::transition;
  return out;
}

std::string_view label(const row& r) {
  switch (r.what) {
    case state::up: return "up";
    case state::down: return "down";
    case state::transition: return r.down > 0 ? "partly down" : "resuming";
  }
  return "";
}

// ---- the chart ---------------------------------------------------------------

// An axis from 0 to at least v: a step of 1, 2, 2.5 or 5 times a power of
// ten, at most four of them.
struct axis {
  double top, step;
};
axis nice_axis(double v) {
  v = std::max(v, 1.0);
  const double power = std::pow(10.0, std::floor(std::log10(v / 4)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    const double step = m * power;
    if (4 * step >= v) return {std::ceil(v / step) * step, step};
  }
  return {v, v / 4};
}

struct chart_data {
  const settings& s;
  std::vector<row> rows;
  std::vector<int> callers;
  std::optional<double> down_from, down_to, resumed_by;  // seconds since t0
  std::uint32_t bound = 0;                                 // the documented per-second bound
};

std::string svg_chart(const chart_data& d) {
  const int n = static_cast<int>(d.rows.size());
  constexpr double width = 1060, left = 60, right = 270, top1 = 70, panel1_h = 230;
  constexpr double top2 = 390, panel2_h = 130, gap = 24, height = 560;
  const double plot_w = width - left - right;
  const double small_w = (width - left - 20 - gap * (replicas - 1)) / replicas;
  const double span = std::max(n, 1);

  std::uint64_t total_max = d.bound, replica_max = d.s.quota / replicas;
  for (const auto& r : d.rows) {
    total_max = std::max(total_max, r.total);
    for (auto a : r.admitted) replica_max = std::max(replica_max, a);
  }
  const axis a1 = nice_axis(static_cast<double>(total_max) * 1.05);
  const axis a2 = nice_axis(static_cast<double>(replica_max) * 1.05);
  const double y1max = a1.top, y2max = a2.top;

  std::string out = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='12'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='{}' y='24' font-size='15'>Calls admitted per second: {} replicas sharing {}/s through Redis "
      "(burst {}, lease up to {})</text>\n",
      width, height, left, replicas, d.s.quota, d.s.burst(), std::max<std::uint32_t>(1, d.s.burst() / 10));

  // One panel: the outage behind, axes, ticks, a bar a second.
  // `value(row)`: the bar's height, and whether it was (partly) the fallback's.
  auto panel = [&](double x0, double y0, double w, double h, const axis& ax, std::string_view title, int x_every,
                   auto value) {
    const double ymax = ax.top;
    auto x = [&](double sec) { return x0 + w * sec / span; };
    if (d.down_from) {
      const double to = d.down_to.value_or(span);
      out += fmt::format("<rect x='{:.1f}' y='{}' width='{:.1f}' height='{}' fill='#fbe3e3'/>\n", x(*d.down_from), y0,
                         x(to) - x(*d.down_from), h);
      if (d.down_to && d.resumed_by && *d.resumed_by > *d.down_to)
        out += fmt::format("<rect x='{:.1f}' y='{}' width='{:.1f}' height='{}' fill='#fdf0d8'/>\n", x(*d.down_to), y0,
                           x(*d.resumed_by) - x(*d.down_to), h);
      out += fmt::format("<text x='{:.1f}' y='{}' fill='#b03030' font-size='11'>Redis down</text>\n",
                         x(*d.down_from) + 3, y0 + 12);
    }
    out += fmt::format("<text x='{}' y='{}' font-size='13'>{}</text>\n", x0, y0 - 8, title);
    out += fmt::format("<line x1='{0}' y1='{1}' x2='{0}' y2='{2}' stroke='black'/>\n", x0, y0, y0 + h);
    out += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' stroke='black'/>\n", x0, y0 + h, x0 + w);
    for (double v = 0; v <= ymax + ax.step / 2; v += ax.step) {
      const double yy = y0 + h * (1 - v / ymax);
      out += fmt::format("<text x='{:.1f}' y='{:.1f}' text-anchor='end' font-size='11'>{:g}</text>\n", x0 - 5,
                         yy + 4, v);
      if (v > 0)
        out += fmt::format("<line x1='{}' y1='{:.1f}' x2='{}' y2='{:.1f}' stroke='#eee'/>\n", x0, yy, x0 + w, yy);
    }
    for (int sec = 0; sec <= n; sec += x_every)
      out += fmt::format("<text x='{:.1f}' y='{}' text-anchor='middle' font-size='11'>{}s</text>\n", x(sec),
                         y0 + h + 14, sec);
    const double bar = w / span;
    for (int k = 0; k < n; ++k) {
      const auto [count, fell_back] = value(d.rows[static_cast<std::size_t>(k)]);
      const double v = std::min<double>(static_cast<double>(count), ymax);
      const double bh = h * v / ymax;
      const char* fill = fell_back ? "#e3872d" : "#1f77b4";
      out += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'/>\n", x(k) + bar * 0.15,
                         y0 + h - bh, bar * 0.7, bh, fill);
    }
  };
  auto hline = [&](double x0, double y0, double w, double h, double ymax, double v, const char* dash,
                   const std::string& text) {
    const double yy = y0 + h * (1 - std::min(v, ymax) / ymax);
    out += fmt::format("<line x1='{0}' y1='{1:.1f}' x2='{2}' y2='{1:.1f}' stroke='#444' stroke-dasharray='{3}'/>\n",
                       x0, yy, x0 + w, dash);
    out += fmt::format("<text x='{:.1f}' y='{:.1f}' fill='#444' font-size='11'>{}</text>\n", x0 + w + 4, yy + 4, text);
  };

  panel(left, top1, plot_w, panel1_h, a1, "The fleet: total admitted per second", n > 30 ? 5 : 2,
        [](const row& r) { return std::pair{r.total, r.falling_back > 0}; });
  hline(left, top1, plot_w, panel1_h, y1max, d.s.quota, "6 4", fmt::format("quota {}/s", d.s.quota));
  hline(left, top1, plot_w, panel1_h, y1max, d.bound, "2 3", fmt::format("bound {}/s", d.bound));

  const double share = static_cast<double>(d.s.quota) / replicas;
  for (int i = 0; i < replicas; ++i) {
    const double x0 = left + (small_w + gap) * i;
    panel(x0, top2, small_w, panel2_h, a2, fmt::format("replica {} ({} callers)", i + 1, d.callers[static_cast<std::size_t>(i)]),
          n >= 20 ? 10 : 5, [i](const row& r) {
            const auto at = static_cast<std::size_t>(i);
            return std::pair{r.admitted[at], r.fell_back[at]};
          });
    const double yy = top2 + panel2_h * (1 - std::min(share, y2max) / y2max);
    out += fmt::format("<line x1='{0}' y1='{1:.1f}' x2='{2:.1f}' y2='{1:.1f}' stroke='#444' stroke-dasharray='6 4'/>\n",
                       x0, yy, x0 + small_w);
  }

  // The legend, right of the fleet's panel.
  const double lx = left + plot_w + 95, ly = top1 + 10;
  const auto key = [&](int line, const char* fill, std::string_view text) {
    out += fmt::format("<rect x='{}' y='{}' width='14' height='10' fill='{}'/><text x='{}' y='{}'>{}</text>\n", lx,
                       ly + 20 * line, fill, lx + 20, ly + 20 * line + 9, text);
  };
  key(0, "#1f77b4", "on the shared quota");
  key(1, "#e3872d", "on the fallback, in part");
  key(2, "#fbe3e3", "Redis down");
  key(3, "#fdf0d8", "until all resumed");
  out += fmt::format("<text x='{}' y='{}' font-size='11' fill='#444'>dashed: quota; dotted:</text>\n", lx, ly + 100);
  out += fmt::format("<text x='{}' y='{}' font-size='11' fill='#444'>quota + burst + leases</text>\n", lx, ly + 114);
  out += fmt::format("<text x='{}' y='{}' font-size='11' fill='#444'>replica panels, dashed:</text>\n", lx, ly + 138);
  out += fmt::format("<text x='{}' y='{}' font-size='11' fill='#444'>the local share, {:.0f}/s</text>\n", lx, ly + 152,
                     share);
  out += fmt::format("<text x='{}' y='{}' font-size='13'>Each replica, admitted per second (same scale)</text>\n", left,
                     top2 - 26);
  return out + "</svg>\n";
}

// ---- arguments -------------------------------------------------------------------

constexpr const char* usage =
    "usage: fleet [--seconds N] [--quota Q] [--redis-socket PATH | --redis-port P [--redis-host H]]\n"
    "             [--outage A-B | --outage none] [--svg FILE] [--report-json FILE]\n"
    "  --seconds N      how long to run (20)\n"
    "  --quota Q        calls a second for the whole fleet (200); the burst is Q / 10\n"
    "  --redis-socket / --redis-port   a Redis of your own (no outage then); by default the\n"
    "                   program runs its own redis-server on a Unix socket in a temporary directory\n"
    "  --outage A-B     kill that redis-server at A s and start it again at B s (8-12)\n";

bool parse_long(const char* text, long lo, long hi, long& out) {
  char* end = nullptr;
  out = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && out >= lo && out <= hi;
}

bool parse_double(std::string_view text, double& out) {
  const std::string t(text);
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return end != t.c_str() && *end == '\0' && std::isfinite(out) && out >= 0;
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    long n = 0;
    bool ok = value != nullptr;
    if (ok) {
      if (arg == "--seconds") {
        ok = parse_long(value, 3, 3600, n);
        s.seconds = static_cast<int>(n);
      } else if (arg == "--quota") {
        ok = parse_long(value, 4, 1'000'000, n);  // Redis's script: at most a token a microsecond
        s.quota = static_cast<std::uint32_t>(n);
      } else if (arg == "--redis-socket") {
        s.socket = value;
        ok = !s.socket.empty();
      } else if (arg == "--redis-port") {
        ok = parse_long(value, 1, 65535, n);
        s.port = static_cast<int>(n);
      } else if (arg == "--redis-host") {
        s.host = value;
        ok = !s.host.empty();
      } else if (arg == "--outage") {
        s.outage_given = true;
        const std::string_view v = value;
        if (v == "none") {
          s.outage = false;
        } else {
          const auto dash = v.find('-');
          ok = dash != std::string_view::npos && parse_double(v.substr(0, dash), s.outage_from) &&
               parse_double(v.substr(dash + 1), s.outage_to) && s.outage_from < s.outage_to;
        }
      } else if (arg == "--svg") {
        s.svg = value;
      } else if (arg == "--report-json") {
        s.json = value;
      } else {
        ok = false;
      }
    }
    if (!ok) {
      std::fprintf(stderr, "fleet: bad or unknown option %s\n%s", argv[i], usage);
      return 2;
    }
    ++i;
  }
  if (!s.socket.empty() && s.port != 0) {
    std::fprintf(stderr, "fleet: give --redis-socket or --redis-port, not both\n");
    return 2;
  }
  if (!s.own_redis() && s.outage) {
    if (s.outage_given)
      fmt::print("fleet: --outage skipped: the program can only stop a redis-server it started itself\n");
    s.outage = false;
  }
  if (s.outage && (s.outage_from < 1 || s.outage_to + 2 > s.seconds)) {
    std::fprintf(stderr, "fleet: --outage A-B needs 1 <= A < B <= seconds - 2 (to see the quota resume)\n");
    return 2;
  }

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  std::optional<resilience::testing::redis_server> child;
  redis::connection_options connection;
  std::string where;
  if (s.own_redis()) {
    try {
      child.emplace();
    } catch (const std::exception& e) {
      fmt::print(stderr, "fleet: {}\n", e.what());
      return 1;
    }
    connection = child->connection();
    where = fmt::format("a redis-server of its own on {}", child->socket());
  } else if (!s.socket.empty()) {
    connection = connection.unix_socket(s.socket);
    where = fmt::format("the Redis on {}", s.socket);
  } else {
    connection = connection.tcp(s.host, static_cast<std::uint16_t>(s.port));
    where = fmt::format("the Redis on {}:{}", s.host, s.port);
  }

  // A key of this run's own: a Redis of the user's keeps no state of an
  // earlier run in it.
  const auto key = fmt::format("fleet-demo-{}-{}", ::getpid(), sclock::now().time_since_epoch().count());
  const auto options = redis::fleet_limiter_options{}.key(key).token_bucket(s.quota, 1s, s.burst());
  const std::uint32_t max_lease = options.max_lease();
  const std::uint32_t bound = s.quota + s.burst() + replicas * max_lease;

  std::vector<std::unique_ptr<replica>> fleet;
  for (int i = 0; i < replicas; ++i) {
    auto r = std::make_unique<replica>();
    r->index = i;
    r->callers = 4 * (i + 1);
    r->admitted = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(s.seconds));
    r->round_trips = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(s.seconds));
    r->admitted_at.reserve(std::min<std::size_t>(std::size_t{1} << 22, std::size_t{s.quota} * static_cast<std::size_t>(s.seconds + 2)));
    fleet.push_back(std::move(r));
  }

  fmt::print("{} replicas share {} calls/s (burst {}, lease up to {}, no waiting for a permit) through {};\n"
             "replica i runs 4(i+1) callers, each backing off 2-6 ms when turned away; {} s",
             replicas, s.quota, s.burst(), max_lease, where, s.seconds);
  if (s.outage)
    fmt::print("; Redis killed at {:g} s and started again at {:g} s", s.outage_from, s.outage_to);
  fmt::print("\n\n");
  fmt::print("{:>6}", "second");
  for (const auto& r : fleet) fmt::print(" {:>8}", fmt::format("r{}({})", r->index + 1, r->callers));
  fmt::print(" {:>7} {:>6}  {:<11} {:>8} {:>12}\n", "total", "quota", "redis", "fallback", "round trips");

  timeline tl;
  tl.t0 = sclock::now() + 300ms;  // every replica starts its callers at t0
  std::vector<std::thread> threads;
  for (auto& r : fleet)
    threads.emplace_back(run_replica, std::ref(*r), std::cref(connection), std::cref(options), tl.t0, s.seconds);

  // The main thread: the outage, and a row a second (read 100 ms after the
  // second ends).
  std::vector<row> printed;
  bool restart_failed = false;
  const auto kill_at = tl.t0 + std::chrono::duration_cast<sclock::duration>(std::chrono::duration<double>(s.outage_from));
  const auto back_at = tl.t0 + std::chrono::duration_cast<sclock::duration>(std::chrono::duration<double>(s.outage_to));
  for (int k = 0; k < s.seconds && !interrupted.load();) {
    const auto next_row = tl.t0 + std::chrono::seconds(k + 1) + 100ms;
    auto next = next_row;
    if (s.outage && !tl.killed_at) next = std::min(next, kill_at);
    if (s.outage && tl.killed_at && !tl.back_at && !restart_failed) next = std::min(next, back_at);
    std::this_thread::sleep_until(std::min(next, sclock::now() + 50ms));
    const auto now = sclock::now();
    if (s.outage && !tl.killed_at && now >= kill_at) {
      tl.killed_at = sclock::now();  // before the replicas can see it
      child->kill();
    }
    if (s.outage && tl.killed_at && !tl.back_at && !restart_failed && now >= back_at) {
      try {
        child->start();
        tl.back_at = sclock::now();  // accepting connections
      } catch (const std::exception& e) {
        fmt::print(stderr, "fleet: could not start redis-server again: {}\n", e.what());
        restart_failed = true;
      }
    }
    if (now < next_row) continue;
    const row r = make_row(fleet, tl, k, now);
    fmt::print("{:>5}s", k);
    for (auto a : r.admitted) fmt::print(" {:>8}", a);
    fmt::print(" {:>7} {:>6}  {:<11} {:>8} {:>12}\n", r.total, s.quota, label(r),
               fmt::format("{}/{}", r.falling_back, replicas), r.round_trips);
    std::fflush(stdout);
    printed.push_back(r);
    ++k;
  }
  for (auto& t : threads) t.join();
  const auto finished = sclock::now();
  if (child) child->kill();
  if (interrupted.load()) {
    fmt::print("\nfleet: interrupted\n");
    return 130;
  }

  // ---- the summary: from the final counts (a row is read 100 ms after its
  // second; a call counted later would show here) ----
  std::vector<row> rows;
  for (int k = 0; k < s.seconds; ++k) rows.push_back(make_row(fleet, tl, k, finished));
  std::uint64_t late = 0;
  for (std::size_t k = 0; k < rows.size() && k < printed.size(); ++k) late += rows[k].total - printed[k].total;

  fmt::print("\nsummary (one run)\n");
  if (late) fmt::print("  {} calls were counted after their row was printed; the summary includes them\n", late);

  // Every second is judged, the first and the outage's transitions
  // included; the round trips over the seconds Redis was up all through.
  std::vector<int> up, down;
  for (int k = 0; k < s.seconds; ++k) {
    const auto& r = rows[static_cast<std::size_t>(k)];
    if (r.what == state::up) up.push_back(k);
    if (r.what == state::down) down.push_back(k);
  }
  std::uint64_t all_total = 0, up_total = 0, up_round_trips = 0;
  double max_dev = 0, sum_dev = 0;
  std::vector<std::string> over;
  for (int k = 0; k < s.seconds; ++k) {
    const auto& r = rows[static_cast<std::size_t>(k)];
    all_total += r.total;
    const double dev = 100.0 * std::abs(static_cast<double>(r.total) - s.quota) / s.quota;
    max_dev = std::max(max_dev, dev);
    sum_dev += dev;
    if (r.total > bound) over.push_back(fmt::format("{}s: {}", k, r.total));
  }
  for (int k : up) {
    up_total += rows[static_cast<std::size_t>(k)].total;
    up_round_trips += rows[static_cast<std::size_t>(k)].round_trips;
  }
  // 5% of the quota, and the documented overshoot over one span: a lease per replica.
  const double expected = static_cast<double>(s.quota) * s.seconds;
  const double allowed = 0.05 * expected + static_cast<double>(replicas) * max_lease;
  const double aggregate_dev = static_cast<double>(all_total) - expected;
  const double trips_per_call = up_total ? static_cast<double>(up_round_trips) / up_total : 0.0;
  bool ok = true;
  fmt::print("  every second, {} of them (the first, Redis down and its return included):\n", s.seconds);
  fmt::print("    per-second total vs quota: mean absolute deviation {:.1f}%, max {:.1f}%\n", sum_dev / s.seconds,
             max_dev);
  fmt::print("    documented bound {}/s (quota {} + burst {} + {} replicas x lease {}): exceeded in {} of {} seconds{}{}\n",
             bound, s.quota, s.burst(), replicas, max_lease, over.size(), s.seconds, over.empty() ? "" : ": ",
             fmt::join(over, ", "));
  fmt::print("    admitted {} in {} s, expected {:.0f}: {:+.0f} ({:+.2f}%); allowed +-{:.0f} (5% + {} x {})\n", all_total,
             s.seconds, expected, aggregate_dev, 100.0 * aggregate_dev / expected, allowed, replicas, max_lease);
  if (!over.empty()) {
    fmt::print("    FAIL: a second over the documented bound\n");
    ok = false;
  }
  if (std::abs(aggregate_dev) > allowed) {
    fmt::print("    FAIL: the fleet's total is off the quota by more than allowed\n");
    ok = false;
  }
  if (up.empty()) {
    fmt::print("  Redis up: no whole second to count round trips in\n");
    ok = false;
  } else {
    fmt::print("  Redis up all through, {} seconds: {:.0f} round trips/s for the fleet ({:.2f} per admitted call)\n",
               up.size(), static_cast<double>(up_round_trips) / up.size(), trips_per_call);
    if (trips_per_call > 1.0) {
      fmt::print("    FAIL: more than one round trip per admitted call\n");
      ok = false;
    }
  }

  // Every admitted call, in time order: the gaps.
  std::vector<sclock::time_point> all;
  for (const auto& r : fleet) all.insert(all.end(), r->admitted_at.begin(), r->admitted_at.end());
  std::sort(all.begin(), all.end());

  std::optional<double> resumed_by;  // seconds since t0
  double longest_outage_stall = 0;
  if (s.outage && tl.killed_at) {
    fmt::print("  Redis down from {:.2f} s to {} (killed, then started again):\n", seconds_between(tl.t0, *tl.killed_at),
               tl.back_at ? fmt::format("{:.2f} s", seconds_between(tl.t0, *tl.back_at)) : std::string("the end"));
    // Fell back, and resumed.
    std::vector<double> fell_after, resumed_after;
    std::vector<std::string> reasons;
    bool every_replica_resumed = tl.back_at.has_value();
    for (const auto& r : fleet) {
      std::optional<sclock::time_point> fell, resumed;
      for (const auto& c : r->changes()) {
        if (c.fell_back && !fell && c.at >= *tl.killed_at) {
          fell = c.at;
          if (std::find(reasons.begin(), reasons.end(), c.why.message()) == reasons.end())
            reasons.push_back(c.why.message());
        }
        if (!c.fell_back && !resumed && tl.back_at && c.at >= *tl.back_at) resumed = c.at;
      }
      if (fell) fell_after.push_back(1000 * seconds_between(*tl.killed_at, *fell));
      if (resumed) {
        resumed_after.push_back(1000 * seconds_between(*tl.back_at, *resumed));
        resumed_by = std::max(resumed_by.value_or(0), seconds_between(tl.t0, *resumed));
      } else {
        every_replica_resumed = false;
      }
    }
    fmt::print("    fell back after the kill: {} of {} replicas, after {:.1f} ms ({})\n", fell_after.size(), replicas,
               fmt::join(fell_after, " / "), fmt::join(reasons, "; "));
    if (!down.empty()) {
      std::uint64_t sum = 0;
      std::array<std::uint64_t, replicas> per{};
      std::vector<std::uint64_t> totals;
      for (int k : down) {
        const auto& r = rows[static_cast<std::size_t>(k)];
        sum += r.total;
        totals.push_back(r.total);
        for (int i = 0; i < replicas; ++i) per[static_cast<std::size_t>(i)] += r.admitted[static_cast<std::size_t>(i)];
      }
      const double nd = static_cast<double>(down.size());
      fmt::print("    admitted per second while down ({} whole seconds): {} (mean {:.1f}; quota {})\n", down.size(),
                 fmt::join(totals, ", "), sum / nd, s.quota);
      std::vector<double> means;
      for (auto v : per) means.push_back(static_cast<double>(v) / nd);
      fmt::print("    per replica, mean: {:.1f} (the local share: {:.1f} each)\n", fmt::join(means, " / "),
                 static_cast<double>(s.quota) / replicas);
    }
    // The longest gap between two admitted calls that overlaps the outage
    // (from the kill until the last replica resumed).
    const auto from = *tl.killed_at;
    const auto to = tl.t0 + std::chrono::duration_cast<sclock::duration>(std::chrono::duration<double>(
                                resumed_by.value_or(tl.back_at ? seconds_between(tl.t0, *tl.back_at) : s.seconds)));
    sclock::time_point stall_at{};
    for (std::size_t i = 1; i < all.size(); ++i) {
      if (all[i] < from || all[i - 1] > to) continue;
      const double gap = seconds_between(all[i - 1], all[i]);
      if (gap > longest_outage_stall) {
        longest_outage_stall = gap;
        stall_at = all[i - 1];
      }
    }
    fmt::print("    longest stall (gap between two admitted calls, fleet-wide): {:.1f} ms, from {:.3f} s\n",
               1000 * longest_outage_stall, seconds_between(tl.t0, stall_at));
    if (longest_outage_stall > 1.0) {
      fmt::print("    FAIL: a stall longer than 1 s during the outage\n");
      ok = false;
    }
    if (tl.back_at) {
      fmt::print("  Redis back at {:.2f} s: first round trip again (resumed) after {:.0f} ms\n",
                 seconds_between(tl.t0, *tl.back_at), fmt::join(resumed_after, " / "));
      const double worst = resumed_after.empty() ? 0 : *std::max_element(resumed_after.begin(), resumed_after.end());
      if (!every_replica_resumed || worst > 2000) {
        fmt::print("    FAIL: {} of {} replicas resumed the shared quota within 2 s\n",
                   std::count_if(resumed_after.begin(), resumed_after.end(), [](double v) { return v <= 2000; }),
                   replicas);
        ok = false;
      }
    } else {
      fmt::print("    FAIL: redis-server could not be started again\n");
      ok = false;
    }
  }

  // Whatever else the limiters saw.
  std::uint64_t admitted = 0, by_fallback = 0, rejected = 0, round_trips = 0, failed = 0, fallbacks = 0, other = 0;
  for (const auto& r : fleet) {
    admitted += r->final_stats.admitted;
    by_fallback += r->final_stats.admitted_by_fallback;
    rejected += r->final_stats.rejected;
    round_trips += r->final_stats.round_trips;
    failed += r->final_stats.failed_round_trips;
    fallbacks += r->final_stats.fallbacks;
    other += r->other_errors;
  }
  // Failed round trips: when, why, and whether the breaker was open already.
  {
    struct group {
      std::string why;
      bool redis_down;
      bool already_open;
      int count = 0;
      double first = 0, last = 0;
    };
    std::vector<group> groups;
    for (const auto& r : fleet) {
      std::lock_guard lock(r->events_mutex);
      for (const auto& f : r->failures) {
        const double at = seconds_between(tl.t0, f.at);
        const bool down = tl.killed_at && f.at >= *tl.killed_at && (!tl.back_at || f.at < *tl.back_at);
        auto g = std::find_if(groups.begin(), groups.end(), [&](const group& x) {
          return x.why == f.why.message() && x.redis_down == down && x.already_open == f.falling_back;
        });
        if (g == groups.end()) {
          groups.push_back({f.why.message(), down, f.falling_back, 0, at, at});
          g = groups.end() - 1;
        }
        ++g->count;
        g->first = std::min(g->first, at);
        g->last = std::max(g->last, at);
      }
    }
    for (const auto& g : groups)
      fmt::print("  round_trip_failed events: {} x \"{}\" (Redis {}, breaker {} before; {:.3f}-{:.3f} s)\n", g.count,
                 g.why, g.redis_down ? "down" : "up", g.already_open ? "open" : "closed", g.first, g.last);
  }
  double longest_gap = 0;
  for (std::size_t i = 1; i < all.size(); ++i) longest_gap = std::max(longest_gap, seconds_between(all[i - 1], all[i]));
  fmt::print("  limiters' stats: admitted {} ({} by the fallback), rejected {}, round trips {}, failed round trips {}, "
             "fallbacks {}; replicas seen by Redis {}\n",
             admitted, by_fallback, rejected, round_trips, failed, fallbacks, fleet[0]->final_stats.replicas);
  fmt::print("  longest gap between two admitted calls over the whole run: {:.1f} ms\n", 1000 * longest_gap);
  if (fallbacks > (s.outage && tl.killed_at ? static_cast<std::uint64_t>(replicas) : 0))
    fmt::print("  note: {} fallbacks in all, more than the outage explains (a round trip timed out or failed while Redis "
               "ran)\n",
               fallbacks);
  if (other) {
    fmt::print("  FAIL: {} calls ended with an error other than rate_limited\n", other);
    ok = false;
  }

  if (!s.svg.empty()) {
    chart_data d{.s = s, .rows = rows, .callers = {}, .down_from = {}, .down_to = {}, .resumed_by = resumed_by,
                 .bound = bound};
    for (const auto& r : fleet) d.callers.push_back(r->callers);
    if (tl.killed_at) d.down_from = seconds_between(tl.t0, *tl.killed_at);
    if (tl.back_at) d.down_to = seconds_between(tl.t0, *tl.back_at);
    std::ofstream svg(s.svg);
    svg << svg_chart(d);
    svg.close();
    if (!svg) {
      fmt::print(stderr, "fleet: could not write {}\n", s.svg);
      ok = false;
    } else {
      fmt::print("\nchart of admitted calls per second, the fleet and each replica: {}\n", s.svg);
    }
  }

  if (!s.json.empty()) {
    std::string j = fmt::format("{{\n  \"replicas\": {}, \"quota\": {}, \"burst\": {}, \"max_lease\": {}, \"bound\": {},\n"
                                "  \"seconds\": {}, \"redis\": \"{}\",\n",
                                replicas, s.quota, s.burst(), max_lease, bound, s.seconds, json_escape(where));
    j += "  \"callers\": [";
    for (std::size_t i = 0; i < fleet.size(); ++i) j += fmt::format("{}{}", i ? ", " : "", fleet[i]->callers);
    j += "],\n  \"per_second\": [\n";
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const auto& r = rows[k];
      j += fmt::format("    {{\"second\": {}, \"admitted\": [{}], \"total\": {}, \"redis\": \"{}\", \"falling_back\": {}, "
                       "\"round_trips\": {}}}{}\n",
                       k, fmt::join(r.admitted, ", "), r.total, label(r), r.falling_back, r.round_trips,
                       k + 1 < rows.size() ? "," : "");
    }
    j += "  ],\n";
    const auto opt = [](const std::optional<sclock::time_point>& t, sclock::time_point t0) {
      return t ? fmt::format("{:.3f}", seconds_between(t0, *t)) : std::string("null");
    };
    j += fmt::format("  \"redis_killed_at\": {}, \"redis_back_at\": {}, \"all_resumed_at\": {},\n",
                     opt(tl.killed_at, tl.t0), opt(tl.back_at, tl.t0),
                     resumed_by ? fmt::format("{:.3f}", *resumed_by) : std::string("null"));
    j += fmt::format("  \"admitted\": {}, \"expected\": {:.0f}, \"allowed_deviation\": {:.0f}, \"seconds_over_bound\": {},\n"
                     "  \"mean_abs_deviation_percent\": {:.2f}, \"max_abs_deviation_percent\": {:.2f},\n"
                     "  \"up_seconds\": {}, \"up_round_trips_per_admitted_call\": {:.3f},\n"
                     "  \"longest_outage_stall_ms\": {:.1f}, \"longest_gap_ms\": {:.1f}, \"pass\": {}\n}}\n",
                     all_total, expected, allowed, over.size(), sum_dev / s.seconds, max_dev, up.size(), trips_per_call,
                     1000 * longest_outage_stall, 1000 * longest_gap, ok ? "true" : "false");
    std::ofstream out(s.json);
    out << j;
    out.close();
    if (!out) {
      fmt::print(stderr, "fleet: could not write {}\n", s.json);
      ok = false;
    }
  }
  fmt::print("{}\n", ok ? "fleet: PASS" : "fleet: FAIL");
  return ok ? 0 : 1;
}
