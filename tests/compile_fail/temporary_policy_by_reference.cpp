// expect: use of deleted function .*std::cref\(const _Tp&&\) \[with _Tp = resilience::basic_retry_policy<>\]
// expect: call to deleted function 'cref'[\s\S]*?bits/refwrap\.h:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: retry
// co_retry copies a policy into the call, unless told to refer to it with
// std::cref: then the policy must outlive the call, and a temporary cannot.
// The refusal is std::cref's own (its deleted overload for an rvalue): the
// call never reaches the library, whose policy type the diagnostic names.
#include <resilience/retry.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>

boost::asio::awaitable<int> op();

auto call() {
#ifdef RESILIENCE_MISUSE
  return resilience::co_retry([] { return op(); }, std::cref(resilience::retry_policy{}.max_attempts(2)));
#else
  static const auto policy = resilience::retry_policy{}.max_attempts(2);
  return resilience::co_retry([] { return op(); }, std::cref(policy));
#endif
}
