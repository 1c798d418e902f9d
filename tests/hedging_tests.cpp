// Placeholder: tests for hedging arrive with the strategy.
#include <boost/test/unit_test.hpp>
