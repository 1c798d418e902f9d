// Placeholder: tests for rate_limiter arrive with the strategy.
#include <boost/test/unit_test.hpp>
#include <boost/test/unit_test.hpp>
BOOST_AUTO_TEST_CASE(strategy_tests_placeholder) { BOOST_TEST(true); }
