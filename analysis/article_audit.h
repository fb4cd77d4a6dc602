#pragma once
/// @file article_audit.h
/// The calculator's audit of the source article, 《大模型推理优化：Prefill与Decode机制详解》 ("LLM
/// inference optimization: Prefill and Decode explained"): each of its figures on the KV cache,
/// decode bandwidth and quantization, recomputed by the same code that `inferlab analyze` runs,
/// with what the article says, the correct value and why. `inferlab analyze --audit` prints it;
/// the article's errata, in the lab's own words, are on one page: docs/pages/article-errata.md.

#include <ostream>
#include <string>
#include <vector>

namespace inferlab::analysis {

/// The audited article's title, as published.
inline constexpr const char* kArticleTitle = "《大模型推理优化：Prefill与Decode机制详解》";
/// The title in English.
inline constexpr const char* kArticleTitleEnglish = "LLM inference optimization: Prefill and Decode explained";
/// The repository page that lists the article's errata.
inline constexpr const char* kArticleErrataPage = "docs/pages/article-errata.md";

/// How an article figure fares against the calculator.
enum class Verdict {
  right,   ///< the calculator reproduces it
  partly,  ///< right under a condition the article does not state
  wrong,   ///< the calculator gives a different value
};

/// One audited figure.
struct AuditRow {
  std::string section;               ///< where it is in the article, e.g. "§2.2"
  std::string claim;                 ///< what is being computed, e.g. "KV per token per layer, H = 4096, fp16"
  std::string article;               ///< what the article says
  std::string correct;               ///< the calculator's value (with the arithmetic)
  Verdict verdict = Verdict::right;  ///< how the article's figure fares
  std::string why;                   ///< the reason for the difference, or why it holds
};

/// "right", "partly", "wrong".
std::string to_string(Verdict verdict);

/// Every audited figure, computed now (LLaMA-7B and the article's 50-layer H = 4096 example on an
/// A100 40GB, the device of the article's §4.3).
std::vector<AuditRow> article_audit();

/// Writes @p rows as text blocks, under a heading naming the article by its title and the errata
/// page: claim and verdict, then article / correct / why.
void print_audit(std::ostream& out, const std::vector<AuditRow>& rows);
/// Writes @p rows as a Markdown table (for the lesson).
void print_audit_markdown(std::ostream& out, const std::vector<AuditRow>& rows);

}  // namespace inferlab::analysis
