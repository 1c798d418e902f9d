// Every options setter's body: a copy with one field changed. The setter
// checks its argument first, naming the option in its std::invalid_argument.
#pragma once

#include <stdexcept>
#include <utility>

namespace resilience::detail {

template <class Options, class Field, class Value>
Options with_option(const Options& options, Field Options::*field, Value&& value) {
  Options copy = options;
  copy.*field = std::forward<Value>(value);
  return copy;
}

// A field of a member (a policy's options struct).
template <class Options, class Member, class Field, class Value>
Options with_option(const Options& options, Member Options::*member, Field Member::*field, Value&& value) {
  Options copy = options;
  copy.*member.*field = std::forward<Value>(value);
  return copy;
}

// A setter's refusal of its argument; `what` names the option and the rule.
[[noreturn]] inline void invalid_option(const char* what) { throw std::invalid_argument(what); }

}  // namespace resilience::detail
