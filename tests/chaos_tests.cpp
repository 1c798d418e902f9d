// Placeholder: tests for chaos arrive with the strategy.
#include <boost/test/unit_test.hpp>
