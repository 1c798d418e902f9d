// Placeholder: tests for throttling arrive with the strategy.
#include <boost/test/unit_test.hpp>
