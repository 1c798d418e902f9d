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

}  // namespace resilience::detail
