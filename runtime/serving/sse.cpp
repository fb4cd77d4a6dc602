#include "runtime/serving/sse.h"

namespace inferlab::serving {

std::string sse_event(const Json& value) {
  return "data: " + value.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace inferlab::serving
