#include <resilience/detail/timer_queue.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cstdint>
#include <vector>

namespace resilience::detail {

namespace asio = boost::asio;

asio::execution_context::id timer_queue::id;

namespace {

// The timer's handler belongs to no caller's strand: where the executor is a
// strand of a known kind, use what it wraps.
asio::any_io_executor unstranded(const asio::any_io_executor& ex) {
  using io_ex = asio::io_context::executor_type;
  using pool_ex = asio::thread_pool::executor_type;
  if (auto* s = ex.target<asio::strand<io_ex>>()) return s->get_inner_executor();
  if (auto* s = ex.target<asio::strand<pool_ex>>()) return s->get_inner_executor();
  if (auto* s = ex.target<asio::strand<asio::any_io_executor>>()) return s->get_inner_executor();
  return ex;
}

}  // namespace

timer_queue::timer_queue(asio::execution_context& context)
    : asio::execution_context::service(context) {}

namespace {

// Bumped whenever a queue is shut down, so that no thread's cached pointer
// can outlive the queue it points to (or match a new context that happens to
// reuse the old one's address).
std::atomic<std::uint64_t> queues_retired{0};

struct cached_queue {
  asio::execution_context* context = nullptr;
  timer_queue* queue = nullptr;
  std::uint64_t retired = 0;
};

}  // namespace

timer_queue& timer_queue::of(const asio::any_io_executor& ex) {
  // The registry lookup takes a mutex; most threads serve one context, so
  // remember the last answer.
  thread_local cached_queue cache;
  asio::execution_context& context = asio::query(ex, asio::execution::context);
  const std::uint64_t retired = queues_retired.load(std::memory_order_acquire);
  if (cache.context != &context || cache.retired != retired) {
    cache = {&context, &asio::use_service<timer_queue>(context), retired};
  }
  return *cache.queue;
}

timer_queue::~timer_queue() { queues_retired.fetch_add(1, std::memory_order_acq_rel); }

void timer_queue::add(timer_node& node) {
  std::lock_guard lock(mutex_);
  // From the back: later expiries are the common case.
  timer_node* after = tail_;
  while (after && after->fire_at > node.fire_at) after = after->prev;
  node.prev = after;
  node.next = after ? after->next : head_;
  (node.next ? node.next->prev : tail_) = &node;
  (after ? after->next : head_) = &node;
  node.linked = true;
  if (node.fire_at < armed_at_) arm_locked(node.fire_at);
}

bool timer_queue::remove(timer_node& node) noexcept {
  std::lock_guard lock(mutex_);
  if (!node.linked) return false;
  (node.prev ? node.prev->next : head_) = node.next;
  (node.next ? node.next->prev : tail_) = node.prev;
  node.linked = false;
  // The Asio timer stays armed: if it fires with nothing due, it re-arms for
  // the new head, which is cheaper than re-arming here on every call.
  if (!head_ && armed_at_ != time_point::max() && !disarm_posted_ && timer_) {
    disarm_posted_ = true;
    asio::post(timer_->get_executor(), [this] { disarm_if_idle(); });
  }
  return true;
}

void timer_queue::disarm_if_idle() {
  std::lock_guard lock(mutex_);
  disarm_posted_ = false;
  if (head_ || !timer_) return;
  // Cancel whatever armed_at_ says: a stale expiry may have reset it while a
  // newer wait is still pending.
  armed_at_ = time_point::max();
  ++arming_;
  timer_->cancel();
}

void timer_queue::arm_locked(time_point at) {
  if (shut_down_) return;
  // Untracked: the timer must never hold the context's work by itself (an
  // empty queue would keep run() from returning), whatever executor the
  // first caller happened to use.
  if (!timer_)
    timer_.emplace(asio::prefer(unstranded(*head_->executor), asio::execution::outstanding_work.untracked));
  armed_at_ = at;
  const std::uint64_t arming = ++arming_;
  timer_->expires_at(at);
  timer_->async_wait([this, arming](const boost::system::error_code& ec) {
    if (ec != asio::error::operation_aborted) on_timer(arming);
  });
}

void timer_queue::on_timer(std::uint64_t arming) {
  std::vector<timer_node*> due;
  {
    std::lock_guard lock(mutex_);
    // An expiry that completed just before a re-arm or a disarm belongs to
    // an arming that is no longer current: the current one will do the work.
    if (arming != arming_) return;
    armed_at_ = time_point::max();
    const time_point now = std::chrono::steady_clock::now();
    while (head_ && head_->fire_at <= now) {
      timer_node* node = head_;
      head_ = node->next;
      (head_ ? head_->prev : tail_) = nullptr;
      node->linked = false;
      due.push_back(node);
    }
    if (head_) arm_locked(head_->fire_at);
  }
  // Each node fires on its owner's executor; the owner waits for it before
  // its frame ends, so the pointer stays valid.
  for (timer_node* node : due) asio::post(*node->executor, [node] { node->fire(node); });
}

void timer_queue::shutdown() {
  queues_retired.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard lock(mutex_);
  shut_down_ = true;
  for (timer_node* n = head_; n; n = n->next) n->linked = false;
  head_ = tail_ = nullptr;
  timer_.reset();
}

}  // namespace resilience::detail
