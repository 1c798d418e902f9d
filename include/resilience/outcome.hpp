// resilience/outcome.hpp — what one call of an operation produced.
//
// Every strategy in the library sees an operation's result through
// `outcome<T>`: either a value of T, or an exception. A value may itself carry
// an error — `error_code`, `boost::system::result<U>` or the
// `std::tuple<error_code, ...>` that `asio::as_tuple` produces — and
// `outcome_traits<T>` says how to read and make one.
//
//   auto retry_503 = [](const resilience::outcome<http_response>& o) {
//     return o.failed() || o.value().status == 503;
//   };
//
// Classifiers (retry's "should retry", a breaker's "counts as failure") all
// have this one shape: a predicate over `const outcome<T>&`.
#pragma once

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>
#include <boost/system/system_error.hpp>

#include <cassert>
#include <concepts>
#include <exception>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

namespace resilience {

using boost::system::error_code;

// True for the codes that mean "cancelled", whichever category carries them.
inline bool is_cancellation(const error_code& ec) noexcept {
  // The empty check first: comparing with an error condition makes virtual
  // calls, and success is the common case.
  return ec.failed() && ec == boost::system::errc::operation_canceled;
}

// How a result type carries an error. The primary template is for types that
// carry none: their only failure channel is an exception.
template <class T>
struct outcome_traits {
  static constexpr bool has_error_channel = false;
  static error_code error(const T&) noexcept { return {}; }
};

template <>
struct outcome_traits<void> {
  static constexpr bool has_error_channel = false;
};

template <>
struct outcome_traits<error_code> {
  static constexpr bool has_error_channel = true;
  static error_code error(const error_code& ec) noexcept { return ec; }
  static error_code from_error(const error_code& ec) noexcept { return ec; }
};

template <class U>
struct outcome_traits<boost::system::result<U, error_code>> {
  static constexpr bool has_error_channel = true;
  static error_code error(const boost::system::result<U, error_code>& r) noexcept {
    return r.has_error() ? r.error() : error_code{};
  }
  static boost::system::result<U, error_code> from_error(const error_code& ec) { return ec; }
};

template <class... Rest>
struct outcome_traits<std::tuple<error_code, Rest...>> {
  static constexpr bool has_error_channel = true;
  static error_code error(const std::tuple<error_code, Rest...>& t) noexcept {
    return std::get<0>(t);
  }
  static std::tuple<error_code, Rest...> from_error(const error_code& ec)
    requires(std::default_initializable<Rest> && ...)
  {
    return {ec, Rest{}...};
  }
};

// What a strategy hands back when it ends a call with its own error (a
// cancellation, a timeout): the error in the result's own channel, or an
// exception for results that have none.
template <class T>
T make_failure(const error_code& ec) {
  if constexpr (outcome_traits<T>::has_error_channel) {
    return outcome_traits<T>::from_error(ec);
  } else {
    throw boost::system::system_error(ec);
  }
}

namespace detail {
template <class T>
using stored_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;
}

template <class T>
class outcome {
 public:
  using value_type = detail::stored_t<T>;

  static outcome from_value(value_type v) {
    outcome o;
    o.value_.emplace(std::move(v));
    return o;
  }
  // The value made in place: `opt.emplace(std::in_place, std::move(v))`
  // moves it once, where from_value moves it three times (a response's
  // fields are not cheap to move).
  template <class... A>
    requires std::is_constructible_v<value_type, A...>
  outcome(std::in_place_t, A&&... a) {
    value_.emplace(std::forward<A>(a)...);
  }

  // `ec` in T's own error channel, or as a thrown system_error for a T that
  // has none.
  static outcome from_error(const error_code& ec) {
    if constexpr (!std::is_void_v<T> && outcome_traits<T>::has_error_channel) {
      return from_value(outcome_traits<T>::from_error(ec));
    } else {
      outcome o;
      o.exception_ = std::make_exception_ptr(boost::system::system_error(ec));
      o.exception_code_ = ec;
      return o;
    }
  }

  // From an exception_ptr (as co_spawn hands one over); reads a
  // system_error's code by rethrowing it, so keep this off hot paths.
  static outcome from_exception(std::exception_ptr e) noexcept {
    try {
      std::rethrow_exception(std::move(e));
    } catch (...) {
      return from_current_exception();
    }
  }

  // Call from inside a catch block: keeps the error code of a system_error so
  // classifiers never have to rethrow to read it.
  static outcome from_current_exception() noexcept {
    outcome o;
    o.exception_ = std::current_exception();
    try {
      throw;
    } catch (const boost::system::system_error& e) {
      o.exception_code_ = e.code();
    } catch (...) {
    }
    return o;
  }

  bool has_value() const noexcept { return value_.has_value(); }
  bool has_exception() const noexcept { return exception_ != nullptr; }

  const value_type& value() const& noexcept {
    assert(has_value());
    return *value_;
  }
  value_type&& value() && noexcept {
    assert(has_value());
    return std::move(*value_);
  }
  const std::exception_ptr& exception() const noexcept { return exception_; }

  // The error this outcome carries, if it is known as an error_code: the
  // value's own error, or the code of a thrown system_error. Empty otherwise.
  error_code error() const noexcept {
    if (value_) {
      if constexpr (std::is_void_v<T>) {
        return {};
      } else {
        return outcome_traits<T>::error(*value_);
      }
    }
    return exception_code_;
  }

  // An exception, or a value whose own error channel reports an error.
  bool failed() const noexcept { return exception_ != nullptr || error().failed(); }

  bool cancelled() const noexcept { return is_cancellation(error()); }

  // Hands the outcome back to a caller: the value, or the exception rethrown.
  // Returns T itself (void for void), so `co_return std::move(o).get();`
  // works for every T.
  T get() && {
    if (exception_) std::rethrow_exception(exception_);
    if constexpr (!std::is_void_v<T>) return std::move(*value_);
  }

 private:
  outcome() = default;

  std::optional<value_type> value_;
  std::exception_ptr exception_;
  error_code exception_code_;
};

namespace detail {
// get() without the move into its return value: `co_return take(std::move(o));`
// moves T once, straight into the promise (twice with get(): a response
// moved up through the layers of a call pays for each).
template <class T>
decltype(auto) take(outcome<T>&& o) {
  if constexpr (std::is_void_v<T>) {
    std::move(o).get();
  } else {
    if (o.has_exception()) std::rethrow_exception(o.exception());
    return std::move(o).value();
  }
}
}  // namespace detail

// The classifier shape shared by every strategy.
template <class C, class T>
concept classifier_for = std::predicate<const C&, const outcome<T>&>;

}  // namespace resilience
