// libFuzzer target: a configuration document must never crash, overflow
// (UBSan), hang or read out of bounds (ASan); a refusal is a config::error
// and nothing else; what is accepted writes a document that reads back to
// the same text, and the same for a duration.
#include <resilience/config.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto s = resilience::config::parse(text);
    const std::string written = s->document_text();
    if (resilience::config::parse(written)->document_text() != written) std::abort();
  } catch (const resilience::config::error& e) {
    if (std::string_view(e.what()).empty()) std::abort();
  }
  try {
    const auto d = resilience::config::parse_duration(text, true);
    if (resilience::config::parse_duration(resilience::config::format_duration(d), true) != d) std::abort();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
