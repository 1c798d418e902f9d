// Parts of retry.hpp that are not its API: how a failure is described in a
// log line, the reference to a retry budget a policy consults, and the
// context of a call made without one. Not to be included on its own.
#pragma once

#include <resilience/clock.hpp>
#include <resilience/context.hpp>
#include <resilience/error.hpp>
#include <resilience/outcome.hpp>
#include <resilience/retry_budget.hpp>
#include <resilience/detail/stage_support.hpp>

#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

namespace resilience::detail {

// Compiled in lib/: the text of a log line, and a failure's description.
std::string describe_failure(const std::exception_ptr& ex, const error_code& ec);
std::string format_retry_line(std::uint32_t attempt, std::uint32_t max_attempts, std::string_view failure,
                              duration backoff, duration delay);
std::string format_budget_line(std::uint32_t attempt, std::uint32_t max_attempts, std::string_view failure);

// A value that fails without an error code (an HTTP 503 response) is
// described by `describe_result(const T&)`, found by argument-dependent
// lookup in T's namespace, when the application declares one:
//   std::string describe_result(const response& r) { return "HTTP " + std::to_string(r.status); }
template <class T>
concept describable_result = requires(const T& v) {
  { describe_result(v) } -> std::convertible_to<std::string>;
};

template <class T>
std::string describe_outcome(const outcome<T>& o) {
  if constexpr (!std::is_void_v<T> && describable_result<T>) {
    if (o.has_value() && !o.error()) return std::string(describe_result(o.value()));
  }
  return describe_failure(o.exception(), o.error());
}

// The budget a policy consults (retry_budget.hpp), by reference. Two calls
// through function pointers per attempt when one is set; a null test when not.
struct budget_ref {
  void* budget = nullptr;
  void (*record_fn)(void*, attempt_verdict, bool) noexcept = nullptr;
  bool (*try_retry_fn)(void*) noexcept = nullptr;
  bool (*would_retry_fn)(const void*) noexcept = nullptr;  // null: the budget cannot tell before

  void record(attempt_verdict v, bool first_attempt) const noexcept {
    if (budget) record_fn(budget, v, first_attempt);
  }
  bool allows_retry() const noexcept { return !budget || try_retry_fn(budget); }
  // Whether a retry decided now could be allowed, taking nothing: a call
  // that could not is refused before it waits for nothing.
  bool would_allow_retry() const noexcept { return !budget || !would_retry_fn || would_retry_fn(budget); }
  // As a budget itself (a client's options hold one for their policy).
  bool try_retry() const noexcept { return allows_retry(); }
  bool would_retry() const noexcept { return would_allow_retry(); }
  explicit operator bool() const noexcept { return budget != nullptr; }

  template <class B>
  static budget_ref to(B& b) noexcept {
    return {&b,
            [](void* p, attempt_verdict v, bool first) noexcept {
              if constexpr (requires(B& x) { x.record(v, first); }) {
                static_cast<B*>(p)->record(v, first);
              } else if (v != attempt_verdict::not_sent) {
                static_cast<B*>(p)->record(v == attempt_verdict::retryable_failure, first);
              }
            },
            [](void* p) noexcept -> bool { return static_cast<B*>(p)->try_retry(); },
            would_retry_of<B>()};
  }

 private:
  template <class B>
  static constexpr auto would_retry_of() noexcept -> bool (*)(const void*) noexcept {
    if constexpr (requires(const B& x) {
                    { x.would_retry() } -> std::convertible_to<bool>;
                  }) {
      return [](const void* p) noexcept -> bool { return static_cast<const B*>(p)->would_retry(); };
    } else {
      return nullptr;
    }
  }
};

// How a settled attempt counts for a budget (attempt_verdict).
template <class T>
attempt_verdict verdict_of(const outcome<T>& o, bool retryable) noexcept {
  if (retryable) return attempt_verdict::retryable_failure;
  return o.failed() ? attempt_verdict::final_failure : attempt_verdict::success;
}

// The parent of a call made without a context, co_retry(op, policy): room
// for the call's own context, made only once something reads it, so that a
// first attempt that succeeds writes none.
struct no_parent {
  no_parent() noexcept {}
  no_parent(const no_parent&) noexcept {}  // nothing is made before the call starts
  late<context> ctx;
};

// The call's context: the parent's copy, or the room for one.
inline context& context_in(context& parent) noexcept { return parent; }
inline context& context_in(no_parent& none) noexcept { return none.ctx.value; }
// Makes it, where there is none yet.
inline void make_context(context&) noexcept {}
inline void make_context(no_parent& none) noexcept { none.ctx.make(); }
// The parent's deadline, read before the context is made.
inline time_point deadline_of(const context& parent) noexcept { return parent.deadline; }
inline time_point deadline_of(const no_parent&) noexcept { return time_point::max(); }

template <class T>
inline constexpr bool is_reference_wrapper = false;
template <class T>
inline constexpr bool is_reference_wrapper<std::reference_wrapper<T>> = true;

// a + b for delays (never negative), saturating as clock.hpp's saturating_add.
inline duration saturating_sum(duration a, duration b) noexcept {
  return saturating_add(time_point(a), b).time_since_epoch();
}

}  // namespace resilience::detail
