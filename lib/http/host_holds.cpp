#include <resilience/http/detail/host_holds.hpp>

#include <algorithm>

namespace resilience::http::detail {

host_hold host_holds::find(const std::string& key, time_point now) const {
  if (now.time_since_epoch().count() >= latest_.load(std::memory_order_acquire)) return {};
  const std::lock_guard lock(mutex_);
  const auto it = holds_.find(key);
  return it == holds_.end() || it->second.until <= now ? host_hold{} : it->second;
}

void host_holds::hold(const std::string& key, duration length, time_point now) {
  const host_hold made{saturating_add(now, length), length};
  const std::lock_guard lock(mutex_);
  if (holds_.size() >= prune_at_) {
    std::erase_if(holds_, [now](const auto& entry) { return entry.second.until <= now; });
    prune_at_ = std::max<std::size_t>(16, 2 * holds_.size());
  }
  auto [it, added] = holds_.try_emplace(key, made);
  if (!added && it->second.until < made.until) it->second = made;
  if (latest_.load(std::memory_order_relaxed) < made.until.time_since_epoch().count())
    latest_.store(made.until.time_since_epoch().count(), std::memory_order_release);
}

}  // namespace resilience::http::detail
