#include <resilience/testing/manual_clock.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace resilience::testing {

namespace asio = boost::asio;

struct manual_clock::wait_node {
  wait_node(std::pair<time_point, std::uint64_t> key, asio::any_io_executor work, handler_type handler,
            asio::execution_context* context) noexcept
      : key(key), work(std::move(work)), handler(std::move(handler)), context(context) {}

  std::pair<time_point, std::uint64_t> key;  // expiry, then order of arrival
  asio::any_io_executor work;                // tracked: keeps run() from ending early
  handler_type handler;                      // destroyed first: the work outlasts the frame it owns
  asio::execution_context* context;          // of `work`: its shutdown drops this wait
  // Links among the waits of one timer, which refers to them but owns none.
  timer_waits* owner = nullptr;
  wait_node* prev = nullptr;
  wait_node* next = nullptr;
};

struct manual_clock::state {
  using key = std::pair<time_point, std::uint64_t>;
  using wait_map = std::map<key, wait_node>;
  using ready_list = std::vector<std::pair<asio::any_io_executor, handler_type>>;
  using dropped_list = std::vector<wait_map::node_type>;

  // now is atomic so that now() never takes the lock.
  std::atomic<time_point::rep> now{0};
  std::atomic<std::uint64_t> next_id{1};
  mutable std::mutex mutex;
  wait_map waits;
  bool closed = false;  // the last copy of the clock is gone
  // Contexts whose context_waits service knows this clock. Usually one.
  std::vector<asio::execution_context*> contexts;

  // The helpers below that take no lock expect it held.

  static void link(wait_node& w, timer_waits& t) noexcept {
    w.owner = &t;
    w.prev = nullptr;
    w.next = t.first;
    if (t.first) t.first->prev = &w;
    t.first = &w;
    t.pending.fetch_add(1, std::memory_order_relaxed);  // only the timer's own thread adds
  }

  // The wait's timer may be destroyed as soon as `pending` drops: nothing
  // touches it after that.
  static void unlink(wait_node& w) noexcept {
    timer_waits& t = *w.owner;
    (w.prev ? w.prev->next : t.first) = w.next;
    if (w.next) w.next->prev = w.prev;
    w.prev = w.next = nullptr;
    w.owner = nullptr;
    t.pending.fetch_sub(1, std::memory_order_release);
  }

  // Unlinks the wait and moves it out of the map.
  wait_map::node_type take(wait_map::iterator it) noexcept {
    unlink(it->second);
    return waits.extract(it);
  }
  wait_map::node_type take(wait_node& w) noexcept { return take(waits.find(w.key)); }  // O(log n)

  static void take_ready(wait_map::node_type node, ready_list& ready) {
    ready.emplace_back(std::move(node.mapped().work), std::move(node.mapped().handler));
  }

  // Posts the completions (a post never runs a handler in place).
  static void complete(ready_list& ready, const boost::system::error_code& ec) {
    for (auto& [work, handler] : ready) asio::post(work, asio::append(std::move(handler), ec));
    ready.clear();
  }

  // Takes the waits `drop` selects, to be destroyed unrun once the lock is
  // released: a handler may own a frame whose destruction comes back to
  // this clock (its timer, a copy of the clock) or to another.
  template <class Drop>
  void drop_locked(Drop drop, dropped_list& dropped) {
    for (auto it = waits.begin(); it != waits.end();) {
      const auto here = it++;
      if (drop(here->second)) dropped.push_back(take(here));
    }
  }

  // Moves time to `t` (already checked) and takes every wait due by then.
  void advance_locked(time_point t, ready_list& ready) {
    now.store(t.time_since_epoch().count(), std::memory_order_release);
    while (!waits.empty() && waits.begin()->first.first <= t) take_ready(take(waits.begin()), ready);
  }
};

// One per execution context that has had a wait on a manual clock. Its
// shutdown drops that context's waits unrun, as Asio does with its own
// timers: their handlers, and the coroutine frames they own, are freed while
// the context can still take back the work their executors hold.
class manual_clock::context_waits final : public asio::execution_context::service {
 public:
  static asio::execution_context::id id;

  explicit context_waits(asio::execution_context& context) : asio::execution_context::service(context) {}

  // Registers the clock with this context. False once the context is
  // shutting down: no wait may be queued on it then.
  bool add(const std::shared_ptr<state>& s) {
    std::lock_guard lock(mutex_);
    if (shut_down_) return false;
    std::lock_guard clock_lock(s->mutex);  // lock order: a service, then a clock
    auto& contexts = s->contexts;
    if (std::find(contexts.begin(), contexts.end(), &context()) != contexts.end()) return true;
    std::erase_if(clocks_, [](const std::weak_ptr<state>& w) { return w.expired(); });
    clocks_.push_back(s);
    contexts.push_back(&context());
    return true;
  }

 private:
  void shutdown() override {
    std::vector<std::weak_ptr<state>> clocks;
    {
      std::lock_guard lock(mutex_);
      shut_down_ = true;
      clocks.swap(clocks_);
    }
    asio::execution_context* const self = &context();
    for (const auto& weak : clocks) {
      const auto s = weak.lock();
      if (!s) continue;
      state::dropped_list dropped;
      {
        std::lock_guard lock(s->mutex);
        std::erase(s->contexts, self);
        s->drop_locked([self](const wait_node& w) { return w.context == self; }, dropped);
      }
    }
  }

  std::mutex mutex_;
  std::vector<std::weak_ptr<state>> clocks_;
  bool shut_down_ = false;
};

asio::execution_context::id manual_clock::context_waits::id;

manual_clock::manual_clock()
    : state_(std::make_shared<state>()),
      copies_(state_.get(), [s = state_](void*) noexcept { close(*s); }) {}

void manual_clock::close(state& s) noexcept {
  state::dropped_list dropped;
  {
    std::lock_guard lock(s.mutex);
    s.closed = true;
    s.drop_locked([](const wait_node&) { return true; }, dropped);
  }
}

time_point manual_clock::time_now(const state& s) noexcept {
  return time_point(duration(s.now.load(std::memory_order_acquire)));
}

time_point manual_clock::now() const noexcept { return time_now(*state_); }

void manual_clock::advance(duration d) const {
  if (d < duration::zero()) throw std::invalid_argument("manual_clock::advance: duration must not be negative");
  state::ready_list ready;
  // Read and moved under one lock, so concurrent advances add up. Posted
  // under it too: advance() may run on any thread, and a context's shutdown
  // takes this lock to drop its waits before it stops taking posts.
  std::lock_guard lock(state_->mutex);
  state_->advance_locked(saturating_add(time_now(*state_), d), ready);
  state::complete(ready, {});
}

void manual_clock::advance_to(time_point t) const {
  state::ready_list ready;
  std::lock_guard lock(state_->mutex);  // as advance()
  if (t < time_now(*state_)) throw std::invalid_argument("manual_clock::advance_to: time must not go backwards");
  state_->advance_locked(t, ready);
  state::complete(ready, {});
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
  if (limit < duration::zero()) throw std::invalid_argument("manual_clock::run_for: limit must not be negative");
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

std::uint64_t manual_clock::enqueue(const std::shared_ptr<state>& sp, timer_waits& owner, time_point when,
                                    handler_type handler, boost::asio::any_io_executor work) {
  state& s = *sp;
  asio::execution_context* const context = &asio::query(work, asio::execution::context);
  const std::uint64_t id = s.next_id.fetch_add(1, std::memory_order_relaxed);
  boost::system::error_code result;
  for (;;) {
    std::unique_lock lock(s.mutex);
    if (s.closed) {
      result = asio::error::operation_aborted;
    } else if (when > time_now(s)) {
      if (std::find(s.contexts.begin(), s.contexts.end(), context) == s.contexts.end()) {
        // First wait of this clock on this context: register, then look again.
        lock.unlock();
        if (asio::use_service<context_waits>(*context).add(sp)) continue;
        result = asio::error::operation_aborted;  // the context is shutting down
      } else {
        auto [it, inserted] = s.waits.try_emplace(state::key{when, id}, state::key{when, id}, std::move(work),
                                                  std::move(handler), context);
        state::link(it->second, owner);
        return id;
      }
    }
    break;
  }
  state::ready_list ready;
  ready.emplace_back(std::move(work), std::move(handler));
  state::complete(ready, result);
  return id;
}

void manual_clock::cancel_wait(const std::weak_ptr<state>& weak, time_point when, std::uint64_t wait_id) {
  const auto s = weak.lock();
  if (!s) return;
  state::ready_list ready;
  {
    std::lock_guard lock(s->mutex);
    auto it = s->waits.find(state::key{when, wait_id});
    if (it == s->waits.end()) return;  // already completed, cancelled or dropped
    state::take_ready(s->take(it), ready);
  }
  state::complete(ready, asio::error::operation_aborted);
}

std::size_t manual_clock::cancel_timer(state& s, timer_waits& owner) {
  state::ready_list ready;
  {
    std::lock_guard lock(s.mutex);
    while (owner.first) state::take_ready(s.take(*owner.first), ready);
  }
  const std::size_t n = ready.size();
  state::complete(ready, asio::error::operation_aborted);
  return n;
}

void manual_clock::move_waits(state& s, timer_waits& from, timer_waits& to) noexcept {
  std::lock_guard lock(s.mutex);
  for (wait_node* w = from.first; w; w = w->next) w->owner = &to;
  to.first = std::exchange(from.first, nullptr);
  to.pending.store(from.pending.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace resilience::testing
