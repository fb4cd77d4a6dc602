#pragma once
/// @file args.h
/// A tiny command-line reader for the inferlab subcommands: --flag, --key value, --key=value.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace inferlab::cli {

/// Parsed options of one subcommand.
class Args {
 public:
  /// Parses @p argv after the subcommand. @p flags are the options that take no value; every
  /// other --option takes one. Unknown options are rejected by check_known().
  Args(const std::vector<std::string>& argv, std::set<std::string> flags);
  /// Whether --@p name was given.
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  /// The value of --@p name, or nullopt.
  std::optional<std::string> get(const std::string& name) const;
  /// The value of --@p name; throws std::invalid_argument naming it when absent.
  std::string required(const std::string& name) const;
  /// The value of --@p name, or @p fallback.
  std::string get_or(const std::string& name, const std::string& fallback) const;
  /// The integer value of --@p name, or nullopt when absent; throws std::invalid_argument
  /// ("name = text: must be an integer") when it is not one.
  std::optional<int64_t> integer(const std::string& name) const;
  /// The number value of --@p name, or nullopt when absent; throws std::invalid_argument
  /// ("name = text: must be a number") when it is not one.
  std::optional<double> real(const std::string& name) const;
  /// Throws std::invalid_argument for any option not in @p known.
  void check_known(const std::set<std::string>& known) const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace inferlab::cli
