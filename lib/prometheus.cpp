#include <resilience/prometheus.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace resilience {

namespace {

void append_escaped(std::string& out, std::string_view value, bool quotes) {
  for (const char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '"':
        if (quotes) {
          out += "\\\"";
          break;
        }
        [[fallthrough]];
      default: out += c;
    }
  }
}

// Exact decimal seconds from nanoseconds, without trailing zeros: no
// floating point, so the text does not depend on the platform's printf.
void append_seconds(std::string& out, duration d) {
  std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  out += std::to_string(ns / 1'000'000'000);
  std::int64_t fraction = ns % 1'000'000'000;
  if (fraction == 0) return;
  std::string digits = std::to_string(fraction);
  digits.insert(0, 9 - digits.size(), '0');
  digits.erase(digits.find_last_not_of('0') + 1);
  out += '.';
  out += digits;
}

// `{a="x",b="y"` with the extra label (le) if any, then `}`.
void append_labels(std::string& out, const metric_sample& s, std::string_view extra_name = {},
                   std::string_view extra_value = {}) {
  if (s.labels.empty() && extra_name.empty()) return;  // no braces for a series without labels
  out += '{';
  bool first = true;
  for (const auto& [name, value] : s.labels) {
    if (!first) out += ',';
    first = false;
    out += prometheus_label_name(name);
    out += "=\"";
    append_escaped(out, value, true);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

}  // namespace

std::string prometheus_label_name(std::string_view label) {
  std::string name(label);
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

std::string prometheus_name(std::string_view name, metric_kind kind, std::string_view unit) {
  std::string written = prometheus_label_name(name);
  if (unit == "s") written += "_seconds";
  if (kind == metric_kind::counter) written += "_total";
  return written;
}

void write_prometheus(const metrics_snapshot& snapshot, std::string& out) {
  for (const metric_family& f : snapshot.families) {
    const std::string name = prometheus_name(f.name, f.kind, f.unit);
    out += "# HELP " + name + ' ';
    append_escaped(out, f.help, false);
    out += "\n# TYPE " + name +
           (f.kind == metric_kind::counter ? " counter\n" : f.kind == metric_kind::gauge ? " gauge\n" : " histogram\n");
    const std::vector<duration>& bounds = f.bounds.empty() ? snapshot.bounds : f.bounds;
    for (const metric_sample& s : f.samples) {
      if (f.kind != metric_kind::histogram) {
        out += name;
        append_labels(out, s);
        out += ' ' + (f.kind == metric_kind::counter ? std::to_string(s.count) : std::to_string(s.gauge)) + '\n';
        continue;
      }
      for (std::size_t b = 0; b < s.cumulative.size(); ++b) {
        std::string le = "+Inf";
        if (b < bounds.size()) {
          le.clear();
          append_seconds(le, bounds[b]);
        }
        out += name + "_bucket";
        append_labels(out, s, "le", le);
        out += ' ' + std::to_string(s.cumulative[b]) + '\n';
      }
      out += name + "_sum";
      append_labels(out, s);
      out += ' ';
      append_seconds(out, s.sum);
      out += '\n' + name + "_count";
      append_labels(out, s);
      out += ' ' + std::to_string(s.count) + '\n';
    }
  }
}

std::string prometheus_text(const metrics& registry) {
  std::string out;
  write_prometheus(registry.snapshot(), out);
  return out;
}

}  // namespace resilience
