// One timer for all the time bounds of an execution context. Not public API.
//
// A timeout that arms and cancels its own steady_timer pays a timerfd syscall
// and a posted handler per call, even when the op answers at once. Here a
// bound is a node in a list ordered by expiry, guarded by a short lock: on
// the success path adding and removing it is all that happens. One Asio
// timer per context is kept armed for the earliest node; when it fires, the
// nodes that are due are unlinked and their `fire` is posted to each node's
// own executor. Bounds with equal durations arrive in expiry order, so
// insertion from the back is O(1) in the usual case.
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

#include <cstdint>
#include <mutex>
#include <optional>

namespace resilience::detail {

struct timer_node {
  time_point fire_at{};
  timer_node* prev = nullptr;
  timer_node* next = nullptr;
  bool linked = false;
  void (*fire)(timer_node*) = nullptr;  // runs on `*executor` once the node is due
  const boost::asio::any_io_executor* executor = nullptr;  // the owner's, in its frame
};

class timer_queue final : public boost::asio::execution_context::service {
 public:
  static boost::asio::execution_context::id id;

  explicit timer_queue(boost::asio::execution_context& context);
  ~timer_queue() override;

  // The queue of the context `ex` belongs to.
  static timer_queue& of(const boost::asio::any_io_executor& ex);

  void add(timer_node& node);
  // True if the node was still queued: its fire will never run. False if it
  // is already due and its fire has been posted (or has run).
  bool remove(timer_node& node) noexcept;

 private:
  void shutdown() override;
  void arm_locked(time_point at);  // the mutex is held
  void on_timer(std::uint64_t arming);
  void disarm_if_idle();

  std::mutex mutex_;
  timer_node* head_ = nullptr;
  timer_node* tail_ = nullptr;
  time_point armed_at_ = time_point::max();
  std::uint64_t arming_ = 0;  // which arming of the timer is current
  std::optional<boost::asio::steady_timer> timer_;
  bool disarm_posted_ = false;
  bool shut_down_ = false;
};

}  // namespace resilience::detail
