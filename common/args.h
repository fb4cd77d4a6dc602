#pragma once
/// @file args.h
/// The one command-line reader: the inferlab subcommands (tools/cli) and the chapter programs
/// (chapter 07's benchmark) read their options with it: --flag, --key value, --key=value.
/// `--help` and `-h` are always flags (help() reports them), so every subcommand can answer them
/// with its usage before it checks anything else.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace inferlab {

/// Parsed options of one subcommand.
class Args {
 public:
  /// Parses @p argv after the subcommand. @p flags are the options that take no value; every
  /// other --option takes the next argument as its value unless that argument is itself an
  /// --option. Nothing is rejected here: a stray argument, an unknown option and an option missing
  /// its value are reported by check_known() (an unknown option as unknown, whether or not a value
  /// follows it), so that `--help` works whatever else is on the line.
  Args(const std::vector<std::string>& argv, std::set<std::string> flags);
  /// Whether `--help` or `-h` was given.
  bool help() const { return help_; }
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
  /// Throws std::invalid_argument for the first problem of the command line: an argument that is
  /// not an --option ("argument 'x': expected an --option"), an option not in @p known
  /// ("option --x: unknown (known: --a, --b, …)"; --help is always known), or a known option
  /// given without its value ("option --x: needs a value").
  void check_known(const std::set<std::string>& known) const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> stray_;       // arguments that are not --options
  std::set<std::string> missing_value_;  // options that take a value but were given none
  bool help_ = false;
};

}  // namespace inferlab
