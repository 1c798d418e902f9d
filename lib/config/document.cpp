// A configuration document read into a snapshot: JSON (Boost.JSON), each
// section's keys from one table per options type (config_fields.hpp), every
// value through the C++ setter that checks it, every error placed at its line
// and column.
#include "config_fields.hpp"

#include <boost/json/stream_parser.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>
#include <cmath>

namespace resilience::config {

error::error(std::string path, std::uint32_t line, std::uint32_t column, std::string reason)
    : std::invalid_argument(path.empty() ? reason
                                         : line ? path + " at " + std::to_string(line) + ":" + std::to_string(column) +
                                                      ": " + reason
                                                : path + ": " + reason),
      path_(std::move(path)),
      line_(line),
      column_(column),
      reason_(std::move(reason)) {}

namespace {

struct unit {
  std::string_view name;
  std::int64_t nanoseconds;
};
// Longest first: "ms" before "m", "ns"/"us" before "s".
constexpr unit units[] = {{"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000},
                          {"m", 60'000'000'000}, {"h", 3'600'000'000'000}};

}  // namespace

duration parse_duration(std::string_view text, bool none_allowed) {
  static constexpr const char* shape = "must be a duration such as \"250ms\", \"2s\", \"1.5m\" (units ns, us, ms, s, m, h)";
  if (text == "none") {
    if (none_allowed) return duration::max();
    throw std::invalid_argument("\"none\" is not allowed here");
  }
  std::size_t digits = 0;
  while (digits < text.size() && ((text[digits] >= '0' && text[digits] <= '9') || text[digits] == '.')) ++digits;
  const std::string_view number = text.substr(0, digits), suffix = text.substr(digits);
  const unit* u = nullptr;
  for (const auto& candidate : units)
    if (suffix == candidate.name) u = &candidate;
  if (number.empty() || !u || number.front() == '.' || number.back() == '.') throw std::invalid_argument(shape);
  const std::size_t dot = number.find('.');
  std::int64_t whole = 0;
  const std::string_view whole_text = number.substr(0, dot);
  auto [end, ec] = std::from_chars(whole_text.data(), whole_text.data() + whole_text.size(), whole);
  if (ec != std::errc{} || end != whole_text.data() + whole_text.size()) throw std::invalid_argument(shape);
  constexpr std::int64_t limit = std::numeric_limits<duration::rep>::max();
  if (whole > (limit - 1) / u->nanoseconds) throw std::invalid_argument("is too long (at most about 292 years)");
  std::int64_t ns = whole * u->nanoseconds;
  if (dot != std::string_view::npos) {
    const std::string_view fraction = number.substr(dot + 1);
    if (fraction.find('.') != std::string_view::npos) throw std::invalid_argument(shape);
    std::int64_t scale = u->nanoseconds;
    for (const char c : fraction) {
      if (scale % 10 != 0) throw std::invalid_argument("is finer than a nanosecond");
      scale /= 10;
      ns += (c - '0') * scale;
    }
  }
  static_assert(std::is_same_v<duration::period, std::nano>);
  return duration(ns);
}

std::string format_duration(duration d) {
  if (d == duration::max()) return "none";
  const std::int64_t ns = d.count();
  if (ns == 0) return "0s";
  for (auto u = std::rbegin(units); u != std::rend(units); ++u)
    if (ns != 0 && ns % u->nanoseconds == 0) return std::to_string(ns / u->nanoseconds) + std::string(u->name);
  return std::to_string(ns) + "ns";
}

namespace detail {

// Where each value of a valid document starts, by path: the parser gives
// values, not positions. Also finds duplicate keys, which Boost.JSON would
// silently resolve.
class position_scanner {
 public:
  position_scanner(std::string_view text, std::map<std::string, std::size_t, std::less<>>& out) : t_(text), out_(out) {}

  // Empty if the document has no duplicate key; else the duplicate's path.
  std::string scan() {
    skip_space();
    value("");
    return duplicate_;
  }

 private:
  void skip_space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t')) ++i_;
  }
  std::string string() {  // at the opening quote; the text, escapes kept (a key with escapes is rare)
    std::string s;
    ++i_;
    while (i_ < t_.size() && t_[i_] != '"') {
      if (t_[i_] == '\\') s += t_[i_++];
      s += t_[i_++];
    }
    ++i_;
    return s;
  }
  void value(const std::string& path) {
    out_.emplace(path, i_);
    if (i_ >= t_.size()) return;
    const char c = t_[i_];
    if (c == '{') {
      ++i_;
      skip_space();
      std::map<std::string, bool, std::less<>> seen;
      while (i_ < t_.size() && t_[i_] != '}') {
        const std::size_t key_at = i_;
        const std::string key = string();
        const std::string child = path.empty() ? key : path + "." + key;
        if (!seen.emplace(key, true).second && duplicate_.empty()) {
          duplicate_ = child;
          duplicate_at_ = key_at;
        }
        skip_space();
        ++i_;  // ':'
        skip_space();
        if (out_.count(child)) {  // the duplicate: its first place stays
          std::map<std::string, std::size_t, std::less<>> ignored;
          position_scanner inner(t_, ignored);
          inner.i_ = i_;
          inner.value(child);
          i_ = inner.i_;
        } else {
          value(child);
        }
        skip_space();
        if (i_ < t_.size() && t_[i_] == ',') ++i_;
        skip_space();
      }
      ++i_;
    } else if (c == '[') {
      ++i_;
      skip_space();
      for (std::size_t n = 0; i_ < t_.size() && t_[i_] != ']'; ++n) {
        value(path + "[" + std::to_string(n) + "]");
        skip_space();
        if (i_ < t_.size() && t_[i_] == ',') ++i_;
        skip_space();
      }
      ++i_;
    } else if (c == '"') {
      string();
    } else {
      while (i_ < t_.size() && t_[i_] != ',' && t_[i_] != '}' && t_[i_] != ']' && t_[i_] != ' ' && t_[i_] != '\n' &&
             t_[i_] != '\r' && t_[i_] != '\t')
        ++i_;
    }
  }

 public:
  std::size_t duplicate_at_ = 0;

 private:
  std::string_view t_;
  std::map<std::string, std::size_t, std::less<>>& out_;
  std::size_t i_ = 0;
  std::string duplicate_;
};

std::pair<std::uint32_t, std::uint32_t> document_reader::line_column(std::size_t offset) const {
  std::uint32_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

void document_reader::fail(const std::string& path, std::string reason) const {
  // The nearest enclosing value that has a place (a missing key's object).
  std::string at = path;
  for (;;) {
    if (const auto p = positions.find(at); p != positions.end()) {
      const auto [line, column] = line_column(p->second);
      throw error(path, line, column, std::move(reason));
    }
    const std::size_t cut = at.find_last_of(".[");
    if (cut == std::string::npos) break;
    at.resize(cut);
  }
  throw error(path, 0, 0, std::move(reason));
}

std::string_view document_reader::string_at(const boost::json::value& v, const std::string& path) const {
  if (!v.is_string()) fail(path, "must be a string");
  return v.get_string();
}

bool document_reader::bool_at(const boost::json::value& v, const std::string& path) const {
  if (!v.is_bool()) fail(path, "must be true or false");
  return v.get_bool();
}

double document_reader::number_at(const boost::json::value& v, const std::string& path) const {
  if (!v.is_number()) fail(path, "must be a number");
  return v.to_number<double>();
}

std::uint64_t document_reader::unsigned_at(const boost::json::value& v, const std::string& path,
                                           std::uint64_t max) const {
  std::uint64_t n = 0;
  if (v.is_uint64()) {
    n = v.get_uint64();
  } else if (v.is_int64()) {
    if (v.get_int64() < 0) fail(path, "must not be negative");
    n = static_cast<std::uint64_t>(v.get_int64());
  } else if (v.is_double()) {
    const double d = v.get_double();
    if (d != std::floor(d) || d < 0 || d > 1.8e19) fail(path, "must be a whole number");
    n = static_cast<std::uint64_t>(d);
  } else {
    fail(path, "must be a whole number");
  }
  if (n > max) fail(path, "must be at most " + std::to_string(max));
  return n;
}

duration document_reader::duration_at(const boost::json::value& v, const std::string& path) const {
  if (!v.is_string()) fail(path, "must be a string such as \"250ms\" or \"2s\"");
  try {
    return parse_duration(std::string_view(v.get_string()), true);
  } catch (const std::invalid_argument& e) {
    fail(path, e.what());
  }
}

const boost::json::object& document_reader::object_at(const boost::json::value& v, const std::string& path) const {
  if (!v.is_object()) fail(path, "must be an object");
  return v.get_object();
}

void document_reader::only_keys(const boost::json::object& object, const std::string& path,
                                std::span<const std::string_view> known) const {
  for (const auto& [key, value] : object) {
    bool found = false;
    for (const auto k : known) found = found || k == std::string_view(key);
    if (found) continue;
    std::string list;
    for (const auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    fail(path + "." + std::string(key), "unknown key (known: " + list + ")");
  }
}

std::string setter_reason(const std::exception& e, std::string_view path) {
  // "bulkhead_options::max_concurrent: must be ..." -> "must be ...", and
  // "retry_policy: max_attempts must be ..." under the path ...max_attempts
  // -> "must be ...": the path names the option already.
  std::string_view what = e.what();
  const std::size_t colon = what.find(": ");
  if (colon != std::string_view::npos && what.substr(0, colon).find(' ') == std::string_view::npos) {
    what.remove_prefix(colon + 2);
    const std::size_t dot = path.find_last_of('.');
    const std::string_view last = dot == std::string_view::npos ? path : path.substr(dot + 1);
    if (what.starts_with(last) && what.substr(last.size()).starts_with(" must")) what.remove_prefix(last.size() + 1);
  }
  return std::string(what);
}

std::size_t read_document(std::string_view text, boost::json::value& out, document_reader& reader) {
  boost::json::stream_parser parser;
  boost::system::error_code ec;
  const std::size_t used = parser.write(text.data(), text.size(), ec);
  if (!ec) parser.finish(ec);
  if (ec) {
    const auto [line, column] = reader.line_column(ec == boost::json::error::incomplete ? text.size() : used);
    throw error("(document)", line, column, "not JSON: " + ec.message());
  }
  out = parser.release();
  position_scanner scanner(text, reader.positions);
  if (const std::string duplicate = scanner.scan(); !duplicate.empty()) {
    const auto [line, column] = reader.line_column(scanner.duplicate_at_);
    throw error(duplicate, line, column, "given twice");
  }
  if (!out.is_object()) reader.fail("", "a document must be an object");
  return used;
}

}  // namespace detail
}  // namespace resilience::config
