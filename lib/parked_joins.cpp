#include <resilience/detail/parked_joins.hpp>

#include <vector>

namespace resilience::detail {

boost::asio::execution_context::id parked_joins::id;

parked_joins::parked_joins(boost::asio::execution_context& context)
    : boost::asio::execution_context::service(context) {}

void parked_joins::park(parked_join& j) {
  std::lock_guard lock(mutex_);
  j.prev = nullptr;
  j.next = head_;
  if (head_) head_->prev = &j;
  head_ = &j;
}

void parked_joins::unpark(parked_join& j) noexcept {
  std::lock_guard lock(mutex_);
  (j.prev ? j.prev->next : head_) = j.next;
  if (j.next) j.next->prev = j.prev;
  j.prev = j.next = nullptr;
}

void parked_joins::shutdown() {
  // Unlinked under the lock, dropped outside it: dropping frees frames
  // whose destructors may come back here.
  std::vector<parked_join*> parked;
  {
    std::lock_guard lock(mutex_);
    for (parked_join* j = head_; j; j = j->next) parked.push_back(j);
    for (parked_join* j : parked) j->prev = j->next = nullptr;
    head_ = nullptr;
  }
  for (parked_join* j : parked) j->drop(j);
}

}  // namespace resilience::detail
