// A client's adaptive throttles, one per endpoint key, made on first use
// from one adaptive_throttle_options. Not public API; http::client uses it.
#pragma once

#include <resilience/adaptive_throttle.hpp>
#include <resilience/clock.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace resilience::http::detail {

class host_throttles {
 public:
  explicit host_throttles(adaptive_throttle_options options) : options_(std::move(options)) {}

  // The throttle of `key`; a call holds it while it runs. Takes the lock
  // (like a breaker's lookup).
  std::shared_ptr<resilience::detail::throttle_core> for_key(const std::string& key, time_point now);

 private:
  struct entry {
    std::shared_ptr<resilience::detail::throttle_core> throttle;
    time_point used;
  };
  adaptive_throttle_options options_;
  std::mutex mutex_;
  // A throttle no call holds and unused for a whole window has nothing left
  // to count: it is dropped when the table has doubled since the last time.
  std::unordered_map<std::string, entry> throttles_;
  std::size_t prune_at_ = 16;
};

}  // namespace resilience::http::detail
