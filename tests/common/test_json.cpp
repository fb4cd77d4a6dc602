// common/json.h: the layout every InferLab JSON file shares, figures rounded to their digits,
// strings escaped on the way out and back, and parse errors that say where.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/json.h"

namespace inferlab {
namespace {

TEST(Json, LayoutOpensTheTopAndWhatHoldsObjects) {
  Json json;
  json["config"] = {{"policy", "static"}, {"ids", {1, 2, 3}}};
  json["rows"] = Json::array({{{"a", 1}}, {{"a", 2}}});
  json["matrix"] = {{1, 2}, {3, 4}};
  json["empty"] = Json::array();
  json["none"] = nullptr;
  EXPECT_EQ(format_json(json),
            "{\n"
            "  \"config\": {\"policy\": \"static\", \"ids\": [1, 2, 3]},\n"
            "  \"rows\": [\n"
            "    {\"a\": 1},\n"
            "    {\"a\": 2}\n"
            "  ],\n"
            "  \"matrix\": [[1, 2], [3, 4]],\n"
            "  \"empty\": [],\n"
            "  \"none\": null\n"
            "}");
  EXPECT_EQ(Json::parse(format_json(json)), json) << "the text reads back to the same value";
  EXPECT_EQ(format_json(Json(3)), "3");
  EXPECT_EQ(format_json(Json::object()), "{}");
}

TEST(Json, StringsWithQuotesBackslashesAndControlCharactersRoundTrip) {
  const std::string nasty = "a \"quoted\" C:\\path\nline\ttab\x01 end \xc3\xa9";
  Json json = {{"name", nasty}, {nasty, 1}};
  const std::string text = format_json(json);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << "only the layout's newlines are raw:\n" << text;
  EXPECT_NE(text.find("\\\"quoted\\\""), std::string::npos) << text;
  EXPECT_NE(text.find("C:\\\\path\\nline\\ttab\\u0001"), std::string::npos) << text;
  const Json back = parse_json(text, "test");
  EXPECT_EQ(back["name"].get<std::string>(), nasty);
  EXPECT_EQ(back[nasty].get<int>(), 1);
}

TEST(Json, NumbersAreWrittenAsPrintfsGShowsThem) {
  EXPECT_EQ(json_number(123.456789, 6).dump(), "123.457");
  EXPECT_EQ(json_number(123.456789, 6).get<double>(), 123.457);
  EXPECT_EQ(json_number(0.000123456789, 3).dump(), "0.000123");
  EXPECT_EQ(json_number(1.5e-7, 9).dump(), "1.5e-07");
  EXPECT_EQ(json_number(1073741824.0, 12).dump(), "1073741824") << "a whole number without a fraction";
  EXPECT_EQ(json_number(4e10, 12).dump(), "40000000000");
  EXPECT_EQ(json_number(0.0, 9).dump(), "0");
  EXPECT_EQ(json_number(-2.5, 9).dump(), "-2.5");
  EXPECT_EQ(json_number(1e300, 6).dump(), "1e+300") << "beyond 2^53 a double stays a double";
  EXPECT_TRUE(json_number(std::numeric_limits<double>::infinity(), 6).is_null());
  EXPECT_TRUE(json_number(std::nan(""), 6).is_null());
  EXPECT_THROW(json_number(1.0, 0), std::invalid_argument);
  EXPECT_THROW(json_number(1.0, 18), std::invalid_argument);
}

TEST(Json, ParseErrorsNameTheTextAndTheColumn) {
  try {
    parse_json("{\"a\": 1,", "trace line 7");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("trace line 7: not JSON: ", 0), 0u) << message;
    EXPECT_NE(message.find("column 9"), std::string::npos) << message;
    EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
  }
  EXPECT_EQ(parse_json("[1, 2]", "x"), Json({1, 2}));
}

}  // namespace
}  // namespace inferlab
