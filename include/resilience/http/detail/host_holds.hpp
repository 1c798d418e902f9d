// The hosts a client holds back: per endpoint key, no new attempt before the
// moment a Retry-After named. Not public API; http::client uses it.
#pragma once

#include <resilience/clock.hpp>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

namespace resilience::http::detail {

class host_holds {
 public:
  // When `key` may take its next attempt, if that is after `now`;
  // time_point::min() when it is not held. While no host is held this is
  // one atomic load: no lock, no lookup.
  time_point until(const std::string& key, time_point now) const;
  // No attempt to `key` before `at`; a later hold it has stands. `now`
  // tells which entries have expired.
  void hold(const std::string& key, time_point at, time_point now);

 private:
  // The latest hold of any host: `now` past it means none is held.
  std::atomic<time_point::rep> latest_{time_point::min().time_since_epoch().count()};
  mutable std::mutex mutex_;
  // Expired entries are dropped when it has doubled since they last were:
  // it holds at most about twice as many keys as hosts held at once.
  std::unordered_map<std::string, time_point> holds_;
  std::size_t prune_at_ = 16;
};

}  // namespace resilience::http::detail
