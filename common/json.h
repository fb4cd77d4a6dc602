#pragma once
/// @file json.h
/// The project's one JSON reader and writer: nlohmann/json (Debian's nlohmann-json3-dev), with
/// the layout every file InferLab writes shares. Strings are escaped by the library; numbers are
/// written by it too (shortest text that reads back to the same double), after rounding to the
/// significant digits a file promises (json_number()).

#include <nlohmann/json.hpp>

#include <string>

namespace inferlab {

/// A JSON value whose objects keep their keys in the order they were added (the order a reader
/// of the file sees them).
using Json = nlohmann::ordered_json;

/// @p value as text, laid out for people and for diffs: the top level and every object or array
/// that holds an object (or an array holding one) one member a line, indented two spaces a level;
/// every other object or array on one line, `{"key": 1, "list": [1, 2]}`. No trailing newline.
std::string format_json(const Json& value);

/// @p value as a JSON number of @p digits significant digits, as printf's `%.*g` shows it:
/// rounded (a figure carries no more digits than it means), and a whole number written without a
/// fraction (a byte count stays 1073741824, not 1073741824.0). Non-finite values become null.
/// Throws std::invalid_argument unless 1 ≤ @p digits ≤ 17.
Json json_number(double value, int digits);

/// Parses @p text; throws std::invalid_argument "@p what: not JSON: " followed by the parser's
/// reason, with its line and column (the column alone for one line of text), when it is not one
/// JSON value.
Json parse_json(const std::string& text, const std::string& what);

}  // namespace inferlab
