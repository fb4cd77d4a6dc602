// Predictions P6.1–P6.3 — straightforward answers. See exercises/06-paged-attention/predictions.h.
#include "06-paged-attention/predictions.h"

#include <cmath>

namespace inferlab::student {

int64_t predict_blocks_needed(std::span<const int64_t> sequence_lengths, int64_t block_size) {
  int64_t blocks = 0;
  for (int64_t length : sequence_lengths) blocks += (length + block_size - 1) / block_size;
  return blocks;
}

double predict_block_bytes(int64_t block_size, int64_t kv_heads, int64_t head_dim, double bytes_per_element) {
  return 2.0 * double(block_size) * double(kv_heads) * double(head_dim) * bytes_per_element;  // 2: K and V
}

int64_t predict_sequences_contiguous(double pool_gib, double kv_bytes_per_token, int64_t max_seq_len) {
  return static_cast<int64_t>(std::floor(pool_gib * 1073741824.0 / (kv_bytes_per_token * double(max_seq_len))));
}

int64_t predict_sequences_paged(double pool_gib, double kv_bytes_per_token, int64_t block_size, double mean_length) {
  const double pool_tokens = pool_gib * 1073741824.0 / kv_bytes_per_token;
  return static_cast<int64_t>(std::floor(pool_tokens / (mean_length + double(block_size - 1) / 2.0)));
}

}  // namespace inferlab::student
