#include <resilience/backoff.hpp>
#include <resilience/random.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using resilience::backoff;
using resilience::delay_sequence;
using resilience::duration;
using resilience::jitter;
using resilience::random_source;

namespace {

// Throws if `f` does not throw invalid_argument whose text names `field`.
template <class F>
void expect_rejected(F f, const std::string& field) {
  try {
    f();
    BOOST_FAIL("expected std::invalid_argument naming " + field);
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find(field) != std::string::npos, "message: " << e.what());
  }
}

std::vector<duration> draws(const backoff& b, int retries, std::uint64_t seed) {
  delay_sequence seq{b};
  random_source random = random_source::seeded(seed);
  std::vector<duration> out;
  for (int i = 0; i < retries; ++i) out.push_back(seq.next(random).actual);
  return out;
}

double mean_ms(const std::vector<duration>& v) {
  double sum = 0;
  for (auto d : v) sum += std::chrono::duration<double, std::milli>(d).count();
  return sum / static_cast<double>(v.size());
}

// Many independent clients' delay for one retry number.
std::vector<duration> across_clients(const backoff& b, int retry, int clients) {
  std::vector<duration> out;
  random_source random = random_source::seeded(1234);
  for (int c = 0; c < clients; ++c) {
    delay_sequence seq{b};
    resilience::delay d{};
    for (int r = 0; r < retry; ++r) d = seq.next(random);
    out.push_back(d.actual);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(backoff_schedules)

BOOST_AUTO_TEST_CASE(exponential_schedule_is_exact_without_jitter) {
  const auto b = backoff::exponential(100ms, 2.0, 10s);
  const std::vector<duration> expected{100ms, 200ms, 400ms, 800ms, 1600ms, 3200ms, 6400ms, 10s, 10s};
  for (std::size_t i = 0; i < expected.size(); ++i) BOOST_TEST(b.nominal(i + 1) == expected[i]);
  delay_sequence seq{b};
  for (auto want : expected) {
    const auto d = seq.next(random_source{});
    BOOST_TEST(d.nominal == want);
    BOOST_TEST(d.actual == want);
  }
}

BOOST_AUTO_TEST_CASE(exponential_with_fractional_factor) {
  const auto b = backoff::exponential(1s, 1.5, 1h);
  BOOST_TEST(b.nominal(1) == duration(1s));
  BOOST_TEST(b.nominal(2) == duration(1500ms));
  BOOST_TEST(b.nominal(3) == duration(2250ms));
}

BOOST_AUTO_TEST_CASE(huge_attempt_numbers_saturate_at_the_cap) {
  const auto b = backoff::exponential(1s, 10.0, 30s);
  BOOST_TEST(b.nominal(10'000) == duration(30s));
  BOOST_TEST(b.nominal(UINT64_MAX) == duration(30s));
  const auto uncapped = backoff::exponential(1ms, 10.0, backoff::no_cap);
  BOOST_TEST(uncapped.nominal(10'000) == backoff::no_cap);
  BOOST_TEST(uncapped.nominal(10'000) > duration::zero());
  const auto lin = backoff::linear(1s, 1h, backoff::no_cap);
  BOOST_TEST(lin.nominal(UINT64_MAX) == backoff::no_cap);
  BOOST_TEST(lin.nominal(3) == duration(1s + 2h));
}

BOOST_AUTO_TEST_CASE(linear_and_constant) {
  const auto lin = backoff::linear(100ms, 50ms, 260ms);
  BOOST_TEST(lin.nominal(1) == duration(100ms));
  BOOST_TEST(lin.nominal(2) == duration(150ms));
  BOOST_TEST(lin.nominal(4) == duration(250ms));
  BOOST_TEST(lin.nominal(5) == duration(260ms));
  BOOST_TEST(lin.nominal(1000) == duration(260ms));
  const auto c = backoff::constant(42ms);
  BOOST_TEST(c.nominal(1) == duration(42ms));
  BOOST_TEST(c.nominal(999) == duration(42ms));
  BOOST_TEST(backoff::constant(0ms).nominal(3) == duration::zero());
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_field) {
  expect_rejected([] { backoff::constant(-1ms); }, "delay");
  expect_rejected([] { backoff::linear(-1ms, 1ms); }, "initial");
  expect_rejected([] { backoff::linear(1ms, -1ms); }, "step");
  expect_rejected([] { backoff::linear(10ms, 1ms, 5ms); }, "cap");
  expect_rejected([] { backoff::exponential(-1ms); }, "base");
  expect_rejected([] { backoff::exponential(0ms); }, "base");
  expect_rejected([] { backoff::exponential(1ms, 0.5); }, "factor");
  expect_rejected([] { backoff::exponential(1ms, std::nan("")); }, "factor");
  expect_rejected([] { backoff::exponential(1ms, INFINITY); }, "factor");
  expect_rejected([] { backoff::exponential(2s, 2.0, 1s); }, "cap");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(jitter_distributions)

constexpr int samples = 20'000;

BOOST_AUTO_TEST_CASE(full_jitter_is_uniform_over_the_window) {
  const auto b = backoff::constant(1000ms).with_jitter(jitter::full);
  const auto v = draws(b, samples, 7);
  BOOST_TEST(std::all_of(v.begin(), v.end(), [](duration d) { return d >= 0ms && d <= 1000ms; }));
  BOOST_TEST(mean_ms(v) == 500.0, boost::test_tools::tolerance(0.02));
  const auto low = std::count_if(v.begin(), v.end(), [](duration d) { return d < 250ms; });
  BOOST_TEST(static_cast<double>(low) / samples == 0.25, boost::test_tools::tolerance(0.05));
}

BOOST_AUTO_TEST_CASE(equal_jitter_keeps_half_the_delay) {
  const auto b = backoff::constant(1000ms).with_jitter(jitter::equal);
  const auto v = draws(b, samples, 8);
  BOOST_TEST(std::all_of(v.begin(), v.end(), [](duration d) { return d >= 500ms && d <= 1000ms; }));
  BOOST_TEST(mean_ms(v) == 750.0, boost::test_tools::tolerance(0.02));
}

BOOST_AUTO_TEST_CASE(clients_at_the_cap_stay_spread_out) {
  const auto base = backoff::exponential(100ms, 2.0, 2s);
  for (jitter j : {jitter::full, jitter::equal, jitter::decorrelated, jitter::decorrelated_v2}) {
    const auto v = across_clients(base.with_jitter(j), 30, 2000);  // retry 30: far past the cap
    const auto at_cap = std::count(v.begin(), v.end(), duration(2s));
    BOOST_TEST(at_cap < 20, "jitter " << resilience::to_string(j) << ": " << at_cap << " clients at exactly the cap");
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    BOOST_TEST(*hi <= duration(2s));
    BOOST_TEST(*hi - *lo > duration(500ms), "jitter " << resilience::to_string(j) << " spread too narrow");
  }
  const auto none = across_clients(base, 30, 100);
  BOOST_TEST(std::count(none.begin(), none.end(), duration(2s)) == 100);
}

BOOST_AUTO_TEST_CASE(decorrelated_stays_within_its_bounds) {
  const auto b = backoff::exponential(100ms, 2.0, 5s).with_jitter(jitter::decorrelated);
  delay_sequence seq{b};
  random_source random = random_source::seeded(9);
  duration previous = 100ms;
  for (int i = 0; i < samples; ++i) {
    const auto d = seq.next(random).actual;
    BOOST_TEST_REQUIRE(d >= duration(100ms));
    BOOST_TEST_REQUIRE(d <= std::min<duration>(previous * 3, 5s));
    previous = d;
  }
}

BOOST_AUTO_TEST_CASE(decorrelated_grows_from_base) {
  // From base, the expected next delay is (base + 3 base) / 2 = 2 base.
  const auto v = across_clients(backoff::exponential(100ms, 2.0, 1h).with_jitter(jitter::decorrelated), 1, samples);
  BOOST_TEST(mean_ms(v) == 200.0, boost::test_tools::tolerance(0.03));
}

BOOST_AUTO_TEST_CASE(decorrelated_v2_is_smooth_and_bounded) {
  const auto b = backoff::exponential(1s, 2.0, 1h).with_jitter(jitter::decorrelated_v2);
  // First delay: (2^u tanh(sqrt(4u))) / 1.4 seconds with u uniform in [0, 1):
  // within [0, 2 tanh(2) / 1.4) and about base on average.
  const auto first = across_clients(b, 1, samples);
  BOOST_TEST(std::all_of(first.begin(), first.end(), [](duration d) { return d >= 0s && d < 1380ms; }));
  BOOST_TEST(mean_ms(first) > 700.0);
  BOOST_TEST(mean_ms(first) < 1000.0);
  // Later delays grow roughly geometrically, never negative, never past the cap.
  const auto fifth = across_clients(b, 5, samples);
  BOOST_TEST(mean_ms(fifth) > 4 * mean_ms(first));
  BOOST_TEST(std::all_of(fifth.begin(), fifth.end(), [](duration d) { return d > 0s && d <= 1h; }));
  // It never reaches infinity, however far a client retries.
  const auto far = draws(b, 5000, 3);
  BOOST_TEST(std::all_of(far.begin() + 100, far.end(), [](duration d) { return d >= 30min && d <= 1h; }) == true);
}

BOOST_AUTO_TEST_CASE(no_jitter_reports_nominal_as_actual) {
  const auto v = draws(backoff::linear(10ms, 10ms, 1s), 5, 1);
  BOOST_TEST((v == std::vector<duration>{10ms, 20ms, 30ms, 40ms, 50ms}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(random_sources)

BOOST_AUTO_TEST_CASE(seeded_sources_repeat_and_differ) {
  auto a = random_source::seeded(5), b = random_source::seeded(5), c = random_source::seeded(6);
  bool all_same = true, any_differs = false;
  for (int i = 0; i < 100; ++i) {
    const double x = a.next_unit(), y = b.next_unit(), z = c.next_unit();
    all_same = all_same && x == y;
    any_differs = any_differs || x != z;
    BOOST_TEST_REQUIRE((x >= 0.0 && x < 1.0));
  }
  BOOST_TEST(all_same);
  BOOST_TEST(any_differs);
}

BOOST_AUTO_TEST_CASE(copies_of_a_seeded_source_share_one_sequence) {
  auto a = random_source::seeded(11);
  auto copy = a;
  const double first = a.next_unit();
  const double second = copy.next_unit();
  auto fresh = random_source::seeded(11);
  BOOST_TEST(fresh.next_unit() == first);
  BOOST_TEST(fresh.next_unit() == second);
}

BOOST_AUTO_TEST_CASE(default_source_is_uniform) {
  random_source r;
  double sum = 0;
  for (int i = 0; i < 20'000; ++i) {
    const double x = r.next_unit();
    BOOST_TEST_REQUIRE((x >= 0.0 && x < 1.0));
    sum += x;
  }
  BOOST_TEST(sum / 20'000 == 0.5, boost::test_tools::tolerance(0.03));
}

BOOST_AUTO_TEST_SUITE_END()
