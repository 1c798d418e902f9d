// Placeholder: tests for metrics arrive with the strategy.
#include <boost/test/unit_test.hpp>
