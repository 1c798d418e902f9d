// expect: use of deleted function .*resilience::judged_state_stage<S, Core, Clock, Default>::stage\(\) const &&
// expect: call to deleted member function 'stage'[\s\S]*?resilience/stage\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: adaptive_throttle
// A throttle's stage refers to the throttle: taken from a temporary it
// would dangle at once.
#include <resilience/adaptive_throttle.hpp>

void build() {
#ifdef RESILIENCE_MISUSE
  const auto stage = resilience::adaptive_throttle{}.stage();
#else
  static const resilience::adaptive_throttle throttle;
  const auto stage = throttle.stage();
#endif
  (void)stage;
}
