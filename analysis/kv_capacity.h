#pragma once
/// @file kv_capacity.h
/// The memory arithmetic of chapter 06 (PagedAttention): how much of the KV memory a server
/// reserves actually holds tokens, how many sequences fit in a fixed KV budget, and what sharing
/// blocks saves. Pure arithmetic on token counts — no kernel, no allocator — so the chapter's
/// benchmark, `inferlab analyze` and the tests all read the same numbers.
///
/// **The two ways to reserve KV memory.**
///  - *Contiguous, max-length*: every sequence gets one slot of `max_seq_len` tokens up front
///    (Orca (Max) in the vLLM paper; FasterTransformer does the same). Reserved per sequence:
///    max_seq_len · bytes_per_token, whatever its length.
///  - *Paged*: a sequence of L tokens holds ⌈L / B⌉ blocks of B tokens, allocated on demand.
///    The only waste is the unfilled tail of its last block (internal fragmentation), fewer than
///    B tokens per sequence; block 1 wastes nothing. All blocks have one size, so there is no
///    external fragmentation.
/// Both are evaluated at a snapshot where each sequence holds its length: for a finished request
/// that is prompt + output, the best case for the contiguous slot (earlier in a request's life
/// less of it is filled). The contiguous allocator is assumed perfect (no external
/// fragmentation), which also flatters it.
///
/// **What the vLLM paper measured** (W. Kwon et al., "Efficient Memory Management for Large
/// Language Model Serving with PagedAttention", SOSP 2023, arXiv:2309.06180):
///  - §1 and Fig. 2: "only 20.4% - 38.2% of the KV cache memory is used to store the actual token
///    states in the existing systems" — the token-state bars of Fig. 2 ("Average percentage of
///    memory wastes in different LLM serving systems during the experiment in §6.2") are 20.4%
///    for Orca (Max), 26.8% for Orca (Pow2), 38.2% for Orca (Oracle) and 96.3% for vLLM. The
///    vLLM blog post of 2023-06-20 (blog.vllm.ai/2023/06/20/vllm.html) rounds these to "existing
///    systems waste 60% – 80% of memory" and, for paging, "a mere waste of under 4%".
///  - §6.3 and Fig. 15: the memory saving of sharing, "computed by the number of blocks we saved
///    by sharing divided by the number of total blocks without sharing" (the definition used by
///    SharingBytes::saving), is 6.1% - 9.8% for parallel sampling on Alpaca and 16.2% - 30.5% on
///    ShareGPT (OPT-13B; beam search: 37.6% - 55.2% and 44.3% - 66.3%).
///  - §6.4 and Fig. 16: shared prefixes of 80 tokens (one-shot) and 341 tokens (five-shot).
///
/// **The request lengths** (LengthDistribution): the paper gives only the means of its two
/// workloads, in the legend of Fig. 11 ("Input and output length distributions of the (a)
/// ShareGPT and (b) Alpaca datasets"): ShareGPT input 161.31 and output 337.99 tokens, Alpaca
/// input 19.31 and output 58.45 tokens (§6.1: "8.4× longer input prompts and 5.8× longer
/// outputs"). Fig. 11's histograms peak at the shortest lengths and have long tails; with only a
/// mean known, the sampler draws each length from the geometric distribution on {1, 2, …} with
/// that mean (the discrete exponential: the maximum-entropy law for a given mean, mode at 1). The
/// shape is **our assumption**, not the paper's; only the two means are cited. Prompts of
/// max_seq_len tokens or more are drawn again (a server rejects them) and outputs are cut at
/// max_seq_len − prompt (generation stops at the maximum length); at max_seq_len 2048 these
/// touch well under 1% of ShareGPT requests.
///
/// Example, LLaMA-7B in fp16 (2 · 32 layers · 32 KV heads · 128 · 2 B = 0.5 MiB per token), a
/// 16 GiB KV budget and max_seq_len 2048: a contiguous slot is 1 GiB, so 16 sequences fit; the
/// same budget holds 32,768 tokens = 2,048 blocks of 16, and a ShareGPT-like sequence (≈ 500
/// tokens) takes ≈ 32 of them, so ≈ 64 fit. `inferlab analyze --kv-waste` prints the whole table.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace inferlab::analysis {

/// The prompt and output tokens of one request.
struct RequestLength {
  int64_t prompt = 0;  ///< prompt (input) tokens, ≥ 1
  int64_t output = 0;  ///< generated (output) tokens, ≥ 1
  /// The sequence's length once finished: prompt + output.
  int64_t total() const { return prompt + output; }
};

/// A request-length distribution: the mean prompt and output lengths of a cited workload.
struct LengthDistribution {
  std::string key;           ///< the name `--lengths` accepts: "sharegpt", "alpaca"
  std::string name;          ///< display name: "ShareGPT"
  double mean_prompt = 0;    ///< mean prompt tokens (cited)
  double mean_output = 0;    ///< mean output tokens (cited)
  std::string source;        ///< where the means come from
};

/// ShareGPT (161.31 / 337.99) and Alpaca (19.31 / 58.45): the means in the legend of the vLLM
/// paper's Fig. 11.
const std::vector<LengthDistribution>& builtin_length_distributions();

/// The built-in distribution called @p key (case-insensitive); throws std::invalid_argument
/// ("lengths = <key>: unknown (known: sharegpt, alpaca)") otherwise.
const LengthDistribution& find_length_distribution(const std::string& key);

/// @p count requests drawn from @p distribution with the 64-bit Mersenne Twister seeded with
/// @p seed (the same seed gives the same requests). Each length is geometric on {1, 2, …} with the
/// distribution's mean, drawn by inverting its CDF from the engine's raw 64-bit output (no
/// std:: distribution, whose algorithm differs between standard libraries). A prompt of
/// @p max_seq_len tokens or more is drawn again; the output is cut at max_seq_len − prompt, so
/// every total is in [2, max_seq_len]. Throws std::invalid_argument for count < 1,
/// max_seq_len < 2 or a mean below 1.
std::vector<RequestLength> sample_requests(const LengthDistribution& distribution, int64_t count,
                                           int64_t max_seq_len, uint64_t seed);

/// The finished lengths (prompt + output) of @p requests, in order.
std::vector<int64_t> sequence_lengths(const std::vector<RequestLength>& requests);

/// The KV memory a set of sequences reserves under one scheme, and how much of it holds tokens.
struct KvWaste {
  int64_t sequences = 0;        ///< number of sequences
  int64_t block_size = 0;       ///< tokens per block; 0 for contiguous max-length reservation
  int64_t max_seq_len = 0;      ///< the maximum length (the contiguous slot)
  int64_t bytes_per_token = 0;  ///< KV bytes of one token, all layers
  int64_t tokens_held = 0;      ///< Σ length: tokens whose K and V are stored
  int64_t tokens_reserved = 0;  ///< contiguous: sequences · max_seq_len; paged: Σ ⌈length / B⌉ · B

  /// Whether this is the contiguous max-length scheme.
  bool contiguous() const { return block_size == 0; }
  /// Tokens in one allocation unit: max_seq_len (contiguous slot) or block_size.
  int64_t unit_tokens() const { return contiguous() ? max_seq_len : block_size; }
  /// Allocation units reserved: sequences (contiguous) or blocks (paged).
  int64_t units_reserved() const { return tokens_reserved / unit_tokens(); }
  /// tokens_held · bytes_per_token.
  int64_t bytes_held() const { return tokens_held * bytes_per_token; }
  /// tokens_reserved · bytes_per_token.
  int64_t bytes_reserved() const { return tokens_reserved * bytes_per_token; }
  /// Reserved slots that hold no token: for paging, the internal fragmentation of every
  /// sequence's last partial block; for the contiguous slot, everything past the sequence's end.
  int64_t wasted_tokens() const { return tokens_reserved - tokens_held; }
  /// The share of reserved bytes that hold tokens: tokens_held / tokens_reserved.
  double share_held() const;
  /// wasted_tokens / sequences (paged: always < block_size).
  double wasted_tokens_per_sequence() const;
};

/// Contiguous max-length reservation of @p lengths: max_seq_len tokens per sequence. Throws
/// std::invalid_argument for an empty list, a length outside [1, max_seq_len] (naming its index),
/// or non-positive max_seq_len or bytes_per_token.
KvWaste contiguous_waste(const std::vector<int64_t>& lengths, int64_t max_seq_len, int64_t bytes_per_token);

/// Paged reservation of @p lengths with blocks of @p block_size tokens: ⌈length / B⌉ blocks per
/// sequence. The same checks as contiguous_waste, and block_size ≥ 1. A block larger than
/// max_seq_len is allowed (and reserves more than the contiguous slot).
KvWaste paged_waste(const std::vector<int64_t>& lengths, int64_t block_size, int64_t max_seq_len,
                    int64_t bytes_per_token);

/// How many sequences like @p waste's fit in @p budget_bytes of KV memory. The budget is cut into
/// allocation units — ⌊budget / (unit_tokens · bytes_per_token)⌋ slots or blocks — and the
/// sequences take units_reserved / sequences of them each on average:
/// ⌊units · sequences / units_reserved⌋. For the contiguous scheme that is exactly
/// ⌊budget / (max_seq_len · bytes_per_token)⌋; for paging it is the steady-state number of
/// sequences resident when they are distributed like the list. Throws std::invalid_argument for
/// a negative budget.
int64_t sequences_that_fit(const KvWaste& waste, int64_t budget_bytes);

/// Blocks (and bytes) of a shared prefix and its continuations, without and with sharing.
struct SharingBytes {
  int64_t block_size = 0;       ///< tokens per block
  int64_t bytes_per_token = 0;  ///< KV bytes of one token, all layers
  int64_t sequences = 0;        ///< sequences that read the prefix
  int64_t blocks_without = 0;   ///< every sequence stores its own copy of the prefix
  int64_t blocks_with = 0;      ///< the prefix's full blocks stored once

  /// blocks_without · block_size · bytes_per_token.
  int64_t bytes_without() const { return blocks_without * block_size * bytes_per_token; }
  /// blocks_with · block_size · bytes_per_token.
  int64_t bytes_with() const { return blocks_with * block_size * bytes_per_token; }
  /// Blocks saved / blocks without sharing (the vLLM paper's §6.3 definition); 0 when empty.
  double saving() const;
};

/// One prefix of @p prefix_tokens followed by one continuation per entry of
/// @p continuation_tokens (each ≥ 1), in blocks of @p block_size tokens. Without sharing, sequence
/// i holds ⌈(P + C_i) / B⌉ blocks. With sharing the prefix's ⌊P / B⌋ full blocks are stored once
/// and referenced by every sequence; the last, partial prefix block (when B does not divide P) is
/// copied on write — each sequence's first token goes into its own copy — so sequence i owns
/// ⌈(P + C_i) / B⌉ − ⌊P / B⌋ blocks. Saved: (n − 1) · ⌊P / B⌋ blocks. (vLLM v1, which shares
/// only full blocks and has no copy-on-write, stores the same number of blocks.) Throws
/// std::invalid_argument for prefix_tokens < 0, an empty list, a continuation < 1, block_size < 1
/// or bytes_per_token < 1.
SharingBytes prefix_sharing(int64_t prefix_tokens, const std::vector<int64_t>& continuation_tokens,
                            int64_t block_size, int64_t bytes_per_token);

/// Parallel sampling: each request's prompt is followed by @p samples outputs, each as long as the
/// request's output (our simplification: the n samples of one request stop together).
/// prefix_sharing per request (prefix = prompt), summed. Throws std::invalid_argument for
/// samples < 1 or an empty list, and as prefix_sharing does.
SharingBytes parallel_sampling_sharing(const std::vector<RequestLength>& requests, int64_t samples,
                                       int64_t block_size, int64_t bytes_per_token);

/// A system prompt of @p system_prompt_tokens tokens ahead of every request, each request then
/// holding @p request_lengths[i] tokens of its own (prompt + output): prefix_sharing with the
/// requests as the continuations.
SharingBytes system_prompt_sharing(int64_t system_prompt_tokens, const std::vector<int64_t>& request_lengths,
                                   int64_t block_size, int64_t bytes_per_token);

/// The block sizes of the waste table: {1, 8, 16, 32, 128}. vLLM's default is 16 (paper §7.2,
/// Fig. 18b: "In the ShareGPT trace, block sizes from 16 to 128 lead to the best performance").
const std::vector<int64_t>& default_block_sizes();

/// One row of the waste table: a scheme, its bytes, and how many sequences fit in the budget.
struct KvWasteRow {
  KvWaste waste;              ///< reserved and held bytes of the list under this scheme
  int64_t budget_bytes = 0;   ///< the KV budget
  int64_t sequences_fit = 0;  ///< sequences_that_fit(waste, budget_bytes)

  /// "contiguous" or "paged".
  std::string scheme() const { return waste.contiguous() ? "contiguous" : "paged"; }
};

/// The waste table of @p lengths: the contiguous max-length row first, then one paged row per
/// entry of @p block_sizes, each with the sequences that fit in @p budget_bytes. Throws as
/// contiguous_waste, paged_waste and sequences_that_fit do.
std::vector<KvWasteRow> kv_waste_table(const std::vector<int64_t>& lengths, int64_t max_seq_len,
                                       int64_t bytes_per_token, int64_t budget_bytes,
                                       const std::vector<int64_t>& block_sizes = default_block_sizes());

/// The rows as a JSON array, one object per row (bytes, tokens, share held, sequences that fit).
std::string to_json(const std::vector<KvWasteRow>& rows);

/// What the whole study uses: a model's bytes per token, a budget, a length distribution, the
/// block sizes and the sharing cases.
struct KvWasteSettings {
  std::string label;                                  ///< what the bytes belong to, e.g. "LLaMA-7B, fp16 KV" (printed, not in the JSON)
  std::string model;                                  ///< the model's key, e.g. "llama-7b" (in the JSON)
  std::string kv;                                     ///< the KV format, e.g. "fp16" (in the JSON)
  int64_t bytes_per_token = 0;                        ///< KV bytes of one token, all layers (kv_cache_size(...).bytes_per_token)
  int64_t max_seq_len = 2048;                         ///< the contiguous slot, and the longest sequence drawn
  int64_t budget_bytes = int64_t{16} << 30;           ///< the KV budget (16 GiB)
  std::string lengths = "sharegpt";                   ///< the length distribution's key
  int64_t requests = 10000;                           ///< requests drawn
  uint64_t seed = 6;                                  ///< the sampler's seed
  std::vector<int64_t> block_sizes = default_block_sizes();  ///< the paged rows
  int64_t sharing_block_size = 16;                    ///< block size of the sharing cases
  int64_t parallel_samples = 4;                       ///< parallel sampling: outputs per prompt
  int64_t system_prompt_tokens = 341;                 ///< the shared system prompt (the paper's five-shot prefix, §6.4)
};

/// The study: the table of the drawn lengths and the two sharing cases.
struct KvWasteReport {
  KvWasteSettings settings;                ///< the input
  LengthDistribution distribution;         ///< the distribution drawn from
  double mean_prompt = 0;                  ///< mean prompt tokens of the drawn requests
  double mean_output = 0;                  ///< mean output tokens of the drawn requests
  double mean_length = 0;                  ///< mean finished length (prompt + output)
  std::vector<KvWasteRow> rows;            ///< kv_waste_table of the finished lengths
  SharingBytes parallel_sampling;          ///< parallel_samples outputs per drawn prompt
  SharingBytes system_prompt;              ///< system_prompt_tokens ahead of every drawn request
};

/// Draws settings.requests requests and computes the table and the sharing cases. Throws
/// std::invalid_argument for bad settings (naming the field).
KvWasteReport kv_waste_report(const KvWasteSettings& settings);

/// Prints @p report: the workload, the table (scheme, block, reserved, held, share held, waste
/// per sequence, sequences that fit and × contiguous) and the two sharing cases.
void print_kv_waste_report(std::ostream& out, const KvWasteReport& report);

/// The report as one JSON object: settings, the drawn lengths' means, "rows" (as
/// to_json(rows)) and "sharing".
std::string to_json(const KvWasteReport& report);

/// What `inferlab analyze` reports about capacity: the KV memory left after the weights, filled
/// with sequences of a length distribution, contiguous max-length vs paged.
struct KvCapacity {
  bool known = false;                 ///< false when the device's memory is unknown (no figures)
  double budget_bytes = 0;            ///< device memory − weights held (≤ 0: the weights do not fit)
  std::string distribution;           ///< the distribution's display name
  double mean_length = 0;             ///< mean finished length of the drawn requests
  KvWasteRow contiguous;              ///< max_seq_len slots
  KvWasteRow paged;                   ///< blocks of block_size
};

/// Capacity of @p budget_bytes (device memory − weights) for @p requests sequences drawn from the
/// distribution @p lengths (seed 6) at @p max_seq_len, contiguous vs paged at @p block_size. A
/// budget ≤ 0 gives 0 sequences. Throws as kv_waste_table does.
KvCapacity kv_capacity(double budget_bytes, int64_t max_seq_len, int64_t bytes_per_token, int64_t block_size = 16,
                       const std::string& lengths = "sharegpt", int64_t requests = 10000);

}  // namespace inferlab::analysis
