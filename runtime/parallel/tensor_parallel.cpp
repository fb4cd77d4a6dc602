// Megatron's split of a Llama model over ranks (tensor_parallel.h): the rule, then the shard.
#include "runtime/parallel/tensor_parallel.h"

#include <string>
#include <utility>
#include <vector>

#include "common/ceil_div.h"
#include "common/check.h"

namespace inferlab::parallel {

using model::LlamaConfig;
using model::LlamaLayerWeights;
using model::LlamaWeights;

TensorSplit tensor_split(const LlamaConfig& c, int rank, int ranks) {
  require(ranks >= 1, "tp", ranks, "must be >= 1");
  require(rank >= 0 && rank < ranks, "rank", rank, "must be in [0, tp = " + std::to_string(ranks) + ")");
  const int64_t p = ranks, H = c.n_heads, G = c.n_kv_heads, F = c.hidden_dim;
  const std::string model = " (the model has " + std::to_string(H) + " query heads, " + std::to_string(G) +
                            " KV heads, hidden " + std::to_string(F) + ")";
  require(H % p == 0, "tp", p, "must divide the query heads" + model);
  if (p <= G)
    require(G % p == 0, "tp", p, "must divide the KV heads, or be a multiple of them (each KV head replicated)" + model);
  else
    require(p % G == 0, "tp", p, "above the KV heads must be a multiple of them (each KV head replicated)" + model);
  require(F % p == 0, "tp", p, "must divide the SwiGLU hidden width" + model);
  TensorSplit s;
  s.rank = rank;
  s.ranks = ranks;
  s.q_heads = H / p;
  s.q_head_begin = rank * s.q_heads;
  if (p <= G) {
    s.kv_heads = G / p;
    s.kv_head_begin = rank * s.kv_heads;
  } else {
    s.kv_replicas = p / G;
    s.kv_heads = 1;
    s.kv_head_begin = rank / s.kv_replicas;  // the KV head its query heads read: h / (H / G)
  }
  s.hidden = F / p;
  s.hidden_begin = rank * s.hidden;
  s.vocab_stride = ceil_div(c.vocab_size, p);
  s.vocab_begin = std::min(c.vocab_size, rank * s.vocab_stride);
  s.vocab_rows = std::min(c.vocab_size, s.vocab_begin + s.vocab_stride) - s.vocab_begin;
  return s;
}

namespace {

// Column slices of the row-parallel matrices must be whole blocks in a block format.
void check_columns(const Weight& w, int64_t width, const char* what, int ranks) {
  if (!is_block_format(w.format()) || width % 32 == 0) return;
  require(false, "tp", ranks,
          std::string("cuts ") + what + " into slices of " + std::to_string(width) + " columns, not whole " +
              std::string(to_string(w.format())) + " blocks of 32");
}

}  // namespace

void check_tensor_split(const LlamaWeights& w, int ranks) {
  const LlamaConfig& c = w.config;
  require(!w.shard.split(), "weights", "a shard", "must be the whole model to be split");
  const TensorSplit s = tensor_split(c, 0, ranks);
  if (ranks == 1) return;
  require(s.vocab_rows > 0, "tp", ranks, "leaves a rank without vocabulary rows");
  for (const LlamaLayerWeights& l : w.layers) {
    check_columns(l.wo, s.q_heads * c.head_dim(), "wo (a rank's query heads)", ranks);
    check_columns(l.w2, s.hidden, "w2 (a rank's hidden slice)", ranks);
  }
}

LlamaWeights shard_weights(const LlamaWeights& w, int rank, int ranks) {
  check_tensor_split(w, ranks);
  const LlamaConfig& c = w.config;
  const TensorSplit s = tensor_split(c, rank, ranks);
  if (ranks == 1) return w;
  const int64_t d = c.head_dim(), q_dim = c.q_dim(), kv_dim = c.kv_dim(), F = c.hidden_dim;
  using Range = std::pair<int64_t, int64_t>;
  const Range q{s.q_head_begin * d, (s.q_head_begin + s.q_heads) * d};
  const Range kv{s.kv_head_begin * d, (s.kv_head_begin + s.kv_heads) * d};
  const std::vector<Range> qkv_rows = {q, {q_dim + kv.first, q_dim + kv.second},
                                       {q_dim + kv_dim + kv.first, q_dim + kv_dim + kv.second}};
  const std::vector<Range> w13_rows = {{s.hidden_begin, s.hidden_begin + s.hidden},
                                       {F + s.hidden_begin, F + s.hidden_begin + s.hidden}};
  const std::vector<Range> vocab = {{s.vocab_begin, s.vocab_begin + s.vocab_rows}};

  LlamaWeights shard;
  shard.config = c;
  shard.config.n_heads = s.q_heads;
  shard.config.n_kv_heads = s.kv_heads;
  shard.config.head_dim_size = d;
  shard.config.hidden_dim = s.hidden;
  shard.shard = {rank, ranks, s.vocab_begin, s.vocab_rows, s.vocab_stride};
  shard.embedding = w.embedding.take_rows(vocab);
  if (!c.shared_classifier) shard.classifier = w.classifier.take_rows(vocab);
  shard.final_norm = w.final_norm;
  for (const LlamaLayerWeights& l : w.layers) {
    LlamaLayerWeights& out = shard.layers.emplace_back();
    out.attention_norm = l.attention_norm;
    out.ffn_norm = l.ffn_norm;
    out.wqkv = l.wqkv.take_rows(qkv_rows);
    out.wo = l.wo.take_columns(q.first, q.second);
    out.w13 = l.w13.take_rows(w13_rows);
    out.w2 = l.w2.take_columns(s.hidden_begin, s.hidden_begin + s.hidden);
  }
  shard.validate();
  return shard;
}

}  // namespace inferlab::parallel
