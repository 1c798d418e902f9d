#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace resilience::testing {

struct manual_clock::state {
  struct wait {
    std::uint64_t timer_id;
    handler_type handler;
    boost::asio::any_io_executor work;  // tracked: keeps run() from ending early
  };
  using key = std::pair<time_point, std::uint64_t>;  // expiry, then order of arrival

  // now is atomic so that now() never takes the lock.
  std::atomic<time_point::rep> now{0};
  std::atomic<std::uint64_t> next_id{1};
  mutable std::mutex mutex;
  std::map<key, wait> waits;
};

namespace {

using state_wait = std::pair<boost::asio::any_io_executor, boost::asio::any_completion_handler<void(boost::system::error_code)>>;

// Completions are posted after the lock is released, so a handler may touch
// the clock again without deadlock.
void complete(std::vector<state_wait>& ready, const boost::system::error_code& ec) {
  for (auto& [work, handler] : ready)
    boost::asio::post(work, boost::asio::append(std::move(handler), ec));
  ready.clear();
}

}  // namespace

manual_clock::manual_clock() : state_(std::make_shared<state>()) {}

time_point manual_clock::time_now(const state& s) noexcept {
  return time_point(duration(s.now.load(std::memory_order_acquire)));
}

time_point manual_clock::now() const noexcept { return time_now(*state_); }

void manual_clock::advance(duration d) const {
  if (d < duration::zero()) throw std::invalid_argument("manual_clock::advance: duration must not be negative");
  advance_to(saturating_add(now(), d));
}

void manual_clock::advance_to(time_point t) const {
  std::vector<state_wait> ready;
  {
    std::lock_guard lock(state_->mutex);
    if (t < time_now(*state_)) throw std::invalid_argument("manual_clock::advance_to: time must not go backwards");
    state_->now.store(t.time_since_epoch().count(), std::memory_order_release);
    auto& waits = state_->waits;
    while (!waits.empty() && waits.begin()->first.first <= t) {
      auto node = waits.extract(waits.begin());
      ready.emplace_back(std::move(node.mapped().work), std::move(node.mapped().handler));
    }
  }
  complete(ready, {});
}

std::optional<time_point> manual_clock::next_expiry() const {
  std::lock_guard lock(state_->mutex);
  if (state_->waits.empty()) return std::nullopt;
  return state_->waits.begin()->first.first;
}

std::size_t manual_clock::pending() const {
  std::lock_guard lock(state_->mutex);
  return state_->waits.size();
}

std::size_t manual_clock::run(boost::asio::io_context& io) const { return run_for(io, duration::max()); }

std::size_t manual_clock::run_for(boost::asio::io_context& io, duration limit) const {
  const time_point stop_at = saturating_add(now(), limit);
  std::size_t handlers = 0;
  for (;;) {
    if (io.stopped()) io.restart();
    if (const std::size_t n = io.poll(); n != 0) {
      handlers += n;
      continue;
    }
    if (const auto next = next_expiry(); next && *next <= stop_at) {
      advance_to(*next);
    } else if (stop_at != time_point::max() && now() < stop_at) {
      advance_to(stop_at);  // let the whole span pass, even with nothing due in it
    } else {
      break;
    }
  }
  return handlers;
}

std::uint64_t manual_clock::new_timer_id(state& s) noexcept {
  return s.next_id.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t manual_clock::enqueue(state& s, std::uint64_t timer_id, time_point when, handler_type handler,
                                    boost::asio::any_io_executor work) {
  const std::uint64_t id = s.next_id.fetch_add(1, std::memory_order_relaxed);
  std::vector<state_wait> ready;
  {
    std::lock_guard lock(s.mutex);
    if (when <= time_now(s)) {
      ready.emplace_back(std::move(work), std::move(handler));
    } else {
      s.waits.emplace(state::key{when, id}, state::wait{timer_id, std::move(handler), std::move(work)});
    }
  }
  complete(ready, {});
  return id;
}

void manual_clock::cancel_wait(const std::weak_ptr<state>& weak, time_point when, std::uint64_t wait_id) {
  const auto s = weak.lock();
  if (!s) return;
  std::vector<state_wait> ready;
  {
    std::lock_guard lock(s->mutex);
    auto it = s->waits.find(state::key{when, wait_id});
    if (it == s->waits.end()) return;  // already completed
    ready.emplace_back(std::move(it->second.work), std::move(it->second.handler));
    s->waits.erase(it);
  }
  complete(ready, boost::asio::error::operation_aborted);
}

std::size_t manual_clock::cancel_timer(state& s, std::uint64_t timer_id) {
  std::vector<state_wait> ready;
  {
    std::lock_guard lock(s.mutex);
    for (auto it = s.waits.begin(); it != s.waits.end();) {
      if (it->second.timer_id == timer_id) {
        ready.emplace_back(std::move(it->second.work), std::move(it->second.handler));
        it = s.waits.erase(it);
      } else {
        ++it;
      }
    }
  }
  const std::size_t n = ready.size();
  complete(ready, boost::asio::error::operation_aborted);
  return n;
}

}  // namespace resilience::testing
