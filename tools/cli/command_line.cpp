// The command lines of generate, serve and chat: CLI11 reads them, the errors are worded as the
// other commands' (common/args.h) and --help is written from the option table (command_line.h).
#include "tools/cli/command_line.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace inferlab::cli {
namespace {

constexpr size_t kHelpColumn = 26;  // where an option's help text starts
constexpr size_t kWidth = 110;      // the longest line of the usage

// The value an option takes as --help shows it: its type_name() ("N", "FILE", "cpu|sim|cuda"),
// without what CLI11 appends for its checks, or nothing for a flag.
std::string value_name(const CLI::Option& option) {
  if (option.get_expected_min() == 0) return "";
  const std::string type = option.get_type_name();
  return type.substr(0, type.find(':'));
}

// The columns @p text takes on a terminal: its UTF-8 characters ("≥", "×", "…" are one each).
size_t columns(const std::string& text) {
  return size_t(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// @p text wrapped at kWidth, its later lines indented to @p indent; @p used columns are taken.
std::string wrap(const std::string& text, size_t used, size_t indent = kHelpColumn) {
  std::istringstream words(text);
  std::string out, word;
  size_t column = used;
  bool line_start = true;
  while (words >> word) {
    if (!line_start && column + 1 + columns(word) > kWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
      line_start = true;
    }
    if (!line_start) {
      out += ' ';
      ++column;
    }
    out += word;
    column += columns(word);
    line_start = false;
  }
  return out;
}

std::string option_line(const CLI::Option& option) {
  std::string head = "  " + option.get_name();
  if (const std::string value = value_name(option); !value.empty()) head += " " + value;
  std::string help = option.get_description();
  if (!option.get_default_str().empty()) help += " (default " + option.get_default_str() + ")";
  const size_t width = columns(head);
  head += width + 2 <= kHelpColumn ? std::string(kHelpColumn - width, ' ') : "  ";
  return head + wrap(help, columns(head)) + "\n";
}

}  // namespace

std::unique_ptr<CLI::App> command_app(const std::string& command, const std::string& synopsis,
                                      const std::string& description) {
  auto app = std::make_unique<CLI::App>(description, command);
  app->set_help_flag();  // --help and -h: parse_command_line() looks for them first
  app->allow_extras();   // reported by parse_command_line() in the house's words
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app->footer(synopsis);  // the usage line's (the footer is otherwise unused)
  return app;
}

std::string usage(const CLI::App& app) {
  std::string out = "usage: inferlab " + app.get_name();
  if (!app.get_footer().empty()) out += " " + app.get_footer();
  out += " [options]\n\n";
  std::istringstream description(app.get_description());  // lines longer than kWidth wrapped, others kept
  for (std::string line; std::getline(description, line);)
    out += (columns(line) > kWidth ? wrap(line, 0, 0) : line) + "\n";
  std::vector<std::string> groups;  // in the order of their first option
  for (const CLI::Option* option : app.get_options())
    if (std::find(groups.begin(), groups.end(), option->get_group()) == groups.end())
      groups.push_back(option->get_group());
  for (const std::string& group : groups) {
    out += "\n";
    if (group != "Options") out += group + ":\n";
    for (const CLI::Option* option : app.get_options())
      if (option->get_group() == group) out += option_line(*option);
  }
  out += "  --help, -h              this text\n";
  return out;
}

bool parse_command_line(CLI::App& app, const std::vector<std::string>& argv) {
  if (std::any_of(argv.begin(), argv.end(), [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    std::cout << usage(app);
    return false;
  }
  const auto is_option = [](const std::string& a) { return a.size() > 2 && a.rfind("--", 0) == 0; };
  // CLI11 would take the argument after an option as its value even when it is the next --option.
  for (size_t i = 0; i < argv.size(); ++i) {
    if (!is_option(argv[i]) || argv[i].find('=') != std::string::npos) continue;
    const CLI::Option* option = app.get_option_no_throw(argv[i]);
    if (option && option->get_expected_min() > 0 && (i + 1 == argv.size() || is_option(argv[i + 1])))
      throw std::invalid_argument("option " + argv[i] + ": needs a value");
  }
  std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11 reads from the back
  std::optional<std::string> error;  // reported after an unknown option, which the line's other errors may follow from
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {  // a missing --model, a value that fails its check
    error = e.what();
  } catch (const std::invalid_argument& e) {  // a value an option's own reader refused (--backend, --stop-ids …)
    error = e.what();
  }
  const std::vector<std::string> rest = app.remaining();
  if (const auto unknown = std::find_if(rest.begin(), rest.end(), is_option); unknown != rest.end()) {
    std::string known;
    for (const CLI::Option* option : app.get_options()) known += option->get_name() + ", ";
    const std::string name = unknown->substr(0, unknown->find('='));
    throw std::invalid_argument("option " + name + ": unknown (known: " + known + "--help)");
  }
  if (!rest.empty()) throw std::invalid_argument("argument '" + rest.front() + "': expected an --option");
  if (error) throw std::invalid_argument(*error);
  return true;
}

bool given(const CLI::App& app, const std::string& name) {
  return app.count("--" + name) > 0;
}

CLI::Validator integer_in(long long min, long long max) {
  const std::string range = max == std::numeric_limits<long long>::max()
                                ? "≥ " + std::to_string(min)
                                : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        long long value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "must be an integer, not " + text;
        return value >= min && value <= max ? "" : "must be " + range + ", not " + text;
      },
      range);
}

}  // namespace inferlab::cli
