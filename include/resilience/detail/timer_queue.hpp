// One timer for all the time bounds of an execution context. Not public API.
//
// A timeout that arms and cancels its own steady_timer pays a timerfd syscall
// and a posted handler per call, even when the op answers at once. Here a
// bound is a node in a queue ordered by expiry, guarded by a short lock: on
// the success path adding and removing it is all that happens. One Asio
// timer per context is kept armed for the earliest node; when it fires, the
// nodes that are due are taken out and their `fire` is posted to each node's
// own executor.
//
// The queue is a binary min-heap in a vector, each node knowing its slot, so
// add and remove are O(log n) whatever the expiries: a sorted list was O(n)
// per add, and 40k bounds of random durations took seconds to queue. A bound
// added with the latest expiry, the usual case, stays a leaf: adding it
// compares once, and removing it before anything else was added is a
// pop_back. The vector only grows while bounds are pending, so the steady
// state allocates nothing; an idle queue gives back a large one.
//
// An armed Asio timer is outstanding work: left armed on an empty queue it
// would keep io_context::run() from returning until it fired. So when the
// queue empties, one check is posted that disarms it if the queue is still
// empty then; back-to-back calls refill the queue first and pay no syscall.
#pragma once

#include <resilience/clock.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace resilience::detail {

struct timer_node {
  static constexpr std::size_t unqueued = static_cast<std::size_t>(-1);

  time_point fire_at{};
  void (*fire)(timer_node*) = nullptr;  // runs on `*executor` once the node is due
  const boost::asio::any_io_executor* executor = nullptr;  // the owner's, in its frame
  std::size_t heap_index = unqueued;  // the node's slot in its queue; written under the queue's lock
};

class timer_queue final : public boost::asio::execution_context::service {
 public:
  static boost::asio::execution_context::id id;

  explicit timer_queue(boost::asio::execution_context& context);
  ~timer_queue() override;

  // The queue of the context `ex` belongs to.
  static timer_queue& of(const boost::asio::any_io_executor& ex);

  // The node must not be queued already.
  void add(timer_node& node);
  // True if the node was still queued: its fire will never run. False if it
  // is already due and its fire has been posted (or has run), or if it was
  // never added.
  bool remove(timer_node& node) noexcept;

 private:
  void shutdown() override;
  void arm_locked(time_point at, const boost::asio::any_io_executor& first);  // the mutex is held
  void on_timer(std::uint64_t arming);
  void disarm_if_idle();

  // The expiry is copied next to the pointer so that ordering the heap
  // reads only the vector, not the nodes in their scattered frames.
  struct entry {
    time_point at;
    timer_node* node;
  };
  // The heap, under the mutex.
  void place(entry e, std::size_t index) noexcept;
  void sift_up(entry e, std::size_t index) noexcept;
  void erase_at(std::size_t index) noexcept;

  std::mutex mutex_;
  std::vector<entry> heap_;  // heap_[0] expires first
  time_point armed_at_ = time_point::max();
  std::uint64_t arming_ = 0;  // which arming of the timer is current
  std::optional<boost::asio::steady_timer> timer_;
  boost::asio::io_context* io_ = nullptr;  // the timer's context, when it is an io_context: the disarm's cheaper way there
  bool disarm_posted_ = false;
  bool shut_down_ = false;
};

}  // namespace resilience::detail
