#include "common/args.h"

#include <stdexcept>

namespace inferlab {

Args::Args(const std::vector<std::string>& argv, std::set<std::string> flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      stray_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    if (const auto eq = name.find('='); eq != std::string::npos) {
      values_[name.substr(0, eq)] = name.substr(eq + 1);
    } else if (flags.count(name)) {
      values_[name] = std::string(1, '1');  // (not = "1": GCC 12 warns falsely, -Wrestrict)
    } else if (i + 1 >= argv.size() || (argv[i + 1].rfind("--", 0) == 0 && argv[i + 1].size() > 2)) {
      missing_value_.insert(name);  // reported by check_known: as unknown, or as needing a value
    } else {
      values_[name] = argv[++i];
    }
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::string Args::required(const std::string& name) const {
  if (auto value = get(name)) return *value;
  throw std::invalid_argument("option --" + name + ": is required");
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

std::optional<int64_t> Args::integer(const std::string& name) const {
  const std::optional<std::string> text = get(name);
  if (!text) return std::nullopt;
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text->size()) throw std::invalid_argument(name + " = " + *text + ": must be an integer");
  return static_cast<int64_t>(value);
}

std::optional<double> Args::real(const std::string& name) const {
  const std::optional<std::string> text = get(name);
  if (!text) return std::nullopt;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text->size()) throw std::invalid_argument(name + " = " + *text + ": must be a number");
  return value;
}

void Args::check_known(const std::set<std::string>& known) const {
  if (!stray_.empty()) throw std::invalid_argument("argument '" + stray_.front() + "': expected an --option");
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "--" : ", --") + k;
  list += std::string(list.empty() ? "" : ", ") + "--help";
  const auto check = [&](const std::string& name) {
    if (!known.count(name) && name != "help") {
      throw std::invalid_argument("option --" + name + ": unknown (known: " + list + ")");
    }
  };
  for (const auto& [name, value] : values_) check(name);
  for (const auto& name : missing_value_) check(name);
  if (!missing_value_.empty()) throw std::invalid_argument("option --" + *missing_value_.begin() + ": needs a value");
}

}  // namespace inferlab
