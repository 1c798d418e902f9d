#include <resilience/http/detail/host_throttles.hpp>

#include <algorithm>

namespace resilience::http::detail {

std::shared_ptr<resilience::detail::throttle_core> host_throttles::for_key(const std::string& key, time_point now) {
  const std::lock_guard lock(mutex_);
  if (const auto it = throttles_.find(key); it != throttles_.end()) {
    it->second.used = now;
    return it->second.throttle;
  }
  if (throttles_.size() >= prune_at_) {
    const duration window = options_.window();
    std::erase_if(throttles_, [&](const auto& e) {
      return e.second.throttle.use_count() == 1 && now - e.second.used >= window;
    });
    prune_at_ = std::max<std::size_t>(16, 2 * throttles_.size());
  }
  auto made = std::make_shared<resilience::detail::throttle_core>(options_);
  throttles_.emplace(key, entry{made, now});
  return made;
}

}  // namespace resilience::http::detail
