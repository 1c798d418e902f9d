// What stages share beyond stage.hpp: room in a frame for a slow path's
// value, hooks shared between copies of a stage, and running a stage that
// something else holds. Not public API.
#pragma once

#include <resilience/context.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/awaitable.hpp>

#include <cassert>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace resilience::detail {

// Room in a coroutine frame for a value that only a slow path makes: unlike
// a std::optional, the path that never makes it writes nothing. make() runs
// at most once (last in a try block, or in its handler); unless V is
// trivially destructible, a late<V>::owner declared right after it, in the
// scope that ends its life, destroys it.
template <class V>
union late {
  late() noexcept {}
  ~late() {}
  late(const late&) = delete;
  late& operator=(const late&) = delete;

  template <class... A>
  void make(A&&... a) {
    ::new (static_cast<void*>(&value)) V(std::forward<A>(a)...);
  }
  struct owner {
    V& value;
    ~owner() { value.~V(); }
  };

  V value;
};

// A hook that the copies of a stage share, so that copying a stage into a
// call never allocates: free when none is set, a reference count when one is.
template <class Signature>
class shared_hook {
 public:
  shared_hook() noexcept = default;
  shared_hook(std::function<Signature> f)
      : f_(f ? std::make_shared<const std::function<Signature>>(std::move(f)) : nullptr) {}

  explicit operator bool() const noexcept { return f_ != nullptr; }
  template <class... A>
  decltype(auto) operator()(A&&... a) const {
    assert(f_ && "shared_hook: test for a hook before calling it");
    return (*f_)(std::forward<A>(a)...);
  }
  std::function<Signature> function() const { return f_ ? *f_ : std::function<Signature>{}; }

 private:
  std::shared_ptr<const std::function<Signature>> f_;
};

// Runs a stage that something longer-lived holds (a pipeline, or a call's
// own frame): by reference when the stage would otherwise copy itself into
// the call.
template <class S, class Op>
auto run_held_stage(const S& s, Op op, const context& ctx) {
  if constexpr (requires { s.run_referenced(std::move(op), ctx); }) {
    return s.run_referenced(std::move(op), ctx);
  } else {
    return s.run(std::move(op), ctx);
  }
}

// Runs op through a stage that this frame owns: a temporary stage moved in,
// or a named one copied in, so that the awaitable never refers to a stage
// that may be gone.
template <class T, class Executor, class Held, class Op>
boost::asio::awaitable<T, Executor> run_owned(Held stage, Op op, context ctx) {
  co_return co_await run_held_stage(deref(stage), std::move(op), ctx);
}

template <class Stage, class Op>
  requires(!std::is_lvalue_reference_v<Stage>)
auto run_owning(Stage&& stage, Op op, const context& ctx) {
  return run_owned<op_value_t<Op>, op_executor_t<Op>>(std::move(stage), std::move(op), ctx);
}

}  // namespace resilience::detail
