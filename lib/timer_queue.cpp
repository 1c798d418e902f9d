#include <resilience/detail/timer_queue.hpp>

#include <boost/asio/defer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <cassert>
#include <cstddef>
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

namespace {

// An idle queue keeps a vector this large for the next burst and gives back
// a larger one: a burst of 100k bounds should not pin 1.6 MB per context.
constexpr std::size_t kept_slots = 4096;

template <class Vector>
void release_if_large(Vector& heap) {
  if (heap.empty() && heap.capacity() > kept_slots) Vector().swap(heap);
}

}  // namespace

void timer_queue::place(entry e, std::size_t index) noexcept {
  heap_[index] = e;
  e.node->heap_index = index;
}

void timer_queue::sift_up(entry e, std::size_t index) noexcept {
  while (index > 0) {
    const std::size_t parent = (index - 1) / 2;
    if (!(e.at < heap_[parent].at)) break;
    place(heap_[parent], index);
    index = parent;
  }
  place(e, index);
}

void timer_queue::erase_at(std::size_t index) noexcept {
  heap_[index].node->heap_index = timer_node::unqueued;
  const entry last = heap_.back();
  heap_.pop_back();
  const std::size_t size = heap_.size();
  if (index == size) return;  // it was the last slot: the success path's usual case
  if (index > 0 && last.at < heap_[(index - 1) / 2].at) {
    sift_up(last, index);
    return;
  }
  // The last entry is a leaf and most likely among the latest: move the hole
  // down to a leaf along the earlier children, then let it rise from there.
  // One comparison per level instead of two; the rise is usually none.
  for (std::size_t child = 2 * index + 1; child < size; child = 2 * index + 1) {
    if (child + 1 < size && heap_[child + 1].at < heap_[child].at) ++child;
    place(heap_[child], index);
    index = child;
  }
  sift_up(last, index);
}

void timer_queue::add(timer_node& node) {
  std::lock_guard lock(mutex_);
  assert(node.heap_index == timer_node::unqueued);
  heap_.push_back({node.fire_at, &node});
  sift_up(heap_.back(), heap_.size() - 1);
  if (node.fire_at < armed_at_) arm_locked(node.fire_at, *node.executor);
}

bool timer_queue::remove(timer_node& node) noexcept {
  std::lock_guard lock(mutex_);
  if (node.heap_index == timer_node::unqueued) return false;
  assert(node.heap_index < heap_.size() && heap_[node.heap_index].node == &node);
  erase_at(node.heap_index);
  // The Asio timer stays armed: if it fires with nothing due, it re-arms for
  // the new earliest node, which is cheaper than re-arming here on every call.
  if (heap_.empty() && armed_at_ != time_point::max() && !disarm_posted_ && timer_) {
    disarm_posted_ = true;
    // Deferred, not posted: from a handler of the context (the usual case)
    // it joins that thread's own queue, with no lock and no wake-up. On the
    // io_context's own executor when there is one, not the timer's
    // type-erased one: back-to-back calls pay this on every call (an HTTP
    // client's keep-alive GET: 300 to 450 instructions fewer, callgrind).
    if (io_) {
      asio::defer(io_->get_executor(), [this] { disarm_if_idle(); });
    } else {
      asio::defer(timer_->get_executor(), [this] { disarm_if_idle(); });
    }
  }
  return true;
}

void timer_queue::disarm_if_idle() {
  std::lock_guard lock(mutex_);
  disarm_posted_ = false;
  if (!heap_.empty() || !timer_) return;
  release_if_large(heap_);
  // Cancel whatever armed_at_ says: a stale expiry may have reset it while a
  // newer wait is still pending.
  armed_at_ = time_point::max();
  ++arming_;
  timer_->cancel();
}

void timer_queue::arm_locked(time_point at, const asio::any_io_executor& first) {
  if (shut_down_) return;
  // Untracked: the timer must never hold the context's work by itself (an
  // empty queue would keep run() from returning), whatever executor the
  // first caller happened to use.
  if (!timer_) {
    timer_.emplace(asio::prefer(unstranded(first), asio::execution::outstanding_work.untracked));
    if (const auto* io = timer_->get_executor().target<asio::io_context::executor_type>()) io_ = &io->context();
  }
  armed_at_ = at;
  const std::uint64_t arming = ++arming_;
  timer_->expires_at(at);
  timer_->async_wait([this, arming](const boost::system::error_code& ec) {
    if (ec != asio::error::operation_aborted) on_timer(arming);
  });
}

void timer_queue::on_timer(std::uint64_t arming) {
  std::lock_guard lock(mutex_);
  // An expiry that completed just before a re-arm or a disarm belongs to
  // an arming that is no longer current: the current one will do the work.
  if (arming != arming_) return;
  armed_at_ = time_point::max();
  const time_point now = std::chrono::steady_clock::now();
  // Each due node fires on its owner's executor, earliest first; the owner
  // waits for it before its frame ends, so the pointer stays valid. Posted
  // under the lock, so that firing needs no list of its own: a post never
  // runs the handler inline, and no path takes this lock inside an executor's.
  while (!heap_.empty() && heap_.front().at <= now) {
    timer_node* node = heap_.front().node;
    erase_at(0);
    asio::post(*node->executor, [node] { node->fire(node); });
  }
  if (heap_.empty()) {
    release_if_large(heap_);
  } else {
    arm_locked(heap_.front().at, *heap_.front().node->executor);
  }
}

void timer_queue::shutdown() {
  queues_retired.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard lock(mutex_);
  shut_down_ = true;
  for (const entry& e : heap_) e.node->heap_index = timer_node::unqueued;
  std::vector<entry>().swap(heap_);
  timer_.reset();
}

}  // namespace resilience::detail
