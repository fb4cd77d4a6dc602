#pragma once
/// @file command_line.h
/// How `inferlab generate`, `serve` and `chat` read their command lines: each command declares
/// its options once, in a CLI::App (CLI11) — name, value, default, help text, the variable or
/// config field it sets — from the shared tables (engine_options.h, sampling_options.h,
/// ranks.h) and its own; parse_command_line() reads the line into them and usage() writes the
/// command's --help from the same table.

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace inferlab::cli {

/// An App for `inferlab @p command`: @p description is the paragraph --help prints under the usage
/// line, @p synopsis what the usage line shows after the command's name (the options the command
/// needs, e.g. "--model M"). An option given twice keeps its last value.
std::unique_ptr<CLI::App> command_app(const std::string& command, const std::string& synopsis,
                                      const std::string& description);

/// The usage of @p app: "usage: inferlab COMMAND SYNOPSIS [options]", its description, then each
/// option with its value's name, its help text and its default, grouped by the option's group.
std::string usage(const CLI::App& app);

/// Reads @p argv (the arguments after the command's name) into @p app's options. Returns false,
/// having printed usage() on stdout, when `--help` or `-h` is anywhere on the line (whatever else
/// is there). Throws std::invalid_argument for the first problem: an option not in the table
/// ("option --x: unknown (known: --a, --b, …, --help)"), an argument that is not an option
/// ("argument 'x': expected an --option"), an option without its value ("option --x: needs a
/// value"; the next --option is not taken as one), or a value that does not convert or pass the
/// option's check (CLI11's message, naming the option).
bool parse_command_line(CLI::App& app, const std::vector<std::string>& argv);

/// Whether --@p name was given on the line @p app parsed.
bool given(const CLI::App& app, const std::string& name);

/// A check for integer options: the value is an integer in [@p min, @p max] ("--x: must be in
/// [min, max], not V", or "must be ≥ min" without a @p max; "must be an integer, not V").
CLI::Validator integer_in(long long min, long long max = std::numeric_limits<long long>::max());

}  // namespace inferlab::cli
