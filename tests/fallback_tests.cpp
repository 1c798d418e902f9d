// Placeholder: tests for fallback arrive with the strategy.
#include <boost/test/unit_test.hpp>
