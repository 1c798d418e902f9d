// An upstream's replica set (http/upstream.hpp, http/detail/upstream_core.hpp).
#include <resilience/detail/with_option.hpp>
#include <resilience/http/detail/upstream_core.hpp>
#include <resilience/http/upstream.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace resilience::http {

namespace {

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}

}  // namespace

// -- options --

outlier_detection_options outlier_detection_options::consecutive_5xx(std::uint32_t n) const {
  return resilience::detail::with_option(*this, &outlier_detection_options::consecutive_5xx_, n);
}
outlier_detection_options outlier_detection_options::consecutive_gateway_failure(std::uint32_t n) const {
  return resilience::detail::with_option(*this, &outlier_detection_options::consecutive_gateway_, n);
}
outlier_detection_options outlier_detection_options::interval(duration d) const {
  require(d > duration::zero(), "http::outlier_detection_options::interval: must be positive");
  return resilience::detail::with_option(*this, &outlier_detection_options::interval_, d);
}
outlier_detection_options outlier_detection_options::base_ejection_time(duration d) const {
  require(d > duration::zero(), "http::outlier_detection_options::base_ejection_time: must be positive");
  return resilience::detail::with_option(*this, &outlier_detection_options::base_ejection_, d);
}
outlier_detection_options outlier_detection_options::max_ejection_time(duration d) const {
  require(d > duration::zero(), "http::outlier_detection_options::max_ejection_time: must be positive");
  return resilience::detail::with_option(*this, &outlier_detection_options::max_ejection_, d);
}
outlier_detection_options outlier_detection_options::max_ejection_percent(std::uint32_t percent) const {
  require(percent <= 100, "http::outlier_detection_options::max_ejection_percent: must be at most 100");
  return resilience::detail::with_option(*this, &outlier_detection_options::max_percent_, percent);
}
outlier_detection_options outlier_detection_options::success_rate(double stdev_factor, std::uint32_t minimum_hosts,
                                                                  std::uint32_t request_volume) const {
  require(std::isfinite(stdev_factor) && stdev_factor >= 0,
          "http::outlier_detection_options::success_rate: stdev_factor must be finite and not negative");
  require(minimum_hosts >= 1, "http::outlier_detection_options::success_rate: minimum_hosts must be at least 1");
  require(request_volume >= 1, "http::outlier_detection_options::success_rate: request_volume must be at least 1");
  return resilience::detail::with_option(*this, &outlier_detection_options::success_rate_,
                                         std::optional(success_rate_rule{stdev_factor, minimum_hosts, request_volume}));
}
outlier_detection_options outlier_detection_options::failure_percentage(std::uint32_t threshold,
                                                                        std::uint32_t minimum_hosts,
                                                                        std::uint32_t request_volume) const {
  require(threshold <= 100, "http::outlier_detection_options::failure_percentage: threshold must be at most 100");
  require(minimum_hosts >= 1, "http::outlier_detection_options::failure_percentage: minimum_hosts must be at least 1");
  require(request_volume >= 1,
          "http::outlier_detection_options::failure_percentage: request_volume must be at least 1");
  return resilience::detail::with_option(
      *this, &outlier_detection_options::failure_percentage_,
      std::optional(failure_percentage_rule{threshold, minimum_hosts, request_volume}));
}

upstream_options upstream_options::name(std::string n) const {
  require(!n.empty() && n.size() <= 200, "http::upstream_options::name: must be 1 to 200 bytes");
  return resilience::detail::with_option(*this, &upstream_options::name_, std::move(n));
}
upstream_options upstream_options::replicas(std::vector<endpoint> list) const {
  for (const auto& e : list) e.validate();
  return resilience::detail::with_option(*this, &upstream_options::replicas_, std::move(list));
}
upstream_options upstream_options::resolve(std::string host, std::uint16_t port, bool tls) const {
  endpoint e{std::move(host), port, tls, {}};
  e.validate();
  return resilience::detail::with_option(*this, &upstream_options::resolve_, std::optional(std::move(e)));
}
upstream_options upstream_options::resolve_every(duration d) const {
  require(d > duration::zero(), "http::upstream_options::resolve_every: must be positive");
  return resilience::detail::with_option(*this, &upstream_options::resolve_every_, d);
}
upstream_options upstream_options::ewma_decay(duration d) const {
  require(d > duration::zero(), "http::upstream_options::ewma_decay: must be positive");
  return resilience::detail::with_option(*this, &upstream_options::ewma_decay_, d);
}
upstream_options upstream_options::warm_up(duration d) const {
  require(d >= duration::zero(), "http::upstream_options::warm_up: must not be negative");
  return resilience::detail::with_option(*this, &upstream_options::warm_up_, d);
}
upstream_options upstream_options::panic_threshold(std::uint32_t percent) const {
  require(percent <= 100, "http::upstream_options::panic_threshold: must be at most 100");
  return resilience::detail::with_option(*this, &upstream_options::panic_threshold_, percent);
}

std::size_t upstream_status::ejected() const noexcept {
  return static_cast<std::size_t>(std::count_if(replicas.begin(), replicas.end(), [](auto& r) { return r.ejected; }));
}

// -- the handle --

upstream::upstream(upstream_options options) {
  require(!options.replicas().empty() || options.resolved_name(),
          "http::upstream: the options name no replica and no name to resolve");
  core_ = std::make_shared<detail::upstream_core>(std::move(options));
}
const std::string& upstream::name() const noexcept { return core_->name(); }
const upstream_options& upstream::options() const noexcept { return core_->options(); }
upstream_status upstream::status() const { return core_->status(steady_clock{}.now()); }
upstream_status upstream::status(time_point now) const { return core_->status(now); }

namespace detail {

namespace {

// Latency, in nanoseconds as a double: the EWMA's unit.
double nanoseconds(duration d) noexcept { return static_cast<double>(d.count()); }

// A replica that has answered nothing yet costs the set's typical latency,
// or this before any replica has answered.
constexpr double unknown_latency_ns = 100e6;  // 100 ms

// The warm-up's least: a replica just in takes part in one pick in this many.
constexpr double warm_up_factor = 10.0;

std::string default_name(const upstream_options& o) {
  if (!o.name().empty()) return o.name();
  if (o.resolved_name()) return o.resolved_name()->key();
  return o.replicas().front().key();
}

}  // namespace

replica::replica(endpoint e, std::uint32_t i, time_point t) : to(std::move(e)), key(to.key()), id(i), joined(t) {}

upstream_core::upstream_core(upstream_options o) : options_(std::move(o)), name_(default_name(options_)) {
  upstream_news ignored;
  for (const auto& e : options_.replicas()) add(e, time_point::min(), ignored);
  if (auto* registry = options_.meter()) {
    const char* help = "The replicas of an upstream, in or ejected.";
    in_gauge_ = registry->gauge("resilience.http.upstream.replicas", {{"upstream.name", name_}, {"state", "in"}}, help);
    ejected_gauge_ =
        registry->gauge("resilience.http.upstream.replicas", {{"upstream.name", name_}, {"state", "ejected"}}, help);
  }
  publish();
}

void upstream_core::publish() noexcept {
  if (!in_gauge_) return;
  const auto ejected = std::count_if(replicas_.begin(), replicas_.end(), [](auto& r) { return r->ejected; });
  in_gauge_->set(static_cast<std::int64_t>(replicas_.size()) - ejected);
  ejected_gauge_->set(ejected);
}

void upstream_core::add(endpoint e, time_point now, upstream_news& news) {
  auto r = std::make_shared<replica>(std::move(e), next_id_++, now);
  news.items.push_back({event_kind::replica_added, r->key, {}});
  replicas_.push_back(std::move(r));
}

bool upstream_core::panicking() const noexcept {
  if (replicas_.empty()) return false;
  const auto in = static_cast<std::size_t>(std::count_if(replicas_.begin(), replicas_.end(), [](auto& r) {
    return !r->ejected;
  }));
  return in * 100 < replicas_.size() * options_.panic_threshold();
}

// Peak EWMA (Finagle's, Linkerd's), read decayed to `now` so that a replica
// that went slow is tried again, times the requests in flight plus one.
double upstream_core::cost(const replica& r, time_point now) const noexcept {
  double estimate = typical_known_ ? typical_ns_ : unknown_latency_ns;
  if (r.measured) {
    const double idle = nanoseconds(now > r.ewma_at ? now - r.ewma_at : duration::zero());
    estimate = r.ewma_ns * std::exp(-idle / nanoseconds(options_.ewma_decay()));
  }
  return estimate * (r.in_flight + 1);
}

// During its warm-up a replica takes part in a pick this often: 1/10 at
// first, growing to every pick at the end.
double upstream_core::warm_share(const replica& r, time_point now) const noexcept {
  const duration warm = options_.warm_up();
  if (warm == duration::zero() || r.joined == time_point::min() || now - r.joined >= warm) return 1.0;
  return std::max(1.0 / warm_up_factor, nanoseconds(now - r.joined) / nanoseconds(warm));
}

// A replica ejected for refused connections is probed 1 s after, then at
// doubling waits up to interval(): a restarted process is back in seconds,
// one that stays down costs a connection an interval.
duration upstream_core::probe_wait(std::uint32_t failed) const noexcept {
  const duration most = options_.outlier_detection().interval();
  duration wait = std::chrono::seconds(1);
  for (std::uint32_t i = 0; i < failed && wait < most; ++i) wait *= 2;
  return std::min(wait, most);
}

std::size_t upstream_core::draw(std::size_t n) const noexcept {
  const auto i = static_cast<std::size_t>(options_.random().next_unit() * static_cast<double>(n));
  return i < n ? i : n - 1;
}

void upstream_core::take_pending(upstream_news& news) {
  if (pending_.empty()) return;
  for (auto& item : pending_) news.items.push_back(std::move(item));
  pending_.clear();
}

void upstream_core::bring_back(replica& r, time_point now, upstream_news& news) {
  r.ejected = false;
  r.by_local_origin = false;
  r.consecutive_5xx = r.consecutive_gateway = 0;
  r.joined = now;  // warms up again
  news.items.push_back({event_kind::replica_returned, r.key, {}});
  publish();
}

void upstream_core::return_due(time_point now, upstream_news& news) {
  for (auto& r : replicas_) {
    if (r->ejected && now >= r->ejected_until) bring_back(*r, now, news);
  }
}

void upstream_core::eject(replica& r, bool local_origin, time_point now, upstream_news& news) {
  if (r.ejected || r.gone) return;
  const auto& o = options_.outlier_detection();
  const auto ejected = static_cast<std::size_t>(std::count_if(replicas_.begin(), replicas_.end(), [](auto& x) {
    return x->ejected;
  }));
  // At most max_ejection_percent of the set, and one at least (Envoy).
  const std::size_t most = std::max<std::size_t>(1, replicas_.size() * o.max_ejection_percent() / 100);
  if (ejected >= most) return;
  ++r.ejections;
  const duration longest = std::max(o.base_ejection_time(), o.max_ejection_time());
  const duration length =
      r.ejections > static_cast<std::uint32_t>(longest / o.base_ejection_time()) ? longest
                                                                                 : o.base_ejection_time() * r.ejections;
  r.ejected = true;
  r.by_local_origin = local_origin;
  r.ejected_until = saturating_add(now, length);
  r.probe_failures = 0;
  r.next_probe = saturating_add(now, probe_wait(0));
  r.consecutive_5xx = r.consecutive_gateway = 0;
  news.items.push_back({event_kind::replica_ejected, r.key, length});
  publish();
}

// Every interval: the counts of ejections decay (gRFC A50), success-rate and
// failure-percentage ejection judge the interval's counts, probes are due.
void upstream_core::sweep(time_point now, upstream_news& news) {
  const auto& o = options_.outlier_detection();
  if (now < next_sweep_) return;
  const bool first = next_sweep_ == time_point::min();
  const time_point last = last_sweep_;
  last_sweep_ = now;
  next_sweep_ = saturating_add(now, o.interval());
  if (first) return;
  // The count of ejections decays by one for each interval a replica spent
  // in (gRFC A50); sweeps run when calls come, so one may stand for several.
  for (auto& r : replicas_) {
    if (r->ejected || r->ejections == 0) continue;
    const time_point in_since = std::max(last, r->joined);
    const auto intervals = static_cast<std::uint64_t>(std::max<duration::rep>(0, (now - in_since) / o.interval()));
    r->ejections -= static_cast<std::uint32_t>(std::min<std::uint64_t>(r->ejections, intervals));
  }
  // The replicas with enough requests in the interval to be judged.
  const auto judged = [&](std::uint32_t volume) {
    std::vector<replica*> out;
    for (auto& r : replicas_) {
      if (!r->ejected && r->interval_successes + r->interval_failures >= volume) out.push_back(r.get());
    }
    return out;
  };
  if (const auto& rule = o.success_rate_ejection()) {
    const auto hosts = judged(rule->request_volume);
    if (hosts.size() >= rule->minimum_hosts) {
      double sum = 0, squares = 0;
      for (const replica* r : hosts) {
        const double rate = static_cast<double>(r->interval_successes) /
                            static_cast<double>(r->interval_successes + r->interval_failures);
        sum += rate;
        squares += rate * rate;
      }
      const double n = static_cast<double>(hosts.size());
      const double mean = sum / n;
      const double stdev = std::sqrt(std::max(0.0, squares / n - mean * mean));
      for (replica* r : hosts) {
        const double rate = static_cast<double>(r->interval_successes) /
                            static_cast<double>(r->interval_successes + r->interval_failures);
        if (rate < mean - rule->stdev_factor * stdev) eject(*r, false, now, news);
      }
    }
  }
  if (const auto& rule = o.failure_percentage_ejection()) {
    const auto hosts = judged(rule->request_volume);
    if (hosts.size() >= rule->minimum_hosts) {
      for (replica* r : hosts) {
        const auto total = r->interval_successes + r->interval_failures;
        if (r->interval_failures * 100 >= total * rule->threshold) eject(*r, false, now, news);
      }
    }
  }
  for (auto& r : replicas_) r->interval_successes = r->interval_failures = 0;
}

std::shared_ptr<replica> upstream_core::pick(time_point now, std::span<const std::uint32_t> tried,
                                             upstream_news& news) {
  const std::lock_guard lock(mutex_);
  take_pending(news);
  if (options_.resolved_name() && !resolving_ && now >= next_resolve_) {
    resolving_ = true;
    news.resolve = true;
  }
  sweep(now, news);  // before the returns: a replica back now has spent no interval in
  return_due(now, news);
  if (options_.outlier_detection().probe_ejected()) {
    for (auto& r : replicas_) {
      if (r->ejected && r->by_local_origin && !r->probing && now >= r->next_probe) {
        r->probing = true;
        news.probes.push_back(r);
      }
    }
  }
  if (replicas_.empty()) return nullptr;
  // In a panic every replica is a candidate, ejected or not; a replica this
  // call tried is one only when nothing else is.
  const bool panic = panicking();
  const auto eligible = [&](const replica& r, bool exclude_tried) {
    if (!panic && r.ejected) return false;
    return !exclude_tried || std::find(tried.begin(), tried.end(), r.id) == tried.end();
  };
  candidates_.clear();
  for (auto& r : replicas_) {
    if (!eligible(*r, true)) continue;
    const double share = warm_share(*r, now);
    if (share >= 1.0 || options_.random().next_unit() < share) candidates_.push_back(r.get());
  }
  if (candidates_.empty()) {
    for (auto& r : replicas_)
      if (eligible(*r, false)) candidates_.push_back(r.get());
  }
  if (candidates_.empty()) return nullptr;  // unreachable: an ejection leaves one in, a panic takes all
  replica* chosen = candidates_.front();
  if (candidates_.size() > 1) {
    if (options_.balance() == balancer::round_robin) {
      chosen = candidates_[next_turn_++ % candidates_.size()];
    } else {
      // Two at random, the cheaper taken.
      const std::size_t a = draw(candidates_.size());
      std::size_t b = draw(candidates_.size() - 1);
      if (b >= a) ++b;
      chosen = cost(*candidates_[b], now) < cost(*candidates_[a], now) ? candidates_[b] : candidates_[a];
    }
  }
  ++chosen->in_flight;
  ++chosen->requests;
  // The set holds every replica not gone: find its owner.
  for (auto& r : replicas_)
    if (r.get() == chosen) return r;
  return nullptr;
}

void upstream_core::finished(replica& r, replica_outcome outcome, duration latency, time_point now,
                             upstream_news& news) {
  const std::lock_guard lock(mutex_);
  if (r.in_flight > 0) --r.in_flight;
  if (outcome == replica_outcome::none) return;
  // The latency estimate: a peak EWMA. A failure never makes a replica look
  // faster than it was (a fast 503 must not draw the load).
  double observed = nanoseconds(latency);
  if (outcome != replica_outcome::success)
    observed = std::max(observed, r.measured ? r.ewma_ns : typical_known_ ? typical_ns_ : unknown_latency_ns);
  if (!r.measured || observed > r.ewma_ns) {
    r.ewma_ns = observed;
  } else {
    const double idle = nanoseconds(now > r.ewma_at ? now - r.ewma_at : duration::zero());
    const double w = std::exp(-idle / nanoseconds(options_.ewma_decay()));
    r.ewma_ns = r.ewma_ns * w + observed * (1 - w);
  }
  r.measured = true;
  r.ewma_at = now;
  if (outcome == replica_outcome::success) {
    typical_ns_ = typical_known_ ? 0.9 * typical_ns_ + 0.1 * observed : observed;
    typical_known_ = true;
  }
  if (r.gone) return;
  const auto& o = options_.outlier_detection();
  switch (outcome) {
    case replica_outcome::success:
      ++r.interval_successes;
      r.consecutive_5xx = r.consecutive_gateway = 0;
      return;
    case replica_outcome::server_error:
      ++r.consecutive_5xx;
      r.consecutive_gateway = 0;
      break;
    case replica_outcome::gateway_error:
    case replica_outcome::local_origin:
      ++r.consecutive_5xx;
      ++r.consecutive_gateway;
      break;
    case replica_outcome::none:
      return;
  }
  ++r.interval_failures;
  ++r.failures;
  const bool local = outcome == replica_outcome::local_origin;
  if ((o.consecutive_5xx() != 0 && r.consecutive_5xx >= o.consecutive_5xx()) ||
      (o.consecutive_gateway_failure() != 0 && r.consecutive_gateway >= o.consecutive_gateway_failure()))
    eject(r, local, now, news);
  // A refused connection may mean the name's addresses changed: resolve
  // again soon (at most once a second).
  if (local && options_.resolved_name() && now >= earliest_refused_resolve_) {
    earliest_refused_resolve_ = saturating_add(now, std::chrono::seconds(1));
    next_resolve_ = std::min(next_resolve_, now);
  }
}

void upstream_core::probed(replica& r, bool connected, time_point now) {
  const std::lock_guard lock(mutex_);
  r.probing = false;
  r.next_probe = saturating_add(now, probe_wait(++r.probe_failures));
  if (!connected || !r.ejected || r.gone) return;
  upstream_news news;
  bring_back(r, now, news);
  for (auto& item : news.items) pending_.push_back(std::move(item));
}

void upstream_core::probe_abandoned(replica& r) {
  const std::lock_guard lock(mutex_);
  r.probing = false;
}

void upstream_core::resolution_abandoned() {
  const std::lock_guard lock(mutex_);
  resolving_ = false;
}

void upstream_core::resolved(const std::vector<std::string>& addresses, time_point now) {
  const std::lock_guard lock(mutex_);
  resolving_ = false;
  next_resolve_ = saturating_add(now, options_.resolve_every());
  if (addresses.empty()) return;  // a failed resolution changes nothing
  const endpoint& name = *options_.resolved_name();
  upstream_news news;
  // Replicas of the name that are no longer among the addresses go: calls
  // on them finish, no new one is sent there.
  std::erase_if(replicas_, [&](const std::shared_ptr<replica>& r) {
    const bool named = r->to.host == name.host && !r->to.address.empty();
    if (!named || std::find(addresses.begin(), addresses.end(), r->to.address) != addresses.end()) return false;
    r->gone = true;
    news.items.push_back({event_kind::replica_removed, r->key, {}});
    return true;
  });
  for (const auto& a : addresses) {
    const bool known = std::any_of(replicas_.begin(), replicas_.end(), [&](auto& r) {
      return r->to.host == name.host && r->to.address == a;
    });
    if (!known) add(endpoint{name.host, name.port, name.tls, a}, now, news);
  }
  publish();
  for (auto& item : news.items) pending_.push_back(std::move(item));
}

bool upstream_core::awaiting_resolution() const {
  const std::lock_guard lock(mutex_);
  return replicas_.empty() && options_.resolved_name().has_value();
}

upstream_status upstream_core::status(time_point now) const {
  const std::lock_guard lock(mutex_);
  upstream_status s;
  s.name = name_;
  s.panic = panicking();
  for (const auto& r : replicas_) {
    const duration warm = options_.warm_up();
    s.replicas.push_back(replica_status{
        r->key, r->ejected && now < r->ejected_until,
        warm > duration::zero() && r->joined != time_point::min() && now - r->joined < warm, r->ejections,
        r->in_flight, duration(static_cast<duration::rep>(r->ewma_ns)), r->requests, r->failures});
  }
  return s;
}

}  // namespace detail
}  // namespace resilience::http
