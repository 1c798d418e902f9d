#include <resilience/bulkhead.hpp>

namespace resilience::detail {

bulkhead_core::admission bulkhead_core::acquire_or_enqueue(bulkhead_waiter& n) noexcept {
  std::lock_guard lock(mutex_);
  std::uint64_t w = word_.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint64_t waiting = w >> 32;
    if (waiting == 0 && (w & low) < options_.max_concurrent()) {
      // A slot came free since the caller's fast path failed.
      if (word_.compare_exchange_weak(w, w + 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        n.state = bulkhead_waiter::status::granted;
        return admission::acquired;
      }
      continue;
    }
    if (waiting >= options_.max_queue()) {
      n.state = bulkhead_waiter::status::full;
      return admission::full;
    }
    // The count goes up with a CAS on the whole word, so a release racing
    // with it either freed a slot this saw above, or sees a waiter and
    // comes for the lock, which it finds with the node already linked.
    if (word_.compare_exchange_weak(w, w + one_waiter, std::memory_order_relaxed, std::memory_order_relaxed)) break;
  }
  n.state = bulkhead_waiter::status::queued;
  n.next = nullptr;
  n.prev = tail_;
  (tail_ ? tail_->next : head_) = &n;
  tail_ = &n;
  return admission::queued;
}

void bulkhead_core::unlink_locked(bulkhead_waiter& n) noexcept {
  (n.prev ? n.prev->next : head_) = n.next;
  (n.next ? n.next->prev : tail_) = n.prev;
  n.prev = n.next = nullptr;
  word_.fetch_sub(one_waiter, std::memory_order_relaxed);
}

void bulkhead_core::release_slow() noexcept {
  std::lock_guard lock(mutex_);
  if (bulkhead_waiter* first = head_) {
    // The slot passes to the first waiter as is: the count of calls
    // inside does not move, so no newcomer can take it in between.
    unlink_locked(*first);
    first->state = bulkhead_waiter::status::granted;
    // Under the lock: this may run on another thread than the waiter's, and
    // the waiter's frame may be going away with its execution context
    // (abandon() takes this lock first). The grant only posts.
    first->granted(first);
  } else {
    // Every waiter left (cancelled, timed out) since the caller looked.
    word_.fetch_sub(1, std::memory_order_release);
  }
}

bool bulkhead_core::withdraw(bulkhead_waiter& n, bulkhead_waiter::status why) noexcept {
  std::lock_guard lock(mutex_);
  if (n.state != bulkhead_waiter::status::queued) return false;
  unlink_locked(n);
  n.state = why;
  return true;
}

void bulkhead_core::abandon(bulkhead_waiter& n) noexcept {
  bool holds_slot = false;
  {
    std::lock_guard lock(mutex_);
    if (n.state == bulkhead_waiter::status::queued) {
      unlink_locked(n);
    } else if (n.state == bulkhead_waiter::status::granted) {
      holds_slot = true;
    }
    n.state = bulkhead_waiter::status::idle;
  }
  if (holds_slot) release();
}

}  // namespace resilience::detail
