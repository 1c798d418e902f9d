// A retry budget of one host's own (client_options::budget_per_host) and
// the client's retry policy consulting it. Not public API.
#pragma once

#include <resilience/detail/retry_support.hpp>
#include <resilience/http/client_options.hpp>
#include <resilience/retry_budget.hpp>

#include <utility>
#include <variant>

namespace resilience::http::detail {

// The options' budget (if any) on the policy; it refers to the options' copy.
template <class Policy>
Policy with_budget(const client_options& o, Policy p, const resilience::detail::budget_ref& budget) {
  if (!budget) return p;
  p = p.budget(budget);
  if (o.on_budget_refused()) p = p.on_budget_refused(o.on_budget_refused());
  return p;
}
template <class Policy>
Policy with_budget(const client_options& o, Policy p) {
  return with_budget(o, std::move(p), o.budget());
}

template <class Policy, class Clock>
struct host_budget {
  std::variant<retry_token_budget, basic_retry_ratio_budget<Clock>> budget;
  Policy policy;

  host_budget(const client_options& o, const Policy& retry, const Clock&, const retry_token_budget_settings& s)
      : budget(std::in_place_index<0>, s.max_tokens, s.token_ratio), policy(policy_for(o, retry)) {}
  host_budget(const client_options& o, const Policy& retry, const Clock& clock, const retry_ratio_budget_options& r)
      : budget(std::in_place_index<1>, r, clock), policy(policy_for(o, retry)) {}

 private:
  Policy policy_for(const client_options& o, const Policy& retry) {
    return with_budget(o, retry, std::visit([](auto& b) { return resilience::detail::budget_ref::to(b); }, budget));
  }
};

}  // namespace resilience::http::detail
