#include "tools/cli/sse.h"

namespace inferlab::cli {

std::string sse_event(const Json& value) {
  return "data: " + value.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace inferlab::cli
