// Bounded calls parked on their timer's handler, per execution context. Not
// public API.
//
// A bounded call whose op has ended must still wait for its timer's handler
// when that handler is already queued (it refers to the call's frame). While
// it waits, the frame's only owner is the continuation it parks in itself. If
// the context is destroyed before the handler runs, the handler is dropped
// unrun and nothing would free the frame. So a parked call registers here,
// and the context's shutdown drops every parked continuation, which frees
// the frame through the executor, as Asio frees any abandoned coroutine.
#pragma once

#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/query.hpp>

#include <mutex>
#include <optional>
#include <utility>

namespace resilience::detail {

struct parked_join {
  parked_join* prev = nullptr;
  parked_join* next = nullptr;
  void (*drop)(parked_join*) = nullptr;  // destroys the parked continuation
};

class parked_joins final : public boost::asio::execution_context::service {
 public:
  static boost::asio::execution_context::id id;

  explicit parked_joins(boost::asio::execution_context& context);

  template <class Executor>
  static parked_joins& of(const Executor& ex) {
    return boost::asio::use_service<parked_joins>(boost::asio::query(ex, boost::asio::execution::context));
  }

  void park(parked_join& j);
  void unpark(parked_join& j) noexcept;

 private:
  void shutdown() override;

  std::mutex mutex_;
  parked_join* head_ = nullptr;
};

// A coroutine's continuation parked in its own frame, registered for as long
// as it is parked so that the context's shutdown can let it go.
template <class Waiter>
class parked_continuation : parked_join {
 public:
  parked_continuation() noexcept { drop = &on_drop; }
  parked_continuation(const parked_continuation&) = delete;
  parked_continuation& operator=(const parked_continuation&) = delete;
  ~parked_continuation() {
    if (registry_) registry_->unpark(*this);
  }

  template <class Executor>
  void park(Waiter waiter, const Executor& ex) {
    waiter_.emplace(std::move(waiter));
    registry_ = &parked_joins::of(ex);
    registry_->park(*this);
  }

  bool parked() const noexcept { return waiter_.has_value(); }

  // Called first when the context's shutdown lets the continuation go: before
  // the context stops taking work, so that an owner other threads can reach
  // (a shared queue's node) withdraws while a post to the context is still
  // safe. Set it before park().
  void on_abandon(void (*f)(void*) noexcept, void* arg) noexcept {
    abandon_ = f;
    abandon_arg_ = arg;
  }

  // May end the frame that holds *this: the caller touches nothing after.
  void resume() {
    registry_->unpark(*this);
    registry_ = nullptr;
    auto waiter = std::move(*waiter_);
    waiter_.reset();
    std::move(waiter)();
  }

 private:
  // Asio frees an abandoned coroutine's frames through its executor.
  static void on_drop(parked_join* p) {
    auto& self = static_cast<parked_continuation&>(*p);
    self.registry_ = nullptr;
    if (self.abandon_) self.abandon_(self.abandon_arg_);
    if (!self.waiter_) return;
    auto abandoned = std::move(*self.waiter_);
    self.waiter_.reset();
  }

  std::optional<Waiter> waiter_;
  parked_joins* registry_ = nullptr;
  void (*abandon_)(void*) noexcept = nullptr;
  void* abandon_arg_ = nullptr;
};

}  // namespace resilience::detail
