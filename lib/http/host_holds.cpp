#include <resilience/http/detail/host_holds.hpp>

#include <algorithm>

namespace resilience::http::detail {

time_point host_holds::until(const std::string& key, time_point now) const {
  if (now.time_since_epoch().count() >= latest_.load(std::memory_order_acquire)) return time_point::min();
  const std::lock_guard lock(mutex_);
  const auto it = holds_.find(key);
  return it == holds_.end() || it->second <= now ? time_point::min() : it->second;
}

void host_holds::hold(const std::string& key, time_point at, time_point now) {
  const std::lock_guard lock(mutex_);
  if (holds_.size() >= prune_at_) {
    std::erase_if(holds_, [now](const auto& entry) { return entry.second <= now; });
    prune_at_ = std::max<std::size_t>(16, 2 * holds_.size());
  }
  auto [it, added] = holds_.try_emplace(key, at);
  if (!added) it->second = std::max(it->second, at);
  if (latest_.load(std::memory_order_relaxed) < at.time_since_epoch().count())
    latest_.store(at.time_since_epoch().count(), std::memory_order_release);
}

}  // namespace resilience::http::detail
