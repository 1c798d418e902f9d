// Every options setter's body: a copy with one field changed. The setter
// checks its argument first, naming the option in its std::invalid_argument.
#pragma once

#include <utility>

namespace resilience::detail {

template <class Options, class Field, class Value>
Options with_option(const Options& options, Field Options::*field, Value&& value) {
  Options copy = options;
  copy.*field = std::forward<Value>(value);
  return copy;
}

}  // namespace resilience::detail
