// expect: use of deleted function .*resilience::context::with\(resilience::properties&&\) const
// expect: call to deleted member function 'with'[\s\S]*?resilience/context\.hpp:[0-9:]+ note: candidate function.* has been explicitly deleted
// strategy: retry
// A context refers to the call's properties: not to a temporary, which would
// be gone before the call ends.
#include <resilience/context.hpp>

resilience::context build() {
#ifdef RESILIENCE_MISUSE
  return resilience::context{}.with(resilience::properties{});
#else
  static resilience::properties props;
  return resilience::context{}.with(props);
#endif
}
