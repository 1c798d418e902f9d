#include "support.hpp"

#include <resilience/backoff.hpp>
#include <resilience/random.hpp>
#include <resilience/retry.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using resilience::backoff;
using resilience::delay_sequence;
using resilience::duration;
using resilience::jitter;
using resilience::random_source;
using resilience::retry_policy;
using resilience::time_point;
using namespace resilience::test::extremes;

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

// A fleet that builds its own schedule must not go back to lockstep: every
// shape has full jitter until told otherwise; decorrelated draws its own.
BOOST_AUTO_TEST_CASE(every_schedule_has_full_jitter_unless_told_otherwise) {
  const std::vector<backoff> made{backoff::constant(1s), backoff::linear(1s, 1s, 10s), backoff::exponential(1s),
                                  backoff::custom([](std::uint32_t, duration, const random_source&) { return 1s; })};
  for (const backoff& b : made) {
    BOOST_TEST((b.jitter_kind() == jitter::full));
    delay_sequence seq{b};
    const auto rs = random_source::seeded(5);
    bool spread = false;
    for (int i = 0; i < 8; ++i) {
      const auto d = seq.next(rs);
      BOOST_TEST((d.actual <= d.nominal));
      spread = spread || d.actual != d.nominal;
    }
    BOOST_TEST(spread);
  }
  BOOST_TEST((backoff::decorrelated(1s, 10s).jitter_kind() == jitter::none));
  BOOST_TEST((backoff::exponential(1s).with_jitter(jitter::none).jitter_kind() == jitter::none));
}

BOOST_AUTO_TEST_CASE(exponential_schedule_is_exact_without_jitter) {
  const auto b = backoff::exponential(100ms, 2.0, 10s).with_jitter(resilience::jitter::none);
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
  const auto b = backoff::exponential(1s, 1.5, 1h).with_jitter(resilience::jitter::none);
  BOOST_TEST(b.nominal(1) == duration(1s));
  BOOST_TEST(b.nominal(2) == duration(1500ms));
  BOOST_TEST(b.nominal(3) == duration(2250ms));
}

BOOST_AUTO_TEST_CASE(huge_attempt_numbers_saturate_at_the_cap) {
  const auto b = backoff::exponential(1s, 10.0, 30s).with_jitter(resilience::jitter::none);
  BOOST_TEST(b.nominal(10'000) == duration(30s));
  BOOST_TEST(b.nominal(UINT64_MAX) == duration(30s));
  const auto uncapped = backoff::exponential(1ms, 10.0, backoff::no_cap).with_jitter(resilience::jitter::none);
  BOOST_TEST(uncapped.nominal(10'000) == backoff::no_cap);
  BOOST_TEST(uncapped.nominal(10'000) > duration::zero());
  const auto lin = backoff::linear(1s, 1h, backoff::no_cap).with_jitter(resilience::jitter::none);
  BOOST_TEST(lin.nominal(UINT64_MAX) == backoff::no_cap);
  BOOST_TEST(lin.nominal(3) == duration(1s + 2h));
}

BOOST_AUTO_TEST_CASE(linear_and_constant) {
  const auto lin = backoff::linear(100ms, 50ms, 260ms).with_jitter(resilience::jitter::none);
  BOOST_TEST(lin.nominal(1) == duration(100ms));
  BOOST_TEST(lin.nominal(2) == duration(150ms));
  BOOST_TEST(lin.nominal(4) == duration(250ms));
  BOOST_TEST(lin.nominal(5) == duration(260ms));
  BOOST_TEST(lin.nominal(1000) == duration(260ms));
  const auto c = backoff::constant(42ms).with_jitter(resilience::jitter::none);
  BOOST_TEST(c.nominal(1) == duration(42ms));
  BOOST_TEST(c.nominal(999) == duration(42ms));
  BOOST_TEST(backoff::constant(0ms).with_jitter(resilience::jitter::none).nominal(3) == duration::zero());
}

BOOST_AUTO_TEST_CASE(bad_input_names_the_field) {
  expect_rejected([] { backoff::constant(-1ms).with_jitter(resilience::jitter::none); }, "delay");
  expect_rejected([] { backoff::linear(-1ms, 1ms).with_jitter(resilience::jitter::none); }, "initial");
  expect_rejected([] { backoff::linear(1ms, -1ms).with_jitter(resilience::jitter::none); }, "step");
  expect_rejected([] { backoff::linear(10ms, 1ms, 5ms).with_jitter(resilience::jitter::none); }, "cap");
  expect_rejected([] { backoff::exponential(-1ms).with_jitter(resilience::jitter::none); }, "base");
  expect_rejected([] { backoff::exponential(0ms).with_jitter(resilience::jitter::none); }, "base");
  expect_rejected([] { backoff::exponential(1ms, 0.5).with_jitter(resilience::jitter::none); }, "factor");
  expect_rejected([] { backoff::exponential(1ms, std::nan("")).with_jitter(resilience::jitter::none); }, "factor");
  expect_rejected([] { backoff::exponential(1ms, INFINITY).with_jitter(resilience::jitter::none); }, "factor");
  expect_rejected([] { backoff::exponential(2s, 2.0, 1s).with_jitter(resilience::jitter::none); }, "cap");
}

BOOST_AUTO_TEST_CASE(decorrelated_jitter_needs_a_positive_first_delay) {
  // Both kinds grow from the first delay: from zero they would never wait.
  for (jitter j : {jitter::decorrelated_clamped, jitter::decorrelated_v2}) {
    BOOST_TEST_CONTEXT(resilience::to_string(j)) {
      expect_rejected([j] { backoff::linear(0ms, 10ms, 1s).with_jitter(j); }, "initial");
      expect_rejected([j] { backoff::linear(0ms, 0ms).with_jitter(j); }, "initial");
      expect_rejected([j] { backoff::constant(0ms).with_jitter(j); }, "delay");
      // One tick is enough to grow from, up to the cap (slowly for AWS's
      // formula: its logarithm drifts up by ln 3 - 1 a draw).
      const auto v = draws(backoff::linear(1ns, 10ms, 1s).with_jitter(j), 2000, 21);
      BOOST_TEST(std::all_of(v.begin(), v.end(), [](duration d) { return d >= 0ns && d <= 1s; }));
      BOOST_TEST((*std::max_element(v.begin(), v.end()) >= 500ms), "it grows from one tick");
    }
  }
  // The other kinds follow the nominal schedule, which grows from zero.
  for (jitter j : {jitter::none, jitter::full, jitter::equal}) {
    const auto v = draws(backoff::linear(0ms, 10ms, 1s).with_jitter(j), 200, 22);
    BOOST_TEST((*std::max_element(v.begin(), v.end()) >= 500ms), resilience::to_string(j));
  }
}

BOOST_AUTO_TEST_CASE(a_jitter_value_outside_the_enum_is_rejected) {
  expect_rejected([] { backoff::constant(1s).with_jitter(static_cast<jitter>(5)); }, "jitter");
  expect_rejected([] { backoff::constant(1s).with_jitter(static_cast<jitter>(255)); }, "jitter");
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
  const auto base = backoff::exponential(100ms, 2.0, 2s).with_jitter(resilience::jitter::none);
  for (jitter j : {jitter::full, jitter::equal, jitter::decorrelated_clamped, jitter::decorrelated_v2}) {
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
  const auto b = backoff::exponential(100ms, 2.0, 5s).with_jitter(jitter::decorrelated_clamped);
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
  const auto v = across_clients(backoff::exponential(100ms, 2.0, 1h).with_jitter(jitter::decorrelated_clamped), 1, samples);
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
  const auto v = draws(backoff::linear(10ms, 10ms, 1s).with_jitter(resilience::jitter::none), 5, 1);
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

// SplitMix64's increment: today's counter step for the per-thread source.
constexpr std::uint64_t golden_gamma = 0x9e3779b97f4a7c15ULL;

std::vector<double> stream(std::uint64_t seed, int n) {
  auto r = random_source::seeded(seed);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(r.next_unit());
  return out;
}

// Seeds that differ by one, by the SplitMix increment or its multiples, or in
// one bit. With the seed as the raw counter start, s and s + k * gamma gave
// one stream shifted by k draws.
std::vector<std::uint64_t> related(std::uint64_t s) {
  std::vector<std::uint64_t> out{s + 1, s - 1, s + golden_gamma, s - golden_gamma, s + 2 * golden_gamma,
                                 s + 3 * golden_gamma};
  for (int bit = 0; bit < 64; bit += 7) out.push_back(s ^ (std::uint64_t{1} << bit));
  return out;
}

std::vector<std::uint64_t> some_seeds() {
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = 0; s < 100; ++s) out.push_back(s);
  for (std::uint64_t s = 0; s < 20; ++s) out.push_back(UINT64_MAX - s);
  for (std::uint64_t s = 1; s <= 20; ++s) out.push_back(s * golden_gamma);
  out.push_back(0x123456789abcdef0ULL);
  return out;
}

BOOST_AUTO_TEST_CASE(related_seeds_share_no_draws_at_any_small_shift) {
  // 64 draws of one stream against 72 of the other: a shift of up to 8
  // draws either way would show as shared values (random doubles of 53 bits
  // coincide with odds of about 2^-40 here).
  int overlaps = 0;
  for (const std::uint64_t s : some_seeds()) {
    const auto a = stream(s, 72);
    const std::set<double> head(a.begin(), a.begin() + 64);
    for (const std::uint64_t t : related(s)) {
      const auto b = stream(t, 72);
      const auto shared = std::count_if(b.begin(), b.end(), [&](double x) { return head.count(x) > 0; });
      const std::set<double> b_head(b.begin(), b.begin() + 64);
      const auto shared_back = std::count_if(a.begin(), a.end(), [&](double x) { return b_head.count(x) > 0; });
      if (shared + shared_back > 0) {
        ++overlaps;
        BOOST_TEST_MESSAGE("seeds " << s << " and " << t << " share " << shared + shared_back << " draws");
      }
    }
  }
  BOOST_TEST(overlaps == 0);
}

BOOST_AUTO_TEST_CASE(related_seeds_give_statistically_independent_streams) {
  // Draws of seeded(s) paired with draws of a related seed, at lags -2..2:
  // the correlation of independent uniforms over n pairs has a standard
  // deviation of 1 / sqrt(n) (about 0.0045 here), and a 4 x 4 histogram of
  // the pairs is flat (chi-square with 15 degrees of freedom).
  constexpr int per_seed = 48;
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 0; s < 1000; ++s) seeds.push_back(s * 0x1000193ULL);
  for (int kind = 0; kind < 4; ++kind) {
    const std::uint64_t delta = std::vector<std::uint64_t>{1, golden_gamma, 2 * golden_gamma, 1ULL << 63}[kind];
    BOOST_TEST_CONTEXT("seed + " << delta) {
      for (int lag = -2; lag <= 2; ++lag) {
        double sxy = 0, sx = 0, sy = 0, sxx = 0, syy = 0;
        int n = 0;
        int cells[16] = {};
        for (const std::uint64_t s : seeds) {
          const auto a = stream(s, per_seed);
          const auto b = stream(s + delta, per_seed);
          for (int i = 2; i < per_seed - 2; ++i) {
            const double x = a[i], y = b[i + lag];
            sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y, ++n;
            ++cells[static_cast<int>(x * 4) * 4 + static_cast<int>(y * 4)];
          }
        }
        const double cov = sxy / n - (sx / n) * (sy / n);
        const double r = cov / std::sqrt((sxx / n - (sx / n) * (sx / n)) * (syy / n - (sy / n) * (sy / n)));
        BOOST_TEST(std::abs(r) < 0.03, "lag " << lag << ": correlation " << r);
        const double expected = n / 16.0;
        double chi2 = 0;
        for (const int c : cells) chi2 += (c - expected) * (c - expected) / expected;
        BOOST_TEST(chi2 < 50.0, "lag " << lag << ": chi-square " << chi2);  // p < 1e-5 by chance
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(first_draws_of_consecutive_seeds_are_uniform_and_uncorrelated) {
  // Seeds 0, 1, 2, ...: the usual way to give each of many clients its own.
  constexpr int n = 20'000;
  std::vector<double> first;
  for (int s = 0; s < n; ++s) first.push_back(random_source::seeded(static_cast<std::uint64_t>(s)).next_unit());
  int bins[20] = {};
  for (const double x : first) ++bins[static_cast<int>(x * 20)];
  double chi2 = 0;
  for (const int c : bins) chi2 += (c - n / 20.0) * (c - n / 20.0) / (n / 20.0);
  BOOST_TEST(chi2 < 60.0, "chi-square " << chi2);  // 19 degrees of freedom
  double sxy = 0;
  for (int i = 0; i + 1 < n; ++i) sxy += (first[i] - 0.5) * (first[i + 1] - 0.5);
  BOOST_TEST(std::abs(sxy / (n - 1) * 12.0) < 0.04, "neighbour correlation " << sxy / (n - 1) * 12.0);
}

BOOST_AUTO_TEST_CASE(a_seeded_source_shared_by_threads_hands_out_its_sequence_once) {
  // Lock-free and thread-safe: together, the threads draw exactly the values
  // one thread would, each once, whatever the interleaving.
  constexpr int threads = 4, per_thread = 5000;
  const auto shared = random_source::seeded(77);
  std::vector<std::vector<double>> drawn(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([copy = shared, &mine = drawn[t]] {
      for (int i = 0; i < per_thread; ++i) mine.push_back(copy.next_unit());
    });
  }
  for (auto& t : pool) t.join();
  std::vector<double> all;
  for (const auto& v : drawn) all.insert(all.end(), v.begin(), v.end());
  auto expected = stream(77, threads * per_thread);
  std::sort(all.begin(), all.end());
  std::sort(expected.begin(), expected.end());
  BOOST_TEST((all == expected));
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

BOOST_AUTO_TEST_SUITE(aws_decorrelated)

// The published formula, computed here from the same draws.
BOOST_AUTO_TEST_CASE(matches_the_published_formula_draw_for_draw) {
  const auto b = backoff::decorrelated(100ms, 2s);
  delay_sequence seq{b};
  random_source random = random_source::seeded(77);
  random_source mirror = random_source::seeded(77);
  double sleep = std::chrono::duration<double, std::nano>(100ms).count();
  const double base = sleep;
  const double cap = std::chrono::duration<double, std::nano>(2s).count();
  int at_cap = 0;
  for (int i = 0; i < 200; ++i) {
    sleep = std::floor(std::min(cap, base + mirror.next_unit() * (sleep * 3 - base)));  // whole ticks, as waited
    const auto d = seq.next(random);
    BOOST_TEST_REQUIRE(std::abs(static_cast<double>(d.actual.count()) - sleep) <= 1.0, "draw " << i);
    if (d.actual == duration(2s)) ++at_cap;
  }
  // Unlike the clamped variant, clients past the cap wait exactly the cap.
  BOOST_TEST(at_cap > 50);
}

BOOST_AUTO_TEST_CASE(differs_from_the_clamped_variant_at_the_cap) {
  const auto clamped = draws(backoff::exponential(100ms, 2.0, 2s).with_jitter(jitter::decorrelated_clamped), 200, 77);
  BOOST_TEST(std::count(clamped.begin(), clamped.end(), duration(2s)) == 0);
}

BOOST_AUTO_TEST_CASE(takes_no_other_jitter_and_rejects_bad_bounds) {
  expect_rejected([] { backoff::decorrelated(0ms, 1s); }, "base");
  expect_rejected([] { backoff::decorrelated(-1ms, 1s); }, "base");
  expect_rejected([] { backoff::decorrelated(2s, 1s); }, "cap");
  expect_rejected([] { backoff::decorrelated(1ms, 1s).with_jitter(jitter::full); }, "jitter");
  BOOST_CHECK_NO_THROW(backoff::decorrelated(1ms, 1s).with_jitter(jitter::none));
  // Huge bounds saturate instead of overflowing.
  const auto v = draws(backoff::decorrelated(duration::max() / 2, backoff::no_cap), 50, 3);
  BOOST_TEST(std::all_of(v.begin(), v.end(), [](duration d) { return d >= duration::max() / 2; }));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(custom_schedule)

BOOST_AUTO_TEST_CASE(the_function_sees_the_retry_number_and_the_previous_delay) {
  std::vector<std::pair<std::uint32_t, duration>> seen;
  const auto b = backoff::custom(
      [&](std::uint32_t retry, duration previous, const random_source&) {
        seen.emplace_back(retry, previous);
        return retry == 1 ? duration(10ms) : previous * 3;
      },
      1s).with_jitter(resilience::jitter::none);
  const auto v = draws(b, 5, 1);
  const std::vector<duration> expected{10ms, 30ms, 90ms, 270ms, 810ms};
  BOOST_TEST(v == expected, boost::test_tools::per_element());
  BOOST_REQUIRE(seen.size() == 5u);
  BOOST_TEST(seen[0].first == 1u);
  BOOST_TEST((seen[0].second == duration::zero()));
  BOOST_TEST(seen[4].first == 5u);
  BOOST_TEST((seen[4].second == duration(270ms)));
  // Capped: the sixth would be 2430 ms.
  BOOST_TEST((draws(b, 6, 1).back() == duration(1s)));
}

BOOST_AUTO_TEST_CASE(full_jitter_spreads_the_functions_delay_and_is_seen_as_previous) {
  std::vector<duration> previous;
  const auto b = backoff::custom([&](std::uint32_t, duration p, const random_source&) {
                   previous.push_back(p);
                   return duration(1s);
                 }).with_jitter(jitter::full);
  const auto v = draws(b, 50, 5);
  BOOST_TEST(std::all_of(v.begin(), v.end(), [](duration d) { return d >= 0s && d <= 1s; }));
  BOOST_TEST((std::adjacent_find(v.begin(), v.end()) == v.end()), "draws differ");
  for (std::size_t i = 1; i < previous.size(); ++i) BOOST_TEST_REQUIRE((previous[i] == v[i - 1]));
}

BOOST_AUTO_TEST_CASE(bad_functions_and_jitters_are_rejected) {
  expect_rejected([] { backoff::custom(nullptr).with_jitter(resilience::jitter::none); }, "function");
  const auto one = [](std::uint32_t, duration, const random_source&) { return duration(1s); };
  expect_rejected([&] { backoff::custom(one, -1s).with_jitter(resilience::jitter::none); }, "cap");
  expect_rejected([&] { backoff::custom(one).with_jitter(jitter::decorrelated_clamped); }, "jitter");
  expect_rejected([&] { backoff::custom(one).with_jitter(jitter::decorrelated_v2); }, "jitter");
  // A negative delay is an error where it is drawn, naming the retry.
  const auto negative = backoff::custom([](std::uint32_t r, duration, const random_source&) {
    return r < 3 ? duration(1ms) : duration(-1ms);
  }).with_jitter(resilience::jitter::none);
  delay_sequence seq{negative};
  random_source random;
  seq.next(random);
  seq.next(random);
  expect_rejected([&] { seq.next(random); }, "retry 3");
}

BOOST_AUTO_TEST_CASE(copies_share_the_function_and_compare_equal) {
  const auto b = backoff::custom([](std::uint32_t, duration, const random_source&) { return duration(1s); }).with_jitter(resilience::jitter::none);
  const auto copy = b;
  BOOST_TEST((copy == b));
  const auto other = backoff::custom([](std::uint32_t, duration, const random_source&) { return duration(1s); }).with_jitter(resilience::jitter::none);
  BOOST_TEST(!(other == b));
}

BOOST_AUTO_TEST_SUITE_END()

// -- backoff: each factory, then with_jitter of each kind -----------------

BOOST_AUTO_TEST_CASE(backoff_over_extreme_values) {
  struct row {
    const char* what;
    std::function<backoff()> make;
    rejects verdict;
  };
  const row rows[] = {
      {"constant(0)", [] { return backoff::constant(0s).with_jitter(resilience::jitter::none); }, accepted},
      {"constant(1 tick)", [] { return backoff::constant(tick).with_jitter(resilience::jitter::none); }, accepted},
      {"constant(max)", [] { return backoff::constant(dmax).with_jitter(resilience::jitter::none); }, accepted},
      {"constant(-1 tick)", [] { return backoff::constant(-tick).with_jitter(resilience::jitter::none); }, "delay"},
      {"constant(min)", [] { return backoff::constant(dmin).with_jitter(resilience::jitter::none); }, "delay"},

      {"linear(0, 0)", [] { return backoff::linear(0s, 0s).with_jitter(resilience::jitter::none); }, accepted},
      {"linear(0, 1 tick)", [] { return backoff::linear(0s, tick).with_jitter(resilience::jitter::none); }, accepted},
      {"linear(0, max)", [] { return backoff::linear(0s, dmax).with_jitter(resilience::jitter::none); }, accepted},
      {"linear(0, 1 tick, 0)", [] { return backoff::linear(0s, tick, 0s).with_jitter(resilience::jitter::none); }, accepted},
      {"linear(1 tick, 1 tick, 1 tick)", [] { return backoff::linear(tick, tick, tick).with_jitter(resilience::jitter::none); }, accepted},
      {"linear(1 tick, max, max)", [] { return backoff::linear(tick, dmax, dmax).with_jitter(resilience::jitter::none); }, accepted},
      {"linear(max, 0)", [] { return backoff::linear(dmax, 0s).with_jitter(resilience::jitter::none); }, accepted},
      {"linear(max, max)", [] { return backoff::linear(dmax, dmax).with_jitter(resilience::jitter::none); }, accepted},
      {"linear(-1 tick, 1s)", [] { return backoff::linear(-tick, 1s).with_jitter(resilience::jitter::none); }, "initial"},
      {"linear(min, 1s)", [] { return backoff::linear(dmin, 1s).with_jitter(resilience::jitter::none); }, "initial"},
      {"linear(0, -1 tick)", [] { return backoff::linear(0s, -tick).with_jitter(resilience::jitter::none); }, "step"},
      {"linear(0, min)", [] { return backoff::linear(0s, dmin).with_jitter(resilience::jitter::none); }, "step"},
      {"linear(1s, 1s, 1s - 1 tick)", [] { return backoff::linear(1s, 1s, 1s - tick).with_jitter(resilience::jitter::none); }, "cap"},
      {"linear(0, 1s, -1 tick)", [] { return backoff::linear(0s, 1s, -tick).with_jitter(resilience::jitter::none); }, "cap"},
      {"linear(0, 1s, min)", [] { return backoff::linear(0s, 1s, dmin).with_jitter(resilience::jitter::none); }, "cap"},

      {"exponential(0)", [] { return backoff::exponential(0s).with_jitter(resilience::jitter::none); }, "base"},
      {"exponential(-1 tick)", [] { return backoff::exponential(-tick).with_jitter(resilience::jitter::none); }, "base"},
      {"exponential(min)", [] { return backoff::exponential(dmin).with_jitter(resilience::jitter::none); }, "base"},
      {"exponential(1 tick, 2, no_cap)", [] { return backoff::exponential(tick, 2.0, backoff::no_cap).with_jitter(resilience::jitter::none); }, accepted},
      {"exponential(1 tick, 2, 1 tick)", [] { return backoff::exponential(tick, 2.0, tick).with_jitter(resilience::jitter::none); }, accepted},
      {"exponential(max, 2, max)", [] { return backoff::exponential(dmax, 2.0, dmax).with_jitter(resilience::jitter::none); }, accepted},
      {"exponential(1s, 1)", [] { return backoff::exponential(1s, 1.0).with_jitter(resilience::jitter::none); }, accepted},
      {"exponential(1s, 1 + epsilon)",
       [] { return backoff::exponential(1s, 1.0 + std::numeric_limits<double>::epsilon()).with_jitter(resilience::jitter::none); }, accepted},
      {"exponential(1s, 1e300, no_cap)", [] { return backoff::exponential(1s, 1e300, backoff::no_cap).with_jitter(resilience::jitter::none); }, accepted},
      {"exponential(1 tick, double max, no_cap)", [] { return backoff::exponential(tick, dbl_max, backoff::no_cap).with_jitter(resilience::jitter::none); },
       accepted},
      {"exponential(1s, 2, 1s)", [] { return backoff::exponential(1s, 2.0, 1s).with_jitter(resilience::jitter::none); }, accepted},
      {"exponential(1s, 0)", [] { return backoff::exponential(1s, 0.0).with_jitter(resilience::jitter::none); }, "factor"},
      {"exponential(1s, 0.5)", [] { return backoff::exponential(1s, 0.5).with_jitter(resilience::jitter::none); }, "factor"},
      {"exponential(1s, 1 - epsilon)",
       [] { return backoff::exponential(1s, 1.0 - std::numeric_limits<double>::epsilon()).with_jitter(resilience::jitter::none); }, "factor"},
      {"exponential(1s, -2)", [] { return backoff::exponential(1s, -2.0).with_jitter(resilience::jitter::none); }, "factor"},
      {"exponential(1s, NaN)", [] { return backoff::exponential(1s, not_a_number).with_jitter(resilience::jitter::none); }, "factor"},
      {"exponential(1s, inf)", [] { return backoff::exponential(1s, inf).with_jitter(resilience::jitter::none); }, "factor"},
      {"exponential(1s, -inf)", [] { return backoff::exponential(1s, -inf).with_jitter(resilience::jitter::none); }, "factor"},
      {"exponential(1s, 2, 0)", [] { return backoff::exponential(1s, 2.0, 0s).with_jitter(resilience::jitter::none); }, "cap"},
      {"exponential(1s, 2, -1 tick)", [] { return backoff::exponential(1s, 2.0, -tick).with_jitter(resilience::jitter::none); }, "cap"},
      {"exponential(1s, 2, min)", [] { return backoff::exponential(1s, 2.0, dmin).with_jitter(resilience::jitter::none); }, "cap"},

      {"with_jitter(5)", [] { return backoff::constant(1s).with_jitter(static_cast<jitter>(5)); }, "jitter"},
      {"with_jitter(255)", [] { return backoff::exponential(1s).with_jitter(static_cast<jitter>(255)); }, "jitter"},
  };
  const std::uint64_t retries[] = {0, 1, 2, 3, 64, 1000, UINT32_MAX, std::uint64_t{UINT32_MAX} + 1, UINT64_MAX};
  for (const row& r : rows) {
    const auto made = enter(r.what, r.make, r.verdict);
    if (!made) continue;
    const backoff schedule = *made;
    // The nominal schedule: never past the cap, never shrinking, and at the
    // cap at the end of time if it grows at all.
    duration previous = duration::zero();
    for (const std::uint64_t n : retries) {
      const duration d = schedule.nominal(n);
      BOOST_TEST((d >= previous && d <= schedule.cap()), r.what << ": nominal(" << n << ")");
      previous = d;
    }
    const bool grows = schedule.step() > duration::zero() || schedule.factor() > 1.0;
    if (grows) BOOST_TEST((schedule.nominal(UINT64_MAX) == schedule.cap()), r.what << ": saturates at the cap");

    for (const jitter j : {jitter::none, jitter::full, jitter::equal, jitter::decorrelated_clamped, jitter::decorrelated_v2}) {
      const std::string what = std::string(r.what) + ".with_jitter(" + resilience::to_string(j) + ")";
      const bool decorrelated = j == jitter::decorrelated_clamped || j == jitter::decorrelated_v2;
      const rejects verdict = decorrelated && schedule.first() == duration::zero()
                                  ? rejects(schedule.kind() == backoff::shape::constant ? "delay" : "initial")
                                  : accepted;
      const auto jittered = enter(what, [&] { return schedule.with_jitter(j); }, verdict);
      if (!jittered) continue;

      // 300 delays: each within what its kind allows.
      resilience::delay_sequence seq{*jittered};
      const auto random = resilience::random_source::seeded(1);
      for (std::uint64_t n = 1; n <= 300; ++n) {
        const resilience::delay d = seq.next(random);
        BOOST_TEST_REQUIRE((d.nominal == schedule.nominal(n)), what << ": retry " << n);
        bool ok = d.actual >= duration::zero() && d.actual <= schedule.cap();
        if (j == jitter::none) ok = ok && d.actual == d.nominal;
        if (j == jitter::full) ok = ok && d.actual <= d.nominal;
        if (j == jitter::equal) ok = ok && d.actual >= d.nominal / 2 - tick && d.actual <= d.nominal;
        if (j == jitter::decorrelated_clamped) ok = ok && d.actual >= schedule.first();
        BOOST_TEST_REQUIRE(ok, what << ": retry " << n << ": " << d.actual.count() << " ticks");
      }

      // Four attempts on virtual time: they end, and each wait is the delay
      // the policy reported, saturating at the end of time.
      virtual_calls vt;
      std::vector<duration> waits;
      const auto policy = retry_policy{}
                              .max_attempts(4)
                              .backoff(*jittered)
                              .random(resilience::random_source::seeded(2))
                              .clock(vt.clock)
                              .on_retry([&](const auto& e) { waits.push_back(e.delay); });
      const auto done = vt.run(resilience::co_retry(vt.failing(100), policy));
      BOOST_TEST_REQUIRE(done.times == 1, what);
      BOOST_TEST_REQUIRE((vt.calls.size() >= 1u && vt.calls.size() <= 4u), what);
      BOOST_TEST_REQUIRE(waits.size() == vt.calls.size() - 1, what);
      // Fewer calls only when the next wait would have ended at the end of
      // time (no jitter lengthens a delay past its nominal one).
      if (vt.calls.size() < 4u)
        BOOST_TEST((add(vt.calls.back(), schedule.nominal(vt.calls.size())) == time_point::max()), what);
      for (std::size_t i = 0; i < waits.size(); ++i) {
        BOOST_TEST((vt.calls[i + 1] == add(vt.calls[i], waits[i])), what << ": wait " << i);
      }
    }
  }
}
