// expect: use of deleted function .*resilience::config::live_config::events\(resilience::event_sink&&\)
// expect: call to deleted member function 'events'
// strategy: config
// A live configuration reports its reloads to a sink it refers to: not to a
// temporary, which would be gone before the first reload.
#include <resilience/config.hpp>

struct reload_log : resilience::event_sink {
  void on_event(const resilience::event&) noexcept override {}
};

void build(resilience::config::live_config& live) {
#ifdef RESILIENCE_MISUSE
  live.events(reload_log{});
#else
  static reload_log log;
  live.events(log);
#endif
}
