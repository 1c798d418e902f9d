// expect: use of deleted function .*resilience::chaos_options::enabled_by\(const resilience::chaos_switch&&\) const
// expect: call to deleted member function 'enabled_by'[\s\S]*?resilience/chaos\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: chaos
// Chaos options refer to their switch, shared by every stage built with
// them: not to a temporary, which would be gone before the first call.
#include <resilience/chaos.hpp>

void build() {
#ifdef RESILIENCE_MISUSE
  const auto options = resilience::chaos_options{}.enabled_by(resilience::chaos_switch{true});
#else
  static resilience::chaos_switch chaos_on{true};
  const auto options = resilience::chaos_options{}.enabled_by(chaos_on);
#endif
  (void)options;
}
