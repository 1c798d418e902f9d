#define BOOST_TEST_MODULE asio_resilience
#include <boost/test/unit_test.hpp>
