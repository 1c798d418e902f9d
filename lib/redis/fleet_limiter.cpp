// The shared quota's state behind the lease: the round trip to Redis (one at
// a time, shared by every caller that finds the lease spent), the breaker
// that falls back when Redis fails, and the probe that brings it back.
#include <resilience/redis/fleet_limiter.hpp>

#include <resilience/backoff.hpp>
#include <resilience/detail/with_option.hpp>
#include <resilience/rate_limiter.hpp>

#include <boost/asio/post.hpp>
#include <boost/system/errc.hpp>

#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <random>
#include <stdexcept>
#include <vector>

namespace resilience::redis {

namespace asio = boost::asio;
using namespace std::chrono_literals;

fleet_limiter_options fleet_limiter_options::key(std::string k) const {
  if (k.empty()) throw std::invalid_argument("redis::fleet_limiter_options::key: empty");
  if (k.size() > 200) throw std::invalid_argument("redis::fleet_limiter_options::key: longer than 200 bytes");
  if (k.find_first_of("{}") != std::string::npos)
    throw std::invalid_argument("redis::fleet_limiter_options::key: '{' or '}' (the library adds the hash tag)");
  return resilience::detail::with_option(*this, &fleet_limiter_options::key_, std::move(k));
}

fleet_limiter_options fleet_limiter_options::token_bucket(std::uint32_t tokens, duration per,
                                                        std::uint32_t burst) const {
  constexpr std::uint32_t max = 0x7fffffff;
  if (tokens == 0 || tokens > max) throw std::invalid_argument("redis::fleet_limiter_options::token_bucket: tokens not in [1, 2^31 - 1]");
  if (burst == 0 || burst > max) throw std::invalid_argument("redis::fleet_limiter_options::token_bucket: burst not in [1, 2^31 - 1]");
  if (per <= duration::zero()) throw std::invalid_argument("redis::fleet_limiter_options::token_bucket: per not positive");
  if (std::chrono::duration_cast<std::chrono::microseconds>(per).count() / tokens < 1)
    throw std::invalid_argument("redis::fleet_limiter_options::token_bucket: more than one token a microsecond");
  auto o = *this;
  o.tokens_ = tokens;
  o.per_ = per;
  o.burst_ = burst;
  if (o.max_lease_ > burst) o.max_lease_ = burst;
  return o;
}

fleet_limiter_options fleet_limiter_options::max_wait(duration d) const {
  if (d < duration::zero()) throw std::invalid_argument("redis::fleet_limiter_options::max_wait: negative");
  return resilience::detail::with_option(*this, &fleet_limiter_options::max_wait_, d);
}

fleet_limiter_options fleet_limiter_options::max_lease(std::uint32_t n) const {
  if (n == 0 || n > burst_) throw std::invalid_argument("redis::fleet_limiter_options::max_lease: not in [1, burst]");
  return resilience::detail::with_option(*this, &fleet_limiter_options::max_lease_, n);
}

fleet_limiter_options fleet_limiter_options::lease_lifetime(duration d) const {
  if (d <= duration::zero()) throw std::invalid_argument("redis::fleet_limiter_options::lease_lifetime: not positive");
  return resilience::detail::with_option(*this, &fleet_limiter_options::lease_lifetime_, d);
}

fleet_limiter_options fleet_limiter_options::fallback(fallback_mode m) const {
  if (m != fallback_mode::local_share && m != fallback_mode::fail_open && m != fallback_mode::fail_closed)
    throw std::invalid_argument("redis::fleet_limiter_options::fallback: unknown mode");
  return resilience::detail::with_option(*this, &fleet_limiter_options::fallback_, m);
}

fleet_limiter_options fleet_limiter_options::replicas_hint(std::uint32_t n) const {
  if (n == 0 || n > 65536) throw std::invalid_argument("redis::fleet_limiter_options::replicas_hint: not in [1, 65536]");
  return resilience::detail::with_option(*this, &fleet_limiter_options::replicas_hint_, n);
}

fleet_limiter_options fleet_limiter_options::clock_from(time_source s) const {
  if (s != time_source::redis && s != time_source::local)
    throw std::invalid_argument("redis::fleet_limiter_options::clock_from: unknown source");
  return resilience::detail::with_option(*this, &fleet_limiter_options::time_source_, s);
}


namespace detail {
namespace {

// GCRA over n permits. KEYS[1]: the bucket's theoretical arrival time in us
// (when it would be full again); KEYS[2]: the replicas seen, scored by when.
// ARGV: interval us, burst, permits wanted, now in us ("" for Redis's TIME),
// this replica's id, how long a replica counts after its last round trip
// (us), how far ahead a lease may be reserved (us). Returns {granted, us,
// replicas}: with permits granted, the us until they may be spent (0: now);
// with none, the us until the next permit is free. With none free now, the
// permits are reserved if the last of them is due within the reservation's
// reach, and may be spent from then: the bucket counts them when they are
// due, so replicas over the quota take turns, one round trip per lease,
// instead of racing for each permit. Numbers are written with %.0f: Lua's
// own conversion would round them. A bucket on the caller's clock keeps a
// minute of margin in its expiry (that clock need not run at Redis's pace: a
// test's manual_clock). replicate_commands lets the script write after TIME
// on Redis 3.2 to 4 (effects replication is the only kind from Redis 5 on).
constexpr const char* gcra_script = R"lua(
if redis.replicate_commands then redis.replicate_commands() end
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local now
local margin_ms = 0
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[4])
  margin_ms = 60000
end
local ahead = tonumber(ARGV[7])
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat or tat < now then tat = now end
local tau = (burst - 1) * interval
local granted = math.min(want, math.floor((now + tau - tat) / interval) + 1)
local wait = 0
if granted <= 0 then
  granted = math.min(want, math.floor((now + ahead + tau - tat) / interval) + 1)
  if granted > 0 then
    wait = tat + (granted - 1) * interval - tau - now
  else
    granted = 0
    wait = tat - tau - now
  end
end
if granted > 0 then
  tat = tat + granted * interval
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX',
             string.format('%.0f', math.ceil((tat - now) / 1000) + 1 + margin_ms))
end
local window = tonumber(ARGV[6])
redis.call('ZADD', KEYS[2], string.format('%.0f', now), ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('(%.0f', now - window))
redis.call('PEXPIRE', KEYS[2], string.format('%.0f', math.ceil(window / 1000)))
return {granted, wait, redis.call('ZCARD', KEYS[2])}
)lua";

std::string sha1_hex(const char* text) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text), std::strlen(text), digest);
  std::string hex(2 * SHA_DIGEST_LENGTH, '0');
  for (int i = 0; i < SHA_DIGEST_LENGTH; ++i) std::snprintf(&hex[2 * i], 3, "%02x", digest[i]);
  return hex;
}

std::string random_replica_id() {
  std::random_device rd;
  std::uint64_t v = (std::uint64_t(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

constexpr std::int64_t replica_window_us =
    std::chrono::duration_cast<std::chrono::microseconds>(limiter_defaults::replicas_window).count();
constexpr duration fail_closed_retry_after = limiter_defaults::probe_longest;

error_code protocol_error() { return boost::system::errc::make_error_code(boost::system::errc::protocol_error); }

class limiter_impl final : public limiter_core, public std::enable_shared_from_this<limiter_impl> {
 public:
  limiter_impl(asio::any_io_executor ex, connection_options c, fleet_limiter_options o)
      : executor_(ex),
        connection_(ex, std::move(c)),
        options_(std::move(o)),
        bucket_key_("rl:{" + options_.key() + "}"),
        replicas_key_(bucket_key_ + ":replicas"),
        replica_id_(random_replica_id()),
        script_sha_(sha1_hex(gcra_script)),
        // Rounded up: a permit never comes early, the fleet never admits more than asked.
        interval_us_((std::chrono::duration_cast<std::chrono::microseconds>(options_.per()).count() +
                      options_.tokens() - 1) /
                     options_.tokens()),
        lease_lifetime_us_(std::chrono::duration_cast<std::chrono::microseconds>(options_.lease_lifetime()).count()),
        replicas_(0) {}

  void refill(time_point now, std::function<void(permit_decision)> done) override {
    asio::dispatch(executor_, [self = shared_from_this(), now, done = std::move(done)]() mutable {
      self->refill_here(now, std::move(done));
    });
  }

  void reject() noexcept override { rejected_.fetch_add(1, std::memory_order_relaxed); }

  limiter_stats stats() const noexcept override {
    limiter_stats s;
    s.admitted = admitted_.load(std::memory_order_relaxed);
    s.admitted_by_fallback = admitted_by_fallback_.load(std::memory_order_relaxed);
    s.rejected = rejected_.load(std::memory_order_relaxed);
    s.round_trips = round_trips_.load(std::memory_order_relaxed);
    s.failed_round_trips = failed_round_trips_.load(std::memory_order_relaxed);
    s.fallbacks = fallbacks_.load(std::memory_order_relaxed);
    s.leased = leased_total_.load(std::memory_order_relaxed);
    s.replicas = replicas_.load(std::memory_order_relaxed);
    return s;
  }

  const fleet_limiter_options& options() const noexcept override { return options_; }

  void shutdown() noexcept override {
    shut_.store(true, std::memory_order_release);
    connection_.close();
  }

 protected:
  duration fallback_time_until_permit(time_point now) const noexcept override {
    switch (options_.fallback()) {
      case fallback_mode::fail_open:
        return duration::zero();
      case fallback_mode::fail_closed:
        return fail_closed_retry_after;
      case fallback_mode::local_share:
        break;
    }
    std::lock_guard lock(share_mutex_);
    return share_ ? share_->time_until_permit(now) : fail_closed_retry_after;
  }

  // The replicas that fell back do not come back together: each finds Redis
  // when its probe does, within about probe_longest of its return (while its
  // calls come). A replica back on the shared quota while others still spend
  // their local shares would draw the whole rate beside them. So for
  // return_hold() (longer than that spread by a whole `per`) a call needs a
  // permit from the local share too: until then, the replicas admit no more
  // than their shares, and any `per` after it starts after the last replica's
  // return, so the shared quota's bound holds over it.
  duration return_hold() const noexcept {
    return options_.per() <= duration::max() - 2 * limiter_defaults::probe_longest
               ? options_.per() + 2 * limiter_defaults::probe_longest
               : duration::max();
  }

  permit_decision held_take(time_point now) noexcept override {
    std::lock_guard lock(share_mutex_);
    if (!share_) return take_shared(now);
    // The share first: a call it turns away costs no leased permit and no round trip.
    if (const duration wait = share_->time_until_permit(now); wait > duration::zero())
      return {permit_decision::kind::rejected, wait};
    const permit_decision d = take_shared(now);
    if (d.what == permit_decision::kind::admitted && !share_->try_acquire(now)) {
      // Not expected (the share is only used under this lock): the permit goes back.
      leased_.fetch_add(1, std::memory_order_relaxed);
      admitted_.fetch_sub(1, std::memory_order_relaxed);
      return {permit_decision::kind::rejected, share_->time_until_permit(now)};
    }
    return d;
  }

  permit_decision fallback_take(time_point now) noexcept override {
    maybe_probe(now);
    switch (options_.fallback()) {
      case fallback_mode::fail_open:
        break;
      case fallback_mode::fail_closed:
        return {permit_decision::kind::rejected, fail_closed_retry_after};
      case fallback_mode::local_share: {
        std::lock_guard lock(share_mutex_);
        if (!share_ || !share_->try_acquire(now)) {
          return {permit_decision::kind::rejected, share_ ? share_->time_until_permit(now) : fail_closed_retry_after};
        }
        break;
      }
    }
    admitted_.fetch_add(1, std::memory_order_relaxed);
    admitted_by_fallback_.fetch_add(1, std::memory_order_relaxed);
    return {permit_decision::kind::admitted};
  }

 private:
  // On the executor.
  void refill_here(time_point now, std::function<void(permit_decision)> done) {
    if (shut_.load(std::memory_order_acquire)) return;  // the caller's frame goes with `done`, unresumed
    // A round trip may have come back (or the breaker opened) since the caller looked.
    const permit_decision d = try_take(now);
    if (d.what != permit_decision::kind::ask_redis) return done(d);
    waiting_.push_back(std::move(done));
    if (!in_flight_) start_round_trip(now);
  }

  void start_round_trip(time_point now) {
    in_flight_ = true;
    // The lease follows demand: doubled when spent in under half its
    // lifetime, halved when permits expired unspent.
    if (had_lease_) {
      const bool expired_unspent = leased_.load(std::memory_order_relaxed) > 0;
      if (expired_unspent)
        lease_size_ = std::max<std::uint32_t>(1, lease_size_ / 2);
      else if (now - lease_granted_at_ < options_.lease_lifetime() / 2)
        lease_size_ = std::min<std::uint32_t>(options_.max_lease(), lease_size_ * 2);
    }
    const auto want = std::clamp<std::uint64_t>(std::max<std::uint64_t>(lease_size_, waiting_.size()), 1,
                                                options_.max_lease());
    send(script_command(want, now), now,
         [self = shared_from_this(), now](error_code ec, const reply& r) { self->on_reply(ec, r, now); });
  }

  std::vector<std::string> script_command(std::uint64_t want, time_point now) const {
    std::string now_us;
    if (options_.clock_from() == time_source::local)
      now_us = std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count());
    return {"EVALSHA",
            script_sha_,
            "2",
            bucket_key_,
            replicas_key_,
            std::to_string(interval_us_),
            std::to_string(options_.burst()),
            std::to_string(want),
            std::move(now_us),
            replica_id_,
            std::to_string(replica_window_us),
            std::to_string(lease_lifetime_us_)};
  }

  // Runs the script (EVALSHA; after a NOSCRIPT, EVAL, which loads it once:
  // Redis restarted, or never ran it) and hands `done` its answer.
  using script_done = std::function<void(error_code, const reply&)>;
  void send(std::vector<std::string> args, time_point now, script_done done, bool first = true) {
    auto again = first ? args : std::vector<std::string>{};
    connection_.async_command(std::move(args), [self = shared_from_this(), now, first, again = std::move(again),
                                                done = std::move(done)](error_code ec, reply r) mutable {
      if (!ec && first && r.is_error() && r.text.rfind("NOSCRIPT", 0) == 0 && !self->shut_.load()) {
        again[0] = "EVAL";
        again[1] = gcra_script;
        self->send(std::move(again), now, std::move(done), false);
        return;
      }
      done(ec, r);
    });
  }

  struct grant {
    std::int64_t granted = 0, wait_us = 0, replicas = 0;
  };

  // The script's answer, or why there is none.
  static grant parse(const reply& r, error_code& ec) {
    grant g;
    if (ec) return g;
    if (r.type == reply::kind::array && r.elements.size() == 3 && r.elements[0].type == reply::kind::integer &&
        r.elements[1].type == reply::kind::integer && r.elements[2].type == reply::kind::integer) {
      g.granted = r.elements[0].integer;
      g.wait_us = r.elements[1].integer;
      g.replicas = r.elements[2].integer;
    } else {
      ec = protocol_error();  // an error reply (OOM, READONLY, a cluster redirect...) or a foreign script
    }
    return g;
  }

  // A lease from Redis replaces what is left of the last one (expired
  // permits are gone); a reserved one may be spent from its start, for
  // lease_lifetime(). Without a lease, calls are turned away without asking
  // again until a reservation could reach the next permit Redis announced.
  void apply(const grant& g, time_point now) {
    const auto seen = static_cast<std::uint32_t>(std::clamp<std::int64_t>(g.replicas, 0, 65536));
    replicas_.store(seen, std::memory_order_relaxed);
    // The local share divides by the most replicas heard of in the last one
    // to two windows (the largest count of this window and of the last): a
    // Redis restarted empty counts only those that reached it since, and a
    // share sized on that count would over-admit.
    const duration age = now - replicas_window_start_;
    if (age >= limiter_defaults::replicas_window) {
      replicas_last_window_ = age >= 2 * limiter_defaults::replicas_window ? 0 : replicas_this_window_;
      replicas_this_window_ = 0;
      replicas_window_start_ = now;
    }
    replicas_this_window_ = std::max(replicas_this_window_, seen);
    leased_total_.fetch_add(static_cast<std::uint64_t>(g.granted), std::memory_order_relaxed);
    const auto wait = std::chrono::microseconds(std::max<std::int64_t>(g.wait_us, 0));
    const time_point start = g.granted > 0 ? saturating_add(now, wait) : now;
    had_lease_ = g.granted > 0;
    lease_granted_at_ = start;
    const auto tick = [](time_point t) { return t.time_since_epoch().count(); };
    // Refused: Redis reserves a lease once its last permit is due within
    // lease_lifetime(), so asking earlier would be refused again.
    const duration reach = options_.lease_lifetime();
    time_point ask_again = start;
    if (g.granted == 0) ask_again = wait > reach ? saturating_add(now, wait - reach) : now;
    permit_expected_at_.store(wait > duration::zero() ? tick(saturating_add(now, wait)) : 0, std::memory_order_relaxed);
    ask_again_at_.store(tick(ask_again) > tick(now) ? tick(ask_again) : 0, std::memory_order_relaxed);
    lease_expires_.store(tick(saturating_add(start, options_.lease_lifetime())), std::memory_order_relaxed);
    leased_.store(g.granted, std::memory_order_release);  // last: take_shared reads it first
  }

  void on_reply(error_code ec, const reply& r, time_point now) {
    in_flight_ = false;
    round_trips_.fetch_add(1, std::memory_order_relaxed);
    const grant g = parse(r, ec);
    auto waiters = std::move(waiting_);
    waiting_.clear();
    // Gone: the callers' frames are destroyed with their handlers, unresumed
    // (resumed, they would read the limiter).
    if (shut_.load(std::memory_order_acquire)) return;
    if (ec) {
      failed_round_trips_.fetch_add(1, std::memory_order_relaxed);
      const bool fell_back = fall_back();
      // The failure is told to the call that started the round trip (the
      // first waiter), once; the others are decided by the fallback.
      for (std::size_t i = 0; i < waiters.size(); ++i) {
        permit_decision d = try_take(now);
        if (i == 0) {
          d.round_trip_failed = ec;
          d.fell_back = fell_back;
        }
        waiters[i](d);
      }
      return;
    }
    apply(g, now);
    for (auto& w : waiters) w(try_take(now));  // a permit, a refusal until the next one, or ask again
  }

  // Opens the breaker: the fallback decides until the probe reaches Redis.
  // False when it was open already.
  bool fall_back() {
    if (falling_back_.load(std::memory_order_relaxed)) return false;
    if (options_.fallback() == fallback_mode::local_share) {
      const std::uint32_t heard = std::max(replicas_this_window_, replicas_last_window_);
      const std::uint32_t replicas = heard ? heard : options_.replicas_hint();
      // This replica's share: tokens per (per × replicas), a burst of burst /
      // replicas. A share the local limiter cannot express (per × replicas
      // past its range) admits nothing: fail closed rather than throw here.
      std::unique_ptr<resilience::detail::rate_limiter_core> share;
      try {
        if (options_.per() <= duration::max() / replicas)
          share = std::make_unique<resilience::detail::rate_limiter_core>(resilience::rate_limiter_options{}.token_bucket(
              options_.tokens(), options_.per() * replicas, std::max<std::uint32_t>(1, options_.burst() / replicas)));
      } catch (const std::exception&) {
      }
      std::lock_guard lock(share_mutex_);
      share_ = std::move(share);
    }
    leased_.store(0, std::memory_order_relaxed);
    fallbacks_.fetch_add(1, std::memory_order_relaxed);
    falling_back_.store(true, std::memory_order_release);
    // The backoff goes on from where the last probe left it: a Redis that
    // answers once and fails again is probed less and less often.
    next_probe_at_.store(steady_ticks() + to_ticks(probe_delay()), std::memory_order_relaxed);
    return true;
  }

  // The breaker's half-open step, started by a call that finds a probe due
  // (the calls' own traffic drives it: an idle limiter holds no timer, so it
  // never keeps io_context::run() from returning). One PING at a time.
  void maybe_probe(time_point now) noexcept {
    if (steady_ticks() < next_probe_at_.load(std::memory_order_relaxed)) return;
    bool idle = false;
    if (!probing_.compare_exchange_strong(idle, true, std::memory_order_acq_rel)) return;
    try {
      asio::post(executor_, [self = shared_from_this(), now] { self->probe(now); });
    } catch (...) {
      probing_.store(false, std::memory_order_release);
    }
  }

  // The script itself, for one permit: a Redis that answers PING but refuses
  // the script (READONLY, OOM, MOVED, an ACL) keeps the breaker open.
  void probe(time_point now) {
    if (shut_.load(std::memory_order_acquire)) return;
    send(script_command(1, now), now, [self = shared_from_this(), now](error_code ec, const reply& r) {
      if (self->shut_.load(std::memory_order_acquire)) return;
      const grant g = parse(r, ec);
      if (!ec) {
        self->probe_attempt_ = 0;
        self->resume(now);
        self->apply(g, now);
      } else {
        ++self->probe_attempt_;
        self->next_probe_at_.store(steady_ticks() + to_ticks(self->probe_delay()), std::memory_order_relaxed);
      }
      self->probing_.store(false, std::memory_order_release);
    });
  }

  // Full jitter over an exponential schedule (limiter_defaults): replicas
  // that lost Redis together do not come back together.
  duration probe_delay() {
    const duration nominal = probe_backoff().nominal(probe_attempt_ + 1);
    std::uniform_int_distribution<duration::rep> draw(0, nominal.count());
    return duration(draw(jitter_));
  }
  static const backoff& probe_backoff() {
    static const backoff schedule = backoff::exponential(limiter_defaults::probe_first, 2.0, limiter_defaults::probe_longest);
    return schedule;
  }
  static std::int64_t steady_ticks() noexcept { return std::chrono::steady_clock::now().time_since_epoch().count(); }
  static std::int64_t to_ticks(duration d) noexcept {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(d).count();
  }

  // Back on the shared quota; with a local share, held to it as well for
  // return_hold(): see held_take.
  void resume(time_point now) {
    leased_.store(0, std::memory_order_relaxed);
    lease_expires_.store(0, std::memory_order_relaxed);
    permit_expected_at_.store(0, std::memory_order_relaxed);
    ask_again_at_.store(0, std::memory_order_relaxed);
    if (options_.fallback() == fallback_mode::local_share)
      held_until_.store(saturating_add(now, return_hold()).time_since_epoch().count(), std::memory_order_relaxed);
    had_lease_ = false;
    resumed_untold_.store(true, std::memory_order_relaxed);
    falling_back_.store(false, std::memory_order_release);
  }

  asio::any_io_executor executor_;
  connection connection_;
  const fleet_limiter_options options_;
  const std::string bucket_key_;
  const std::string replicas_key_;
  const std::string replica_id_;
  const std::string script_sha_;
  const std::int64_t interval_us_;
  const std::int64_t lease_lifetime_us_;  // also how far ahead a lease may be reserved

  // On the executor.
  bool in_flight_ = false;
  std::vector<std::function<void(permit_decision)>> waiting_;
  std::uint32_t lease_size_ = 1;
  bool had_lease_ = false;
  time_point lease_granted_at_{};
  std::uint32_t probe_attempt_ = 0;
  std::uint32_t replicas_this_window_ = 0, replicas_last_window_ = 0;
  time_point replicas_window_start_{};
  std::minstd_rand jitter_{std::random_device{}()};

  mutable std::mutex share_mutex_;
  std::unique_ptr<resilience::detail::rate_limiter_core> share_;

  std::atomic<bool> shut_{false};
  std::atomic<bool> probing_{false};
  std::atomic<std::int64_t> next_probe_at_{0};  // steady_clock ticks
  std::atomic<std::uint32_t> replicas_;
  std::atomic<std::uint64_t> admitted_by_fallback_{0}, rejected_{0}, round_trips_{0}, failed_round_trips_{0},
      fallbacks_{0}, leased_total_{0};
};

}  // namespace

std::shared_ptr<limiter_core> limiter_core::make(asio::any_io_executor ex, connection_options c,
                                                 fleet_limiter_options o) {
  if (o.key().empty()) throw std::invalid_argument("redis::fleet_limiter: the options name no key");
  return std::make_shared<limiter_impl>(std::move(ex), std::move(c), std::move(o));
}

}  // namespace detail
}  // namespace resilience::redis
