// Stop strings (runtime/tokenizer/stop_strings.h): the pieces a StopStringMatcher shows, over
// random ways of cutting a text, equal the text cut before the stop string that ends first — the
// oracle searches the whole text at once — and nothing of a matched stop string is ever shown.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/tokenizer/stop_strings.h"
#include "tests/support/seeded.h"

namespace inferlab::tokenizer {
namespace {

// The oracle: the whole text searched at once, at every end position in turn, for the first one
// where some stop string ends (the longest of those that end there).
std::string cut_at_first_stop(const std::string& text, const std::vector<std::string>& stops) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t longest = 0;
    for (const std::string& s : stops)
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) longest = std::max(longest, s.size());
    if (longest > 0) return text.substr(0, end - longest);
  }
  return text;
}

struct Shown {
  std::string text;
  bool stopped = false;
  std::vector<std::string> pieces;
};

Shown run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopStringMatcher m(stops);
  Shown out;
  for (const std::string& p : pieces) {
    out.pieces.push_back(m.push(p));
    out.text += out.pieces.back();
  }
  out.stopped = m.stopped();
  out.text += m.flush();
  return out;
}

TEST(StopStrings, AStopAcrossATokenBoundaryIsFoundAndNeverShown) {
  const Shown s = run({"User:"}, {"Hello", " there.", "\nUs", "er", ": hi"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "Hello there.\n");
  // "Us" and "er" could begin the stop string: held back, not shown, then dropped.
  EXPECT_EQ(s.pieces[2], "\n");
  EXPECT_EQ(s.pieces[3], "");
  EXPECT_EQ(s.pieces[4], "");
}

TEST(StopStrings, HeldTextThatDoesNotMatchIsShownOnceItCannot) {
  StopStringMatcher m({"\n\n"});
  EXPECT_EQ(m.push("a\n"), "a");
  EXPECT_EQ(m.held(), "\n");
  EXPECT_EQ(m.push("b"), "\nb");  // "\nb" can no longer become "\n\n"
  EXPECT_EQ(m.push("\n"), "");
  EXPECT_EQ(m.flush(), "\n");  // the end: what was held is shown
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, TheStopCompletedFirstWinsNotTheOneStartedFirst) {
  // "aby" starts first, but "b" is complete one character earlier: generation stops there.
  EXPECT_EQ(run({"aby", "b"}, {"x", "a", "b", "y"}).text, "xa");
  EXPECT_EQ(run({"aby", "b"}, {"xaby"}).text, "xa");  // the same in one piece
  // At one end the longer string wins: it starts earlier.
  EXPECT_EQ(run({"cd", "bcd"}, {"abcd"}).text, "a");
}

TEST(StopStrings, OfTwoStartingTogetherTheShorterEndsFirst) {
  StopStringMatcher m({"world", "o w", "lo"});
  EXPECT_EQ(m.push("hello world"), "hel");
  EXPECT_EQ(m.matched(), "lo");
  EXPECT_EQ(m.push("more"), "");
  StopStringMatcher same_start({"abcd", "ab"});
  EXPECT_EQ(same_start.push("xxabcd"), "xx");
  EXPECT_EQ(same_start.matched(), "ab");
}

TEST(StopStrings, AMatchInsideOnePieceAndAtTheVeryStart) {
  EXPECT_EQ(run({"END"}, {"abcENDdef"}).text, "abc");
  EXPECT_EQ(run({"END"}, {"END"}).text, "");
  EXPECT_EQ(run({"END"}, {"E", "N", "D"}).text, "");
}

TEST(StopStrings, OverlappingPrefixesAreHeldBackNotLost) {
  // "aab" inside "aaab": the first 'a' cannot start it once the third arrives.
  const Shown s = run({"aab"}, {"a", "a", "a", "b"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "a");
}

TEST(StopStrings, WithoutStopsEverythingIsShownAtOnce) {
  StopStringMatcher m;
  EXPECT_EQ(m.push("any text"), "any text");
  EXPECT_EQ(m.held(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, MultiByteCharactersStayWhole) {
  // "é" is C3 A9; the stop "éé" held after one "é" releases it whole.
  const Shown s = run({"éé"}, {"café", " au", " lait éé"});
  EXPECT_EQ(s.text, "café au lait ");
  for (const std::string& p : s.pieces) {
    if (p.empty()) continue;
    EXPECT_NE(static_cast<unsigned char>(p.front()) & 0xC0, 0x80) << "a piece starts inside a character: " << p;
  }
}

TEST(StopStrings, BadStopListsAreRefusedNamingTheString) {
  try {
    StopStringMatcher({"ok", ""});
    FAIL() << "an empty stop string was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("stop[1]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(StopStringMatcher({"a", "b", "c", "d", "e"}), std::invalid_argument);
}

// Every cut of random texts over a small alphabet (so stop strings occur, overlap and nearly
// occur) against the oracle.
TEST(StopStrings, EveryCutOfRandomTextsEqualsTheWholeTextSearched) {
  testing::SeededRng rng;
  const std::string alphabet = "ab\n";
  auto random_string = [&](size_t min_len, size_t max_len) {
    std::string s(size_t(rng.integer(int64_t(min_len), int64_t(max_len))), 'a');
    for (char& c : s) c = alphabet[size_t(rng.integer(0, int64_t(alphabet.size()) - 1))];
    return s;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops;
    const auto count = size_t(rng.integer(1, int64_t(StopStringMatcher::kMaxStops)));
    for (size_t i = 0; i < count; ++i) stops.push_back(random_string(1, 4));
    const std::string text = random_string(0, 24);
    std::vector<std::string> pieces;
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min(text.size() - at, size_t(rng.integer(0, 4)));  // empty pieces too
      pieces.push_back(text.substr(at, n));
      at += n;
    }
    const Shown s = run(stops, pieces);
    const std::string expected = cut_at_first_stop(text, stops);
    std::string all;
    for (const std::string& st : stops) all += "[" + st + "]";
    ASSERT_EQ(s.text, expected) << "text '" << text << "', stops " << all << ", trial " << trial;
    ASSERT_EQ(s.stopped, expected.size() < text.size()) << "text '" << text << "'";
  }
}

}  // namespace
}  // namespace inferlab::tokenizer
