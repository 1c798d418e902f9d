// State a client keeps per endpoint key (a throttle, a retry budget), made
// on first use. Not public API; http::client uses it.
#pragma once

#include <resilience/clock.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace resilience::http::detail {

template <class T>
class per_host {
 public:
  // Entries no call holds and unused for `idle_after` are dropped when the
  // table has doubled since the last time: it holds about twice the hosts in
  // use, at most. (What such an entry counted is as old as that.)
  explicit per_host(duration idle_after) noexcept : idle_after_(idle_after) {}

  // The entry of `key`, made by `make()` if there is none; a call holds it
  // while it runs. Takes the lock, as a breaker's lookup does.
  template <class Make>
  std::shared_ptr<T> for_key(const std::string& key, time_point now, Make make) {
    const std::lock_guard lock(mutex_);
    if (const auto it = entries_.find(key); it != entries_.end()) {
      it->second.used = now;
      return it->second.state;
    }
    if (entries_.size() >= prune_at_) {
      std::erase_if(entries_, [&](const auto& e) {
        return e.second.state.use_count() == 1 && now - e.second.used >= idle_after_;
      });
      prune_at_ = std::max<std::size_t>(16, 2 * entries_.size());
    }
    std::shared_ptr<T> made = make();
    entries_.emplace(key, entry{made, now});
    return made;
  }

 private:
  struct entry {
    std::shared_ptr<T> state;
    time_point used;
  };
  duration idle_after_;
  std::mutex mutex_;
  std::unordered_map<std::string, entry> entries_;
  std::size_t prune_at_ = 16;
};

}  // namespace resilience::http::detail
