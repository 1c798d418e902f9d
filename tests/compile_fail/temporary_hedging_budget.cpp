// expect: use of deleted function .*resilience::basic_hedging_policy<.*>::budget\(B&&\) const requires !\(is_lvalue_reference_v<B>\)
// expect: call to deleted member function 'budget'[\s\S]*?resilience/hedging\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: hedging
// A hedging policy refers to its retry budget, shared by every call: not to
// a temporary, which would be gone before the first hedge.
#include <resilience/hedging.hpp>
#include <resilience/retry_budget.hpp>

void build() {
#ifdef RESILIENCE_MISUSE
  const auto policy = resilience::hedging_policy{}.budget(resilience::retry_token_budget{10, 0.1});
#else
  static resilience::retry_token_budget throttle{10, 0.1};
  const auto policy = resilience::hedging_policy{}.budget(throttle);
#endif
  (void)policy;
}
