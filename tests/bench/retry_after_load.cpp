// Callers of one resilience::http::client (client_options::standard(), only
// hooks added) against a server that rate-limits with 429 and Retry-After
// (tests/bench/nginx.sh runs it against nginx's limit_req): when each attempt
// was sent, how it ended, and whether every retry after a 429 waited at
// least the Retry-After from the moment the 429 came back.
//
//   retry_after_load --target host:port [--callers C] [--duration S] [--retry-after S] [--max-host-hold S]
//                    [--backoff BASE_MS,CAP_MS]
//
// C callers (20) on one thread, each looping `co_await client.request(...)`
// (GET /, headers x-caller and x-call for the server's log) for S seconds
// (20); then their calls are cancelled. --retry-after: the Retry-After the
// server sends, in seconds (1), which the check holds every retry after a
// 429 to. --max-host-hold: client_options::max_host_hold in seconds (0, the
// default: off); with it, the check also holds every caller's attempts to
// every 429's Retry-After.
//
// How each attempt is seen, on the client's side and per caller:
//   sent      the request body's writer is set up as the request is
//             serialized (each attempt's write, and a resend within an
//             attempt on a connection the server had closed): its owner is
//             the caller;
//   answered  on_retry runs after the attempt's response was read, before
//             the wait; the call's return for the last attempt. Each caller
//             runs on a strand of its own, so a hook finds its caller by the
//             strand running it. The hook runs after the response arrived,
//             so "next sent - answered" is at most the real gap: a check
//             that passes on it holds for the real one.
// Prints per second (by send time) the attempts sent and their outcome, the
// gaps after 429s, and `check retry-after: PASS|FAIL`; exit status 1 when a
// retry after a 429 was sent sooner than the Retry-After, with
// --max-host-hold any caller's attempt was sent within the Retry-After of a
// 429 that had already come, a hook could not be attributed, or nothing was
// sent.
#include <resilience/http/client.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace rhttp = resilience::http;
using steady = std::chrono::steady_clock;

struct attempt_record {
  steady::time_point sent;
  steady::time_point answered{};  // zero while under way
  std::uint64_t call = 0;         // the caller's call it belongs to
  unsigned status = 0;            // 0: ended with an error
  bool final = false;             // the call's last attempt
  bool cancelled = false;         // cut by the stop
  bool retry_after = false;       // on_retry: the wait began with the server's Retry-After
  steady::duration delay{};       // on_retry: the wait announced
  unsigned resends = 0;           // sent again within the attempt (a connection the server had closed)
};

struct caller_state {
  explicit caller_state(asio::strand<asio::io_context::executor_type> s) : strand(std::move(s)) {}
  asio::strand<asio::io_context::executor_type> strand;
  asio::cancellation_signal stop;
  std::uint64_t calls = 0;
  std::uint64_t reported_attempts = 0;  // on_call_finished's count
  std::vector<attempt_record> attempts;

  attempt_record* open() noexcept {
    if (attempts.empty() || attempts.back().answered != steady::time_point{}) return nullptr;
    return &attempts.back();
  }
  void on_send() {
    if (auto* a = open()) {
      ++a->resends;  // the same attempt: its first send is the one checked
      return;
    }
    attempts.push_back({steady::now(), {}, calls});
  }
  // Ends the attempt under way, if any (a call refused before sending has none).
  void answer(unsigned status, bool final, bool cancelled) {
    if (auto* a = open()) {
      a->answered = steady::now();
      a->status = status;
      a->final = final;
      a->cancelled = cancelled;
    }
  }
};

// An empty request body whose writer tells its caller that the request is
// being sent: Beast sets the writer up as each write of the message starts.
struct stamped_body {
  struct value_type {
    caller_state* owner = nullptr;
  };
  static std::uint64_t size(const value_type&) noexcept { return 0; }

  class writer {
   public:
    using const_buffers_type = asio::const_buffer;
    template <bool isRequest, class Fields>
    writer(const bhttp::header<isRequest, Fields>&, const value_type& v) noexcept : owner_(v.owner) {}
    void init(beast::error_code& ec) {
      ec = {};
      if (owner_) owner_->on_send();
    }
    boost::optional<std::pair<const_buffers_type, bool>> get(beast::error_code& ec) noexcept {
      ec = {};
      return boost::none;
    }

   private:
    caller_state* owner_;
  };
};

struct settings {
  std::string host;
  std::uint16_t port = 0;
  unsigned callers = 20;
  unsigned duration_s = 20;
  unsigned retry_after_s = 1;
  unsigned max_host_hold_s = 0;
  unsigned backoff_base_ms = 0;  // 0: the client's default schedule
  unsigned backoff_cap_ms = 0;
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

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view name = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(std::string(name) + ": needs a value");
    const std::string_view value = argv[++i];
    if (name == "--target") {
      const auto colon = value.rfind(':');
      if (colon == std::string_view::npos || colon == 0)
        throw std::invalid_argument("--target: host:port, not '" + std::string(value) + "'");
      s.host = value.substr(0, colon);
      s.port = number<std::uint16_t>("--target's port", value.substr(colon + 1), 1, 65535);
    } else if (name == "--callers") {
      s.callers = number<unsigned>(name, value, 1, 10'000);
    } else if (name == "--duration") {
      s.duration_s = number<unsigned>(name, value, 1, 3600);
    } else if (name == "--retry-after") {
      s.retry_after_s = number<unsigned>(name, value, 1, 3600);
    } else if (name == "--max-host-hold") {
      s.max_host_hold_s = number<unsigned>(name, value, 0, 3600);
    } else if (name == "--backoff") {
      const auto comma = value.find(',');
      if (comma == std::string_view::npos) throw std::invalid_argument("--backoff: BASE_MS,CAP_MS");
      s.backoff_base_ms = number<unsigned>("--backoff's base", value.substr(0, comma), 1, 3'600'000);
      s.backoff_cap_ms = number<unsigned>("--backoff's cap", value.substr(comma + 1), s.backoff_base_ms, 3'600'000);
    } else {
      throw std::invalid_argument(std::string(name) + ": not an option");
    }
  }
  if (s.host.empty()) throw std::invalid_argument("--target: required");
  return s;
}

struct run_state {
  std::vector<std::unique_ptr<caller_state>> callers;
  bool stop = false;
  std::uint64_t unattributed = 0;  // hook runs outside every caller's strand

  caller_state* running() noexcept {
    for (auto& c : callers)
      if (c->strand.running_in_this_thread()) return c.get();
    ++unattributed;
    return nullptr;
  }
};

asio::awaitable<void> caller(rhttp::client* client, const rhttp::endpoint* to, caller_state* me, unsigned id,
                             run_state* run) {
  bhttp::request<stamped_body> req{bhttp::verb::get, "/", 11};
  req.body().owner = me;
  req.set(bhttp::field::user_agent, "retry_after_load");
  req.set("x-caller", std::to_string(id));
  while (!run->stop) {
    req.set("x-call", std::to_string(++me->calls));
    // By reference: the caller's own request, which its writer points back to.
    auto res = co_await client->request(*to, std::ref(req));
    const bool cancelled = !res && res.error() == asio::error::operation_aborted && run->stop;
    me->answer(res ? res->result_int() : 0u, true, cancelled);
  }
}

asio::awaitable<void> stop_after(std::chrono::seconds d, run_state* run) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(asio::use_awaitable);
  run->stop = true;
  for (auto& c : run->callers) c->stop.emit(asio::cancellation_type::terminal);
}

double secs(steady::duration d) { return std::chrono::duration<double>(d).count(); }

int report(const settings& s, const run_state& run, steady::time_point t0) {
  const auto retry_after = std::chrono::seconds(s.retry_after_s);
  struct second_counts {
    std::uint64_t sent = 0, ok = 0, limited = 0, other = 0, cancelled = 0;
  };
  std::map<long, second_counts> seconds;
  std::map<long, std::uint64_t> slots;  // sends per 100 ms
  std::uint64_t attempts = 0, resends = 0, reported = 0, calls_ok = 0, calls_limited = 0, calls_other = 0,
                calls_cancelled = 0;
  std::uint64_t retries_429 = 0, announced_429 = 0, not_honoured = 0, waiting_at_stop = 0;
  std::uint64_t early = 0, announced_early = 0;  // sent, or announced, sooner than the Retry-After
  std::uint64_t new_calls_after_429 = 0, new_calls_early = 0;
  std::vector<double> gaps;
  double min_delay = 1e9;
  for (const auto& c : run.callers) {
    reported += c->reported_attempts;
    const auto& as = c->attempts;
    for (std::size_t i = 0; i < as.size(); ++i) {
      const auto& a = as[i];
      ++attempts;
      resends += a.resends;
      const long second = static_cast<long>(secs(a.sent - t0));
      auto& sc = seconds[second];
      ++sc.sent;
      ++slots[static_cast<long>(secs(a.sent - t0) * 10)];
      if (a.cancelled) ++sc.cancelled;
      else if (a.status == 200) ++sc.ok;
      else if (a.status == 429) ++sc.limited;
      else ++sc.other;
      if (a.final) {
        if (a.cancelled) ++calls_cancelled;
        else if (a.status == 200) ++calls_ok;
        else if (a.status == 429) ++calls_limited;
        else ++calls_other;
      }
      if (a.status != 429) continue;
      const attempt_record* next = i + 1 < as.size() ? &as[i + 1] : nullptr;
      if (!a.final) {
        ++retries_429;
        if (a.retry_after) ++announced_429;
        else ++not_honoured;  // a 429 retried on the backoff alone
        min_delay = std::min(min_delay, secs(a.delay));
        if (a.delay < retry_after) ++announced_early;
        if (!next || next->call != a.call) {
          ++waiting_at_stop;  // its wait was cut by the stop
          continue;
        }
        const auto gap = next->sent - a.answered;
        gaps.push_back(secs(gap));
        if (gap < retry_after) ++early;
      } else if (next) {
        // The caller's next call: the host's hold (client_options::max_host_hold) keeps it back too.
        ++new_calls_after_429;
        if (next->sent - a.answered < retry_after) ++new_calls_early;
      }
    }
  }
  std::printf("# per second of the run, by send time: attempts sent and how each ended\n");
  for (const auto& [second, sc] : seconds)
    std::printf("second %ld sent %llu ok %llu limited %llu other %llu cancelled %llu\n", second + 1,
                static_cast<unsigned long long>(sc.sent), static_cast<unsigned long long>(sc.ok),
                static_cast<unsigned long long>(sc.limited), static_cast<unsigned long long>(sc.other),
                static_cast<unsigned long long>(sc.cancelled));
  std::uint64_t burst_early = 0, burst_late = 0;
  for (const auto& [slot, n] : slots) {
    auto& burst = slot < 30 ? burst_early : burst_late;
    burst = std::max(burst, n);
  }
  std::sort(gaps.begin(), gaps.end());
  const auto q = [&](double p) { return gaps.empty() ? 0.0 : gaps[static_cast<std::size_t>(p * (gaps.size() - 1))]; };
  std::printf("calls %llu: 200 %llu, 429 %llu, other %llu, cancelled at the stop %llu\n",
              static_cast<unsigned long long>(calls_ok + calls_limited + calls_other + calls_cancelled),
              static_cast<unsigned long long>(calls_ok), static_cast<unsigned long long>(calls_limited),
              static_cast<unsigned long long>(calls_other), static_cast<unsigned long long>(calls_cancelled));
  std::printf("attempts %llu (on_call_finished counted %llu), resends within an attempt %llu, hooks not attributed %llu\n",
              static_cast<unsigned long long>(attempts), static_cast<unsigned long long>(reported),
              static_cast<unsigned long long>(resends), static_cast<unsigned long long>(run.unattributed));
  std::printf("largest burst: %llu attempts in one 100 ms slot in the first 3 s, %llu after\n",
              static_cast<unsigned long long>(burst_early), static_cast<unsigned long long>(burst_late));
  std::printf("retries after a 429: %llu (%llu never sent: the stop), on the server's Retry-After %llu, "
              "announced wait min %.3f s (shorter than Retry-After: %llu)\n",
              static_cast<unsigned long long>(retries_429), static_cast<unsigned long long>(waiting_at_stop),
              static_cast<unsigned long long>(announced_429), retries_429 ? min_delay : 0.0,
              static_cast<unsigned long long>(announced_early));
  std::printf("gap from a 429's arrival to its retry's send: min %.3f s, p10 %.3f, median %.3f, p90 %.3f, max %.3f "
              "(%zu retries); sooner than Retry-After %llu s: %llu\n",
              q(0), q(0.1), q(0.5), q(0.9), q(1), gaps.size(), static_cast<unsigned long long>(s.retry_after_s),
              static_cast<unsigned long long>(early));
  std::printf("new calls after a call ended with a 429: %llu, sent sooner than Retry-After after it: %llu\n",
              static_cast<unsigned long long>(new_calls_after_429), static_cast<unsigned long long>(new_calls_early));
  // Any caller's attempt sent within Retry-After of any 429's arrival: the
  // host's hold (max_host_hold) is meant to keep these at 0. An attempt that
  // passed the hold before that 429 arrived and was then still connecting
  // would count here too.
  std::vector<steady::time_point> limited_at, sent_at;
  for (const auto& c : run.callers)
    for (const auto& a : c->attempts) {
      sent_at.push_back(a.sent);
      if (a.status == 429 && a.answered != steady::time_point{}) limited_at.push_back(a.answered);
    }
  std::sort(limited_at.begin(), limited_at.end());
  std::uint64_t sent_in_hold = 0;
  for (const auto sent : sent_at) {
    const auto after = std::upper_bound(limited_at.begin(), limited_at.end(), sent);
    if (after != limited_at.begin() && sent - *std::prev(after) < retry_after) ++sent_in_hold;
  }
  std::printf("attempts sent within Retry-After of any caller's 429: %llu of %zu\n",
              static_cast<unsigned long long>(sent_in_hold), sent_at.size());
  const bool pass = attempts > 0 && early == 0 && announced_early == 0 && not_honoured == 0 &&
                    (s.max_host_hold_s == 0 || sent_in_hold == 0) && run.unattributed == 0;
  std::printf("check retry-after: %s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

int run(const settings& s) {
  asio::io_context io(1);
  run_state state;
  auto options = rhttp::client_options::standard();
  if (s.backoff_base_ms != 0)
    options = options.backoff(resilience::backoff::exponential(std::chrono::milliseconds(s.backoff_base_ms), 2.0,
                                                               std::chrono::milliseconds(s.backoff_cap_ms)));
  rhttp::client client(options
                           .max_host_hold(std::chrono::seconds(s.max_host_hold_s))
                           .on_retry([&state](const rhttp::client_retry_event& e) {
                             caller_state* c = state.running();
                             if (!c) return;
                             if (auto* a = c->open()) {
                               a->answered = steady::now();
                               a->status = e.status;
                               a->retry_after = e.retry_after;
                               a->delay = e.delay;
                             }
                           })
                           .on_call_finished([&state](const rhttp::client_call_event& e) {
                             if (caller_state* c = state.running()) c->reported_attempts += e.attempts;
                           }));
  const auto to = rhttp::endpoint::http(s.host, s.port);
  for (unsigned i = 0; i < s.callers; ++i) state.callers.push_back(std::make_unique<caller_state>(asio::make_strand(io)));
  std::printf("retry_after_load: %s:%u, %u callers on one client (client_options::standard(), max_host_hold %u s, "
              "backoff %s), %u s, one thread\n",
              s.host.c_str(), s.port, s.callers, s.max_host_hold_s,
              s.backoff_base_ms ? ("exponential(" + std::to_string(s.backoff_base_ms) + "ms, 2.0, " +
                                   std::to_string(s.backoff_cap_ms) + "ms)").c_str()
                                : "the default",
              s.duration_s);
  std::fflush(stdout);
  const auto t0 = steady::now();
  for (unsigned i = 0; i < s.callers; ++i) {
    auto& c = *state.callers[i];
    asio::co_spawn(c.strand, caller(&client, &to, &c, i + 1, &state),
                   asio::bind_cancellation_slot(c.stop.slot(), asio::detached));
  }
  asio::co_spawn(io, stop_after(std::chrono::seconds(s.duration_s), &state), asio::detached);
  io.run();
  return report(s, state, t0);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr,
                 "retry_after_load: %s\nusage: retry_after_load --target host:port [--callers C] [--duration S] "
                 "[--retry-after S] [--max-host-hold S] [--backoff BASE_MS,CAP_MS]\n",
                 e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "retry_after_load: %s\n", e.what());
    return 1;
  }
}
