#pragma once
/// @file tokenizer_check.h
/// The check of chapter 08's tokenizer against its independent oracle, shared by
/// test_tokenizer.cpp (the real BpeTokenizer passes it) and tests/wrong/wrong_ch08_tokenizer.cpp
/// (wrong encoders fail it): Hugging Face `tokenizers` built from the GGUF's own vocabulary and
/// merges (tokenizer_oracle.py, run with the venv's Python) encodes the same texts, and every id
/// must agree.
///
/// The texts: hand-written ones for each kind of text a tokenizer gets wrong (English, code,
/// long digit runs, whitespace runs, contractions, punctuation, emoji, CJK, accented Latin,
/// ChatML special tokens, empty text, bytes without a token…), each with special tokens parsed
/// and not, and seeded random mixes of the same classes. The random texts draw only characters
/// that Unicode 15.0 (ICU 72, what the pre-tokenizer reads) and the newer Unicode of Rust's
/// standard library (Hugging Face's digit test) class alike: characters first assigned in
/// Unicode 16 (Ol Onal or Garay digits, say) are numbers to Hugging Face and unassigned to ICU 72,
/// a difference of versions, not of rules.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "tests/support/run_inferlab.h"

namespace inferlab::testing {

/// One text to encode, and whether its special tokens are parsed.
struct TokenizerCase {
  std::string name;    ///< what it covers, for failure messages
  std::string text;    ///< UTF-8 (valid: the oracle takes Python strings)
  bool parse_special;  ///< special tokens written in the text are tokens (true) or text
};

/// An encoder under test: text, parse_special → ids.
using Encoder = std::function<std::vector<int32_t>(std::string_view, bool)>;

/// Empty when the model and the venv are installed; otherwise what is missing and the command
/// that installs it (the tests fail with it: a missing model never passes by skipping).
inline std::string setup_problem(bool need_venv) {
  const bool model = std::filesystem::exists(INFERLAB_SMOLLM2_GGUF);
  const bool venv = !need_venv || std::filesystem::exists(INFERLAB_VENV_PYTHON);
  if (model && venv) return "";
  std::string problem;
  if (!model) problem = std::string("the model ") + INFERLAB_SMOLLM2_GGUF;
  if (!venv) problem += std::string(model ? "" : " and ") + "the Python tools " + INFERLAB_VENV_PYTHON;
  problem += !model && !venv ? " are" : " is";
  return problem + " not installed: run ./inferlab setup (it installs chapter 08's model and Python tools)";
}

/// The hand-written texts, each once with special tokens parsed and once without.
inline std::vector<TokenizerCase> hand_written_cases() {
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"english", "The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times."},
      {"english lines", "Hello world!\nHow are you today?\n\nI am fine, thanks.\n"},
      {"code",
       "def square(x: int) -> int:\n    \"\"\"Square x.\"\"\"\n    return x ** 2  # no overflow\n\n"
       "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n"},
      {"json", "{\"id\": 42, \"tags\": [\"a\", \"b\"], \"ok\": true, \"pi\": 3.14159}"},
      {"long digit runs", "12345678901234567890 and 3.14159265358979 and 2,000,000.00 and 0x1F and 1e-10"},
      {"numbers of other scripts", "Arabic ١٢٣٤ Devanagari ४२ fullwidth ３７ fractions ½ ¾ Roman Ⅻ superscript x²"},
      {"space runs", "a b  c   d    e     f      g"},
      {"tabs and newlines", "\tindented\n\t\ttwice\n\n\n\r\nwindows\r\n"},
      {"trailing spaces", "trailing spaces   "},
      {"leading spaces", "   leading spaces"},
      {"only spaces", "        "},
      {"space before newline", "line one  \n  line two \n"},
      {"contractions", "I'm sure you're right; we've seen they'll do what he'd said it's can't won't"},
      {"contractions upper and odd", "I'M YOU'RE 'S 'LL ''s ' s 're've"},
      {"punctuation", "Wait... what?!? (yes) [no] {maybe} <tag/> --flag ++i a->b x==y ~/path/* #1 @user $5 %d ^_^"},
      {"repeated characters", "aaaaaaaaaaaaaaaa !!!!!!!!!!!!!! ================ ________ ........"},
      {"emoji", "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷 keycap 1️⃣ 🙂🙃"},
      {"cjk", "中文测试：你好，世界。日本語のテキスト、カタカナ。한국어 텍스트입니다."},
      {"accented latin", "café naïve résumé Ångström Łódź Škoda Ærøskøbing façade coöperate Ðð Þþ"},
      {"combining marks", "e\u0301 a\u0308 n\u0303 Z\u0335\u0301"},
      {"other scripts", "Привет мир. Γειά σου κόσμε. مرحبا بالعالم. שלום עולם. नमस्ते दुनिया. สวัสดีชาวโลก"},
      {"unicode spaces",
       "no\u00a0break thin\u2009space ideographic\u3000space em\u2003space nel\u0085next line\u2028sep"},
      {"not spaces", "zero\u200bwidth soft\u00adhyphen bom\ufeff mongolian\u180evowel fs\u001cgs\u001d"},
      {"bytes without a token", "control\u0004and\u0006others\u0013\u0014\u0016end"},
      {"chatml",
       "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
       "<|im_start|>assistant\n"},
      {"special tokens adjacent", "<|im_start|><|im_end|><|endoftext|>x<|im_end|> <|im_start|>"},
      {"special tokens partial", "<|im_start <|im_end| <|endoftext|x <|im_start|<|im_end|>"},
      {"other special tokens", "<repo_name>inferlab<file_sep>main.cpp<filename>a.py<jupyter_code>print(1)"},
      {"empty", ""},
      {"one space", " "},
      {"one newline", "\n"},
      {"long word", std::string(3000, 'a') + std::string(500, 'z')},
      {"long space run", std::string(5000, ' ') + "x"},
      {"long cjk line",
       [] {
         std::string s;
         for (int i = 0; i < 400; ++i) s += "的一是不了人我在有他这";
         return s;
       }()},
  };
  std::vector<TokenizerCase> cases;
  for (const bool parse_special : {true, false}) {
    for (const auto& [name, text] : texts) {
      cases.push_back({name + (parse_special ? " (special parsed)" : " (special as text)"), text, parse_special});
    }
  }
  return cases;
}

/// @p count random texts (seeded): 0–40 units, each a fragment of the kinds above or one
/// character drawn from a well-established block, special tokens parsed in about half.
inline std::vector<TokenizerCase> fuzzed_cases(uint64_t seed, int count) {
  const std::vector<std::string> fragments = {
      " ",
      "  ",
      "   ",
      "\t",
      "\n",
      "\n\n",
      "\r\n",
      "\u00a0",
      "\u3000",
      "\u2009",
      "\u0085",
      "\u2028",
      "a",
      "Z",
      "the",
      " the",
      "é",
      "ß",
      "Ω",
      "ж",
      "ع",
      "א",
      "क",
      "中",
      "文",
      "한",
      "カ",
      "0",
      "7",
      "42",
      "٣",
      "४",
      "½",
      "Ⅻ",
      "'",
      "'s",
      "'ll",
      "'re",
      "'D",
      ".",
      ",",
      "!",
      "?",
      "...",
      "-",
      "(",
      ")",
      "{",
      "}",
      "\"",
      "#",
      "$",
      "€",
      "™",
      "©",
      "😀",
      "👍",
      "🏽",
      "\u200d",
      "🇫",
      "🇷",
      "\u0301",
      "\u200b",
      "\u00ad",
      "<|im_start|>",
      "<|im_end|>",
      "<|endoftext|>",
      "<|im_",
      "|>",
      "<",
  };
  // [first, last] code points of blocks whose classes Unicode 15 and 16 agree on.
  const std::vector<std::pair<char32_t, char32_t>> blocks = {
      {0x20, 0x7E},       {0xA0, 0x24F},      {0x370, 0x3FF},     {0x400, 0x4FF},     {0x590, 0x5FF},
      {0x600, 0x6FF},     {0x900, 0x97F},     {0xE00, 0xE7F},     {0x2000, 0x206F},   {0x2070, 0x209F},
      {0x20A0, 0x20BF},   {0x2100, 0x218B},   {0x2190, 0x23FF},   {0x2460, 0x24FF},   {0x2500, 0x27BF},
      {0x3000, 0x303F},   {0x3040, 0x30FF},   {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},   {0xFF01, 0xFF5E},
      {0x1D400, 0x1D7FF}, {0x1F300, 0x1F64F}, {0x1F680, 0x1F6C5}, {0x1F900, 0x1F9FF},
  };
  std::mt19937_64 rng(seed);
  const auto uniform = [&](size_t n) { return size_t(rng() % n); };
  std::vector<TokenizerCase> cases;
  for (int i = 0; i < count; ++i) {
    std::string text;
    const size_t units = uniform(41);
    for (size_t u = 0; u < units; ++u) {
      if (uniform(10) < 6) {
        text += fragments[uniform(fragments.size())];
        continue;
      }
      const auto [first, last] = blocks[uniform(blocks.size())];
      const char32_t c = first + char32_t(uniform(size_t(last - first + 1)));
      if (c >= 0xD800 && c <= 0xDFFF) continue;  // not in these blocks, but never a surrogate
      // UTF-8 by hand: the check depends on nothing it checks.
      if (c < 0x80) {
        text += char(c);
      } else if (c < 0x800) {
        text += char(0xC0 | (c >> 6)), text += char(0x80 | (c & 0x3F));
      } else if (c < 0x10000) {
        text += char(0xE0 | (c >> 12)), text += char(0x80 | ((c >> 6) & 0x3F)), text += char(0x80 | (c & 0x3F));
      } else {
        text += char(0xF0 | (c >> 18)), text += char(0x80 | ((c >> 12) & 0x3F));
        text += char(0x80 | ((c >> 6) & 0x3F)), text += char(0x80 | (c & 0x3F));
      }
    }
    cases.push_back({"fuzzed #" + std::to_string(i) + " (seed " + std::to_string(seed) + ")", text, uniform(2) == 0});
  }
  return cases;
}

/// The oracle's ids for each case (one run of tokenizer_oracle.py). Throws std::runtime_error
/// with the script's output when it fails.
inline std::vector<std::vector<int32_t>> oracle_ids(const std::vector<TokenizerCase>& cases) {
  const auto dir = std::filesystem::temp_directory_path() / ("inferlab_tokenizer_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string input = (dir / "texts.json").string();
  {
    Json items = Json::array();
    for (const auto& c : cases) items.push_back({{"text", c.text}, {"parse_special", c.parse_special}});
    std::ofstream(input) << items.dump();
  }
  const std::string script = std::string(INFERLAB_SOURCE_DIR) + "/tests/08-real-model/tokenizer_oracle.py";
  const CommandResult run =
      run_command(INFERLAB_VENV_PYTHON, "'" + script + "' '" + INFERLAB_SMOLLM2_GGUF + "' '" + input + "'");
  std::filesystem::remove_all(dir);
  if (run.exit_code != 0) throw std::runtime_error("tokenizer_oracle.py failed: " + run.output);
  // The ids are the last line (anything a library prints comes before).
  std::string_view out = run.output;
  while (!out.empty() && out.back() == '\n') out.remove_suffix(1);
  const size_t line = out.rfind('\n');
  const Json ids = parse_json(std::string(out.substr(line == std::string_view::npos ? 0 : line + 1)),
                              "tokenizer_oracle.py's output");
  if (!ids.is_array() || ids.size() != cases.size()) {
    throw std::runtime_error("tokenizer_oracle.py: expected " + std::to_string(cases.size()) + " id lists");
  }
  std::vector<std::vector<int32_t>> result;
  for (const auto& list : ids) result.push_back(list.get<std::vector<int32_t>>());
  return result;
}

/// Success when @p encode gives @p expected for every case; otherwise a failure naming how many
/// differ and, for the first few, the case, the text and both id lists.
inline ::testing::AssertionResult encodes_like_oracle(const Encoder& encode, const std::vector<TokenizerCase>& cases,
                                                      const std::vector<std::vector<int32_t>>& expected) {
  const auto show = [](const std::vector<int32_t>& ids) {
    // Appended piece by piece: GCC 12's -Wrestrict false positive (bug 105329) on "x" + s.
    std::string s = "[";
    for (size_t i = 0; i < ids.size() && i < 40; ++i) {
      if (i) s += ' ';
      s += std::to_string(ids[i]);
    }
    if (ids.size() > 40) s += " …";
    s += "] (";
    s += std::to_string(ids.size());
    s += " ids)";
    return s;
  };
  size_t differ = 0;
  std::string report;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = encode(cases[i].text, cases[i].parse_special);
    if (got == expected.at(i)) continue;
    if (++differ <= 3) {
      // At most 200 bytes of the text; a character cut there shows as U+FFFD.
      const std::string text = Json(cases[i].text.substr(0, 200)).dump(-1, ' ', false, Json::error_handler_t::replace);
      report += "\n  " + cases[i].name + ": text " + text + (cases[i].text.size() > 200 ? "…" : "") +
                "\n    oracle: " + show(expected[i]) + "\n    got:    " + show(got);
    }
  }
  if (differ == 0) return ::testing::AssertionSuccess() << cases.size() << " texts agree";
  return ::testing::AssertionFailure() << differ << " of " << cases.size() << " texts encode differently from "
                                       << "Hugging Face tokenizers" << report;
}

}  // namespace inferlab::testing
