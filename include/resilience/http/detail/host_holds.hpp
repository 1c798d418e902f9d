// The hosts a client holds back: per endpoint key, no new attempt before the
// moment a Retry-After named. Not public API; http::client uses it.
#pragma once

#include <resilience/clock.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

namespace resilience::http::detail {

// A host's hold: no attempt before `until`; `length` is how long the
// Retry-After that set it asked for (what held calls spread their return over).
struct host_hold {
  time_point until = time_point::min();
  duration length{};
  explicit operator bool() const noexcept { return until != time_point::min(); }
};

class host_holds {
 public:
  // The hold of `key`, if it lasts past `now`; an empty one otherwise. While
  // no host is held this is one atomic load: no lock, no lookup.
  host_hold find(const std::string& key, time_point now) const;
  // No attempt to `key` before now + length; a later hold it has stands.
  void hold(const std::string& key, duration length, time_point now);

 private:
  // The latest hold of any host: `now` past it means none is held.
  std::atomic<time_point::rep> latest_{time_point::min().time_since_epoch().count()};
  mutable std::mutex mutex_;
  // Expired entries are dropped when it has doubled since they last were:
  // it holds at most about twice as many keys as hosts held at once.
  std::unordered_map<std::string, host_hold> holds_;
  std::size_t prune_at_ = 16;
};

}  // namespace resilience::http::detail
