// The scales the demos' SVG charts share: an axis' top and its tick step,
// round numbers a reader takes in at a glance.
#pragma once

#include <algorithm>
#include <cmath>

// The axis' top: 1, 2, 2.5, 4 or 5 times a power of ten, five ticks of it.
inline double nice_top(double v) {
  const double step = std::max(v, 1.0) / 5;
  const double power = std::pow(10.0, std::floor(std::log10(step)));
  for (double m : {1.0, 2.0, 2.5, 4.0, 5.0, 10.0}) {
    if (m * power >= step) return 5 * m * power;
  }
  return 50 * power;
}

// A tick step of 1, 2 or 5 times a power of ten giving at most `ticks` steps.
inline double nice_step(double span, int ticks) {
  const double power = std::pow(10.0, std::floor(std::log10(std::max(span, 1e-9) / ticks)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (span / (m * power) <= ticks) return m * power;
  }
  return 10 * power;
}
