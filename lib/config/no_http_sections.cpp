// Built without the HTTP library: no http_client, http_server or upstream section (a
// document naming one is refused as an unknown section).
#include "shared_objects.hpp"

namespace resilience::config {
namespace detail {

key_list http_section_names() { return {}; }
void add_http_keys(std::vector<std::string>&) {}
void read_http_sections(const boost::json::object&, const document_reader&, const shared_objects*, shared_objects&) {}
void add_http_slots(const shared_objects&, const slot_adder&) {}
void add_http_status(const shared_objects&, boost::json::object&) {}

}  // namespace detail

http::client& snapshot::http_client(std::string_view name) const {
  throw std::out_of_range("config: no http_client named \"" + std::string(name) + "\" (built without resilience::http)");
}
const http::server_options& snapshot::http_server(std::string_view name) const {
  throw std::out_of_range("config: no http_server named \"" + std::string(name) + "\" (built without resilience::http)");
}
http::upstream& snapshot::upstream(std::string_view name) const {
  throw std::out_of_range("config: no upstream named \"" + std::string(name) + "\" (built without resilience::http)");
}

}  // namespace resilience::config
