// resilience/http/client_options.hpp — what http::client (client.hpp) is
// built from and reports: client_options, with every default the client
// has; request_options for one call; the events its hooks receive.
#pragma once

#include <resilience/adaptive_throttle.hpp>
#include <resilience/backoff.hpp>
#include <resilience/breaker_options.hpp>
#include <resilience/breaker_registry.hpp>
#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/error.hpp>
#include <resilience/http/classifier.hpp>
#include <resilience/http/connection_pool.hpp>
#include <resilience/http/deadline_header.hpp>
#include <resilience/http/retry_after_delay.hpp>
#include <resilience/properties.hpp>
#include <resilience/retry.hpp>
#include <resilience/retry_budget.hpp>

#include <boost/beast/http/verb.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace resilience::http {

// gRPC's retry throttling for client_options::budget_per_host (each host's
// retry_token_budget): max_tokens in [1, 1000], token_ratio in (0, max_tokens].
struct retry_token_budget_settings {
  std::uint32_t max_tokens = 10;
  double token_ratio = 0.1;
};
// The name before 0.2 (CHANGELOG.md).
using retry_throttle_settings [[deprecated("renamed retry_token_budget_settings")]] = retry_token_budget_settings;
// What on_retry reports, once per retry, before its wait.
struct client_retry_event {
  std::uint32_t attempt;  // the attempt that failed, 1-based
  duration delay;         // the wait before the next one
  error_code error;       // its error, if it ended with one
  unsigned status;        // its response's status, 0 without a response
  bool retry_after;       // the wait began with the server's Retry-After, not the backoff alone
  // A 429 or 503 carried a Retry-After that could not be read (malformed,
  // or a date out of range): the backoff was waited instead.
  bool retry_after_malformed = false;
};

// What on_call_finished reports, once per call that returns.
struct client_call_event {
  std::uint32_t attempts;  // attempts that went past the breaker: 0 if it refused the first
  error_code error;        // what ended the call, if not a response
  unsigned status;         // the response's status, 0 without one
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  const endpoint* to = nullptr;  // where it went (an upstream's: the last replica); valid during the callback only
  duration elapsed{};            // the whole call, waits included, on the client's clock
  // Of `elapsed`, waited for a Retry-After another call got from this host
  // (client_options::max_host_hold).
  duration held{};
  // The upstream it went to (upstream.hpp), empty for an endpoint; valid
  // during the callback only.
  std::string_view upstream{};
};

// What on_attempt_finished reports, once per attempt that reached its
// connection (an HTTP request sent, or the failure to send it).
struct client_attempt_event {
  std::uint32_t attempt;  // 1-based
  error_code error;       // what ended it, if not a response
  unsigned status;        // the response's status, 0 without one
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  const endpoint* to = nullptr;  // where it went (an upstream's replica); valid during the callback only
  duration elapsed{};            // the attempt: its connection, the request written, the response read
  std::string_view upstream{};   // the upstream's name, empty for an endpoint
};

class client_options {
 public:
  // What client_options{} holds, named: the defaults below.
  static client_options standard() { return {}; }

  // The whole call: positive, or duration::max() for none. 30 s.
  client_options total_timeout(duration d) const {
    if (d <= duration::zero()) throw std::invalid_argument("http::client_options::total_timeout: must be positive");
    return resilience::detail::with_option(*this, &client_options::total_, d);
  }
  // Each attempt: positive, at most total_timeout() (checked when a client
  // is built). 10 s.
  client_options attempt_timeout(duration d) const {
    if (d <= duration::zero()) throw std::invalid_argument("http::client_options::attempt_timeout: must be positive");
    return resilience::detail::with_option(*this, &client_options::attempt_, d);
  }
  // Retries after the first attempt: 0 (none) to 100. 3.
  client_options max_retries(std::uint32_t n) const {
    if (n > 100) throw std::invalid_argument("http::client_options::max_retries: must be at most 100");
    return resilience::detail::with_option(*this, &client_options::retries_, n);
  }
  // The waits between attempts when the server names none: the whole
  // schedule, its jitter included (full unless the backoff was made with
  // another). Exponential from 2 s, doubling, capped at 30 s.
  client_options backoff(const resilience::backoff& b) const {
    return resilience::detail::with_option(*this, &client_options::backoff_, b);
  }
  // Under a deadline, scales a backoff wait down to an equal share of the
  // time left for the retries left, so that a call with a short deadline
  // still gets its retries (as retry_policy::fit_to_time_left; a Retry-After
  // is never shortened). On by default; off gives up when a wait would end
  // past the deadline, as Polly and Resilience4j do.
  client_options fit_to_time_left(bool on) const {
    return resilience::detail::with_option(*this, &client_options::fit_, on);
  }
  // Changes only the jitter of the current schedule (as retry_policy::jitter).
  client_options jitter(resilience::jitter j) const {
    return resilience::detail::with_option(*this, &client_options::backoff_, backoff_.with_jitter(j));
  }
  // The longest Retry-After honoured; a response asking for longer (or for a
  // wait past the total deadline) ends the call as it is. Positive. 30 s.
  client_options max_retry_after(duration d) const {
    auto o = *this;
    o.retry_after_ = o.retry_after_.max_retry_after(d);  // validates
    return o;
  }
  // Waits the backoff's jittered delay on top of an honoured Retry-After,
  // drawn over at least half the Retry-After, so that the clients one burst
  // of 503s turned away do not all return at the same moment (never sooner
  // than the server asked; retry_delay::after_then_backoff). On by default;
  // off waits the Retry-After exactly.
  client_options jitter_retry_after(bool on = true) const {
    return resilience::detail::with_option(*this, &client_options::retry_after_, retry_after_.jittered(on));
  }
  // Zero, the default: each call honours the Retry-After it gets, in its
  // own retries, as Polly and Resilience4j do. Positive: a 429 or 503 with a
  // Retry-After also holds back this client's other and later calls to that
  // host (endpoint key), for what the server asked and at most this long: an
  // attempt that would start in the hold waits the rest, spread over up to
  // the hold's length on top when Retry-After is jittered, if the rest fits
  // max_retry_after() and the call's time, else the call ends at once with
  // error::rate_limited, unsent. For APIs that limit each client and ask it
  // to stop (RFC 9110 §10.2.3). Off by default because against a server that
  // sheds bursts with a short Retry-After it costs more than it saves: every
  // held call waits out each 503 (docs/http/client.md has the figures).
  client_options max_host_hold(duration d) const {
    if (d < duration::zero()) throw std::invalid_argument("http::client_options::max_host_hold: must not be negative");
    return resilience::detail::with_option(*this, &client_options::max_hold_, d);
  }
  // The whole Retry-After rule at once, e.g. with the wall clock an
  // HTTP-date is measured from when a response has no Date header:
  // retry_after(retry_after_delay{}.max_retry_after(10s).wall_clock(&now)).
  client_options retry_after(retry_after_delay r) const {
    return resilience::detail::with_option(*this, &client_options::retry_after_, r);
  }
  // Which statuses and network errors are retried. http::classifier{}:
  // 408, 429, 500, 502, 503, 504, and the transient network errors.
  client_options retry_classifier(http::classifier c) const {
    return resilience::detail::with_option(*this, &client_options::classifier_, std::move(c));
  }
  // Every endpoint's breaker, judging attempts: opens when half the attempts
  // of the last 30 s failed, once there were 20 of them, for 5 s. A breaker
  // is for a dependency that is down; one that fails some of its requests is
  // the retry's (and the budget's) to ride out. Polly's defaults (10% of at
  // least 100, which our tests show opening against an upstream failing 30%
  // of its attempts, and then failing every call for the break, where the
  // retries alone recover 99% of them; and no opening at all below 100 calls
  // in 30 s): failure_ratio(0.1).minimum_calls(100).time_window(30s)
  // .open_duration(5s) (every setting, since this replaces them all).
  client_options breaker(breaker_options b) const {
    return resilience::detail::with_option(*this, &client_options::breaker_, std::move(b));
  }
  // Client-side adaptive throttling (the SRE book's, adaptive_throttle.hpp),
  // one throttle per endpoint key: an attempt to a host that has been
  // turning requests away is refused here with probability
  // max(0, (requests - k * accepts) / (requests + 1)) over the window, and
  // the call ends with error::throttled, sent nowhere (not retried). An
  // accept is a response that is neither a 429 nor a 5xx; a cancelled
  // attempt counts for nothing, a refused one as a request. Where the
  // breaker waits for a host to fail outright, this sheds the share of load
  // it keeps refusing. None by default.
  client_options adaptive_throttle(adaptive_throttle_options o) const {
    return resilience::detail::with_option(*this, &client_options::throttle_, std::optional(std::move(o)));
  }
  client_options breaker_limits(breaker_registry_options r) const {
    return resilience::detail::with_option(*this, &client_options::breaker_limits_, r);
  }
  // The header each attempt sends its time left in (grpc-timeout, or a
  // milliseconds header); none by default: a header a server does not know
  // tells it nothing, and it tells every server your timeouts.
  client_options deadline_header(http::deadline_header h) const {
    return resilience::detail::with_option(*this, &client_options::header_, std::move(h));
  }
  // Taken off the time sent, for the response's way back: zero or more, and
  // shorter than attempt_timeout() (checked when a client is built; the
  // default only when a deadline_header() is set). 50 ms.
  client_options deadline_margin(duration d) const {
    if (d < duration::zero()) throw std::invalid_argument("http::client_options::deadline_margin: must not be negative");
    auto o = *this;
    o.margin_ = d;
    o.margin_given_ = true;
    return o;
  }
  // The largest response body read; a larger one ends the attempt with
  // beast::http::error::body_limit (not retried). At least 1. 8 MiB.
  client_options max_response_body(std::uint64_t bytes) const {
    if (bytes == 0) throw std::invalid_argument("http::client_options::max_response_body: must be at least 1");
    return resilience::detail::with_option(*this, &client_options::max_body_, bytes);
  }
  // The largest response header (status line and fields) read; a larger one
  // ends the attempt with beast::http::error::header_limit (not retried).
  // At least 1. 8 KiB, Beast's own default: raise it for a service that
  // sends large cookies or tokens in its headers.
  client_options max_response_header(std::uint32_t bytes) const {
    if (bytes == 0) throw std::invalid_argument("http::client_options::max_response_header: must be at least 1");
    return resilience::detail::with_option(*this, &client_options::max_header_, bytes);
  }
  client_options pool(connection_pool_options p) const {
    return resilience::detail::with_option(*this, &client_options::pool_, std::move(p));
  }
  // A retry budget shared by every call of this client (retry_budget.hpp:
  // gRPC's retry_token_budget, or a retry_ratio_budget), told how each attempt
  // went and asked as each retry is sent: when most calls fail, retrying stops
  // instead of multiplying the load. A refused retry ends the call with its
  // last response or error, and runs on_budget_refused(). Referred to: it
  // must outlive the client. Replaces the per-host budget (the default,
  // below).
  template <resilience::retry_budget B>
  client_options budget(B& b) const {
    auto o = resilience::detail::with_option(*this, &client_options::budget_, resilience::detail::budget_ref::to(b));
    o.host_budget_ = std::monostate{};
    return o;
  }
  // A retry budget per endpoint key (an upstream's name for an upstream's
  // calls), made by the client as it first calls the host: gRPC keeps its
  // retry throttle per server (gRFC A6), so that one failing host does not
  // spend the retries the others may need. The default: a ratio budget of
  // 20% of the calls of the last 10 s, with a floor of 10 retries a second
  // (Finagle's and Linkerd's defaults), so that the first moments of an
  // outage, before a breaker has seen enough, add at most a fifth to the
  // load instead of multiplying it by the retries.
  // Each is dropped after breaker_limits().idle_after() without calls.
  // Replaces budget(b); on_budget_refused() runs for these too. Throws
  // std::invalid_argument here for settings retry_token_budget would refuse.
  client_options budget_per_host(retry_token_budget_settings s) const {
    retry_token_budget{s.max_tokens, s.token_ratio};  // validates
    auto o = resilience::detail::with_option(*this, &client_options::host_budget_, host_budget_settings{s});
    o.budget_ = {};
    return o;
  }
  client_options budget_per_host(retry_ratio_budget_options r) const {
    auto o = resilience::detail::with_option(*this, &client_options::host_budget_, host_budget_settings{r});
    o.budget_ = {};
    return o;
  }
  // No retry budget: every retry the classifier allows is made.
  client_options no_retry_budget() const {
    auto o = resilience::detail::with_option(*this, &client_options::host_budget_, host_budget_settings{});
    o.budget_ = {};
    return o;
  }
  template <class B>
  client_options budget(B&&) const
    requires(!std::is_lvalue_reference_v<B>)
  = delete;  // a temporary would be gone before the client
  // Runs on the calling coroutine's executor when the budget refuses a
  // retry. Must not throw.
  client_options on_budget_refused(std::function<void(const budget_refusal&)> f) const {
    return resilience::detail::with_option(*this, &client_options::on_budget_refused_, std::move(f));
  }
  // Runs on the calling coroutine's executor before each retry's wait. Must
  // not throw.
  client_options on_retry(std::function<void(const client_retry_event&)> f) const {
    return resilience::detail::with_option(*this, &client_options::on_retry_, std::move(f));
  }
  // Runs on the calling coroutine's executor as a call returns, with how many
  // attempts it took (per-attempt metrics without wrapping each call). Not
  // run for a call whose coroutine is destroyed unfinished. Must not throw.
  client_options on_call_finished(std::function<void(const client_call_event&)> f) const {
    return resilience::detail::with_option(*this, &client_options::on_finished_, std::move(f));
  }
  // Runs on the calling coroutine's executor as each attempt ends that got
  // past the breaker (per-replica durations: http::client_meter). Must not
  // throw.
  client_options on_attempt_finished(std::function<void(const client_attempt_event&)> f) const {
    return resilience::detail::with_option(*this, &client_options::on_attempt_, std::move(f));
  }
  // Where the client's calls report their events (event.hpp: retries,
  // budget refusals, the breakers' and the throttle's, attempt timeouts,
  // host holds): this sink, else the caller's (request(to, req, ctx) with a
  // server handler's or a pipeline's context), else none. It must outlive
  // the client; a temporary is refused.
  //   rhttp::client upstream{rhttp::client_options{}.events(telemetry.events("upstream"))};
  client_options events(event_sink& sink) const noexcept {
    return resilience::detail::with_option(*this, &client_options::events_, &sink);
  }
  client_options events(event_sink&&) const = delete;
  event_sink* events() const noexcept { return events_; }

  duration total_timeout() const noexcept { return total_; }
  duration attempt_timeout() const noexcept { return attempt_; }
  std::uint32_t max_retries() const noexcept { return retries_; }
  const resilience::backoff& backoff() const noexcept { return backoff_; }
  bool fit_to_time_left() const noexcept { return fit_; }
  const retry_after_delay& retry_after() const noexcept { return retry_after_; }
  duration max_host_hold() const noexcept { return max_hold_; }
  const http::classifier& retry_classifier() const noexcept { return classifier_; }
  const breaker_options& breaker() const noexcept { return breaker_; }
  const breaker_registry_options& breaker_limits() const noexcept { return breaker_limits_; }
  const std::optional<adaptive_throttle_options>& adaptive_throttle() const noexcept { return throttle_; }
  const std::optional<http::deadline_header>& deadline_header() const noexcept { return header_; }
  duration deadline_margin() const noexcept { return margin_; }
  bool deadline_margin_given() const noexcept { return margin_given_; }
  std::uint64_t max_response_body() const noexcept { return max_body_; }
  std::uint32_t max_response_header() const noexcept { return max_header_; }
  const connection_pool_options& pool() const noexcept { return pool_; }
  const std::function<void(const client_retry_event&)>& on_retry() const noexcept { return on_retry_; }
  const std::function<void(const client_call_event&)>& on_call_finished() const noexcept { return on_finished_; }
  const std::function<void(const client_attempt_event&)>& on_attempt_finished() const noexcept { return on_attempt_; }
  const resilience::detail::budget_ref& budget() const noexcept { return budget_; }
  // What budget_per_host() set: std::monostate when it was not.
  using host_budget_settings = std::variant<std::monostate, retry_token_budget_settings, retry_ratio_budget_options>;
  const host_budget_settings& budget_per_host() const noexcept { return host_budget_; }
  const std::function<void(const budget_refusal&)>& on_budget_refused() const noexcept { return on_budget_refused_; }

 private:
  duration total_ = std::chrono::seconds(30);
  duration attempt_ = std::chrono::seconds(10);
  std::uint32_t retries_ = 3;
  resilience::backoff backoff_ =
      resilience::backoff::exponential(std::chrono::seconds(2), 2.0, std::chrono::seconds(30));
  bool fit_ = retry_options{}.fit_to_time_left;
  retry_after_delay retry_after_ = retry_after_delay{}.max_retry_after(std::chrono::seconds(30));
  duration max_hold_{};  // no hold
  http::classifier classifier_;
  breaker_options breaker_ = breaker_options{}
                                 .failure_ratio(0.5)
                                 .minimum_calls(20)
                                 .time_window(std::chrono::seconds(30))
                                 .open_duration(std::chrono::seconds(5));
  breaker_registry_options breaker_limits_;
  std::optional<adaptive_throttle_options> throttle_;
  std::optional<http::deadline_header> header_;
  duration margin_ = std::chrono::milliseconds(50);
  bool margin_given_ = false;  // the default matters only with a header
  std::uint64_t max_body_ = 8u << 20;
  std::uint32_t max_header_ = 8u << 10;
  connection_pool_options pool_;
  std::function<void(const client_retry_event&)> on_retry_;
  std::function<void(const client_call_event&)> on_finished_;
  std::function<void(const client_attempt_event&)> on_attempt_;
  resilience::detail::budget_ref budget_;
  host_budget_settings host_budget_ = retry_ratio_budget_options{}.ratio(0.2);  // see budget_per_host()
  std::function<void(const budget_refusal&)> on_budget_refused_;
  event_sink* events_ = nullptr;
};

// For one call. A call inside a caller's call takes the caller's context
// itself (client::request(to, req, ctx)): its deadline, properties and sink.
class request_options {
 public:
  // Done by then, whatever total_timeout() allows.
  request_options deadline(time_point at) const noexcept {
    return resilience::detail::with_option(*this, &request_options::deadline_, at);
  }
  // Whether repeating this request is harmless, instead of is_idempotent(req)
  // (or an http::idempotent in the caller's context).
  request_options idempotent(bool yes) const noexcept {
    return resilience::detail::with_option(*this, &request_options::idempotent_, yes);
  }
  time_point deadline() const noexcept { return deadline_; }
  std::optional<bool> idempotent() const noexcept { return idempotent_; }

 private:
  time_point deadline_ = time_point::max();
  std::optional<bool> idempotent_;
};

}  // namespace resilience::http
