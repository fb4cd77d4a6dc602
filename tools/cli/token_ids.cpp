#include "tools/cli/token_ids.h"

#include <climits>
#include <sstream>
#include <stdexcept>

#include "common/check.h"

namespace inferlab::cli {

std::vector<int32_t> token_id_list(const std::string& name, const std::string& text) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream in(spaced);
  std::vector<int32_t> out;
  std::string item;
  while (in >> item) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used == item.size() && v >= 0 && v <= INT32_MAX, "--" + name, item, "must be a list of token ids");
    out.push_back(int32_t(v));
  }
  return out;
}

}  // namespace inferlab::cli
