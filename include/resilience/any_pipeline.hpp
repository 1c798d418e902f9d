// resilience/any_pipeline.hpp — a pipeline whose stages are chosen at run time.
//
//   resilience::any_pipeline<std::string> call;            // what the op returns
//   if (config.deadline) call.add(resilience::deadline_stage(*config.deadline));
//   if (config.retries) call.add(resilience::retry_policy{}.max_attempts(*config.retries));
//   call.add(resilience::timeout(config.attempt_timeout));
//   std::string body = co_await call([&] { return http_get(url); });
//
// The same stages as pipeline(), outermost first, behind one interface, for
// configuration-driven use. Each stage costs a std::function call and a
// coroutine frame more than in the static pipeline(); prefer that one when
// the stages are known at compile time. Stages are stored by value, except
// std::ref(stage), which is referenced and must outlive the pipeline. Copies
// of a pipeline, and the calls it makes, share its stages.
// Construction does the same checks as pipeline(): an attempt timeout longer
// than an enclosing deadline's budget throws std::invalid_argument.
#pragma once

#include <resilience/context.hpp>
#include <resilience/detail/bounded_run.hpp>
#include <resilience/pipeline.hpp>
#include <resilience/stage.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace resilience {

template <class T, class Executor = boost::asio::any_io_executor>
class any_pipeline : public run_as_call<any_pipeline<T, Executor>> {
 public:
  using awaitable_type = boost::asio::awaitable<T, Executor>;
  // What a stage wraps: the rest of the pipeline, inner stages and op.
  using next_type = std::function<awaitable_type(const context&)>;

  // Appends `stage` inside the stages already added.
  template <class Stage>
  any_pipeline& add(Stage&& stage) {
    using stored = detail::stage_storage_t<Stage>;
    auto held = std::make_shared<stored>(detail::store_stage<stored>(std::forward<Stage>(stage)));
    std::optional<duration> budget = budget_;
    check(detail::unwrap_stage(*held), budget);
    // Calls in flight and copies share the list: a change makes a new one
    // (built before anything is committed, so a throw changes nothing).
    auto next = stages_ ? std::make_shared<stage_list>(*stages_) : std::make_shared<stage_list>();
    next->push_back([held](const next_type& next, const context& ctx) -> awaitable_type {
      return detail::run_held_stage(detail::unwrap_stage(*held), call_next{&next}, ctx);
    });
    stages_ = std::move(next);
    budget_ = budget;
    return *this;
  }

  std::size_t size() const noexcept { return stages_ ? stages_->size() : 0; }

  // The stage interface. The call holds a copy of this pipeline, which
  // shares its stages (a reference count), so the awaitable may outlive it.
  template <class Op>
  awaitable_type run(Op op, const context& parent = {}) const& {
    return detail::run_owned<T, Executor>(any_pipeline(*this), std::move(op), parent);
  }
  template <class Op>
  awaitable_type run(Op op, const context& parent = {}) && {
    return detail::run_owned<T, Executor>(std::move(*this), std::move(op), parent);
  }

  // Refers to this pipeline instead of copying it: it must outlive the call.
  template <class Op>
  awaitable_type run_referenced(Op op, const context& parent = {}) const& {
    return run_from(0, next_type([op = std::move(op)](const context& ctx) mutable -> awaitable_type {
                      return detail::invoke_op(op, ctx);
                    }),
                    parent);
  }
  template <class Op>
  awaitable_type run_referenced(Op op, const context& parent = {}) && = delete;

 private:
  // Calls a next_type owned by an enclosing frame, without copying it.
  struct call_next {
    const next_type* next;
    awaitable_type operator()(const context& ctx) const { return (*next)(ctx); }
  };

  awaitable_type run_from(std::size_t i, next_type op, context ctx) const {
    if (i == size()) co_return co_await op(ctx);
    // The frame keeps `op` and `inner` alive while stage i runs them.
    const next_type inner = [this, i, &op](const context& c) { return run_from(i + 1, call_next{&op}, c); };
    co_return co_await (*stages_)[i](inner, ctx);
  }

  awaitable_type run_from(std::size_t i, call_next op, context ctx) const {
    return run_from(i, next_type(op), ctx);
  }

  template <class S>
  static void check(const S& s, std::optional<duration>& budget) {
    if constexpr (detail::has_limit<S>) {
      if (budget && s.limit() > *budget)
        throw std::invalid_argument("any_pipeline: a timeout inside a deadline with a shorter budget can never fire");
    }
    if constexpr (detail::has_budget<S>) {
      if (auto b = s.budget(); b && (!budget || *b < *budget)) budget = b;
    }
  }

  using stage_list = std::vector<std::function<awaitable_type(const next_type&, const context&)>>;
  std::shared_ptr<const stage_list> stages_;
  std::optional<duration> budget_;
};

}  // namespace resilience
