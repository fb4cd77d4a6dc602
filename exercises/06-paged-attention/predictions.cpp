// Predictions P6.1–P6.3 — see predictions.h for the questions. Work each number out on paper
// first, then write the formula here and compare with the measurement the header names.
#include "06-paged-attention/predictions.h"
#include "common/check.h"

namespace inferlab::student {

int64_t predict_blocks_needed(std::span<const int64_t> sequence_lengths, int64_t block_size) {
  // TODO(student): each sequence rounds up to whole blocks. (3 lines)
  (void)sequence_lengths, (void)block_size;
  throw NotImplemented("predict_blocks_needed");
}

double predict_block_bytes(int64_t block_size, int64_t kv_heads, int64_t head_dim, double bytes_per_element) {
  // TODO(student): K and V of the block's tokens. (1 line)
  (void)block_size, (void)kv_heads, (void)head_dim, (void)bytes_per_element;
  throw NotImplemented("predict_block_bytes");
}

int64_t predict_sequences_contiguous(double pool_gib, double kv_bytes_per_token, int64_t max_seq_len) {
  // TODO(student): the pool over one max-length slot. (2 lines)
  (void)pool_gib, (void)kv_bytes_per_token, (void)max_seq_len;
  throw NotImplemented("predict_sequences_contiguous");
}

int64_t predict_sequences_paged(double pool_gib, double kv_bytes_per_token, int64_t block_size, double mean_length) {
  // TODO(student): the pool's tokens over what a sequence holds on average. (3 lines)
  (void)pool_gib, (void)kv_bytes_per_token, (void)block_size, (void)mean_length;
  throw NotImplemented("predict_sequences_paged");
}

}  // namespace inferlab::student
