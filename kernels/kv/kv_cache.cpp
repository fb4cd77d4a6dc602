// The KV cache's bookkeeping, written once for every format (kv_cache.h): sizes, lengths,
// capacity and finiteness checks, poisoning, prefill, append, element access.
#include "kernels/kv/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/ceil_div.h"
#include "common/check.h"
#include "common/half.h"
#include "kernels/kv/fp8_e4m3.h"
#include "kernels/kv/quantize.h"

namespace inferlab {

namespace {

[[noreturn]] void wrong_type(const char* accessor, const KvFormat& format) {
  throw std::logic_error(std::string("KvCache::") + accessor + ": the cache stores " + format.name());
}

}  // namespace

namespace {

void check_cache_shape(const KvCacheShape& shape) {
  require_positive("batch", shape.batch);
  require_positive("num_kv_heads", shape.num_kv_heads);
  require_positive("max_seq_len", shape.max_seq_len);
  require_positive("head_dim", shape.head_dim);
  require_positive("num_layers", shape.num_layers);
  require(shape.max_seq_len <= INT32_MAX, "max_seq_len", shape.max_seq_len, "must fit in int32");
}

}  // namespace

KvCache::KvCache(const KvCacheShape& shape, KvFormat format) : format_(format) {
  set_sizes(shape, {});
  owned_ = std::make_unique<KvStorage>(make_kv_storage(shape, format));
  storage_ = owned_.get();
}

KvCache::KvCache(const KvCacheShape& shape, KvFormat format, KvPaging paging) : format_(format) {
  require_positive("paging.block_size", paging.block_size);
  require_positive("paging.num_blocks", paging.num_blocks);
  set_sizes(shape, paging);
  owned_ = std::make_unique<KvStorage>(make_kv_storage(shape, format, paging));
  storage_ = owned_.get();
}

KvCache::KvCache(KvStorage& storage, const KvCacheShape& shape, KvPaging paging) : format_(storage.format()) {
  set_sizes(shape, paging);
  require(storage.num_layers() == shape.num_layers && storage.rows_per_layer() == rows_per_layer_ &&
              storage.head_dim() == shape.head_dim && storage.k_scales_per_layer() == (format_.quantized() ? k_scales_per_layer() : 0),
          "storage", std::to_string(storage.num_layers()) + " layers of " + std::to_string(storage.rows_per_layer()) +
                         " rows × head_dim " + std::to_string(storage.head_dim()),
          "must be make_kv_storage()'s for this shape and paging (" + std::to_string(shape.num_layers) +
              " layers of " + std::to_string(rows_per_layer_) + " rows × head_dim " + std::to_string(shape.head_dim) +
              ")");
  storage_ = &storage;
}

KvCache::KvCache(const KvCache& other)
    : shape_(other.shape_),
      format_(other.format_),
      layout_(other.layout_),
      paging_(other.paging_),
      max_blocks_per_seq_(other.max_blocks_per_seq_),
      rows_per_layer_(other.rows_per_layer_),
      block_table_(other.block_table_),
      lengths_(other.lengths_),
      owned_(std::make_unique<KvStorage>(*other.storage_)),
      storage_(owned_.get()) {}

KvCache& KvCache::operator=(const KvCache& other) {
  if (this != &other) *this = KvCache(other);
  return *this;
}

KvCache::~KvCache() = default;

// The sizes and the empty index (every length 0, every table entry unmapped) of a cache of
// @p shape, paged when @p paging.block_size > 0.
void KvCache::set_sizes(const KvCacheShape& shape, KvPaging paging) {
  check_cache_shape(shape);
  shape_ = shape;
  paging_ = paging;
  layout_ = {shape.num_kv_heads, shape.max_seq_len};
  lengths_.assign(size_t(shape.batch), 0);
  if (paging.block_size <= 0) {
    paging_ = {};
    rows_per_layer_ = shape.rows();
    return;
  }
  require_positive("paging.num_blocks", paging.num_blocks);
  require(paging.num_blocks <= INT32_MAX, "paging.num_blocks", paging.num_blocks, "must fit in int32 (block ids)");
  require(!format_.per_channel(), "format", format_.name(),
          "a paged cache shares blocks between sequences, so each row must carry its own K scale: use per-token "
          "INT8 scales");
  max_blocks_per_seq_ = ceil_div(shape.max_seq_len, paging.block_size);
  rows_per_layer_ = paging.num_blocks * shape.num_kv_heads * paging.block_size;
  block_table_.assign(size_t(shape.batch * max_blocks_per_seq_), -1);
}

KvStorage make_kv_storage(const KvCacheShape& shape, KvFormat format, KvPaging paging) {
  check_cache_shape(shape);
  const bool paged = paging.block_size > 0;
  if (paged) {
    require_positive("paging.num_blocks", paging.num_blocks);
    require(!format.per_channel(), "format", format.name(), "per-channel K scales need a contiguous cache");
  }
  const int64_t rows = paged ? paging.num_blocks * shape.num_kv_heads * paging.block_size : shape.rows();
  const int64_t k_scales = format.per_channel() ? shape.batch * shape.num_kv_heads * shape.head_dim : rows;
  return KvStorage(format, shape.num_layers, rows, shape.head_dim, k_scales);
}

const ContiguousLayout& KvCache::layout() const {
  if (paged()) throw std::logic_error("KvCache::layout: the cache is paged (paged_layout())");
  return layout_;
}

PagedLayout KvCache::paged_layout() const {
  if (!paged()) throw std::logic_error("KvCache::paged_layout: the cache is contiguous (layout())");
  return {block_table_.data(), max_blocks_per_seq_, paging_.block_size, shape_.num_kv_heads};
}

void KvCache::check_block(int64_t block, const char* what) const {
  if (!paged()) throw std::logic_error(std::string("KvCache::") + what + ": the cache is not paged");
  require(block >= 0 && block < paging_.num_blocks, what, block,
          "must be a block id in [0, num_blocks = " + std::to_string(paging_.num_blocks) + ")");
}

void KvCache::require_mapped(int64_t sequence, int64_t tokens, const char* what) const {
  if (!paged() || tokens <= 0) return;
  const int64_t needed = ceil_div(tokens, paging_.block_size);
  for (int64_t i = 0; i < needed; ++i)
    if (block_table_[size_t(sequence * max_blocks_per_seq_ + i)] < 0)
      require(false, what, tokens,
              "sequence " + std::to_string(sequence) + "'s logical block " + std::to_string(i) +
                  " has no physical block: map it first (set_block_table; the block pool allocates)");
}

void KvCache::set_block_table(int64_t sequence, std::span<const int32_t> blocks) {
  check_sequence(sequence);
  if (!paged()) throw std::logic_error("KvCache::set_block_table: the cache is not paged");
  require(int64_t(blocks.size()) <= max_blocks_per_seq_, "blocks.size()", blocks.size(),
          "exceeds max_blocks_per_seq = " + std::to_string(max_blocks_per_seq_));
  for (size_t i = 0; i < blocks.size(); ++i) check_block(blocks[i], ("blocks[" + std::to_string(i) + "]").c_str());
  const int64_t covered = int64_t(blocks.size()) * paging_.block_size;
  require(covered >= lengths_[size_t(sequence)], "blocks.size()", blocks.size(),
          "must cover sequence " + std::to_string(sequence) + "'s " + std::to_string(lengths_[size_t(sequence)]) +
              " cached tokens");
  int32_t* table = block_table_.data() + sequence * max_blocks_per_seq_;
  std::fill_n(table, max_blocks_per_seq_, -1);
  std::copy(blocks.begin(), blocks.end(), table);
}

void KvCache::detach_sequence(int64_t sequence) {
  check_sequence(sequence);
  lengths_[size_t(sequence)] = 0;
  if (paged()) std::fill_n(block_table_.data() + sequence * max_blocks_per_seq_, max_blocks_per_seq_, -1);
}

void KvCache::poison_block(int64_t block) {
  check_block(block, "block");
  const int64_t rows = shape_.num_kv_heads * paging_.block_size;
  for (int64_t layer = 0; layer < shape_.num_layers; ++layer)
    storage_->poison_rows(layer * rows_per_layer_ + block * rows, rows);
}

void KvCache::copy_block(int64_t from, int64_t to) {
  check_block(from, "from");
  check_block(to, "to");
  if (from == to) return;
  const int64_t rows = shape_.num_kv_heads * paging_.block_size;
  for (int64_t layer = 0; layer < shape_.num_layers; ++layer) {
    const int64_t first = layer * rows_per_layer_;
    storage_->copy_rows(first + from * rows, first + to * rows, rows);
  }
}

void KvCache::check_sequence(int64_t sequence) const {
  require(sequence >= 0 && sequence < shape_.batch, "sequence", sequence,
          "must be in [0, batch = " + std::to_string(shape_.batch) + ")");
}

void KvCache::check_layer(int64_t layer) const {
  require(layer >= 0 && layer < shape_.num_layers, "layer", layer,
          "must be in [0, num_layers = " + std::to_string(shape_.num_layers) + ")");
}

void KvCache::require_finite(const float* x, int64_t n, const char* what, int64_t sequence, int64_t kv_head) const {
  if (!format_.quantized()) return;  // fp32/fp16 store NaN and Inf as they are
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      throw std::invalid_argument(std::string(what) + ": sequence " + std::to_string(sequence) + ", KV head " +
                                  std::to_string(kv_head) +
                                  " holds a non-finite value (NaN/Inf): it cannot be quantized to " + format_.name() +
                                  " and nothing was written");
}

int64_t KvCache::length(int64_t sequence) const {
  check_sequence(sequence);
  return lengths_[size_t(sequence)];
}

int64_t KvCache::max_length() const {
  return *std::max_element(lengths_.begin(), lengths_.end());
}

// ---- scales and elements ----

float KvCache::key_scale(int64_t sequence, int64_t kv_head, int64_t token, int64_t c, int64_t layer) const {
  return storage().k_scale(format_.per_channel() ? channel_scale(layer, sequence, kv_head, c)
                                                 : global_row(layer, sequence, kv_head, token));
}

float KvCache::value_scale(int64_t sequence, int64_t kv_head, int64_t token, int64_t layer) const {
  return storage().v_scale(global_row(layer, sequence, kv_head, token));
}

float KvCache::key(int64_t sequence, int64_t kv_head, int64_t token, int64_t c, int64_t layer) const {
  const int64_t row = global_row(layer, sequence, kv_head, token);
  return storage().key(row, c, format_.per_channel() ? channel_scale(layer, sequence, kv_head, c) : row);
}

float KvCache::value(int64_t sequence, int64_t kv_head, int64_t token, int64_t c, int64_t layer) const {
  return storage().value(global_row(layer, sequence, kv_head, token), c);
}

// ---- writing ----

void KvCache::store_token(int64_t layer, int64_t sequence, int64_t kv_head, int64_t row, const float* k_row,
                          const float* v_row) {
  storage_->store_row(row, k_row, v_row, format_.per_channel() ? channel_scale(layer, sequence, kv_head, 0) : -1);
}

void KvCache::poison_row(int64_t row) { storage_->poison_rows(row, 1); }

// Poisons the rows of @p sequence past its length. Paged: only in the blocks mapped to it, and
// safely — a block shared with another sequence is either full (prefix sharing) or ends at
// every holder's length (copy-on-write copies it before anyone appends), so the rows poisoned
// here are no other sequence's tokens.
void KvCache::poison_past_length(int64_t sequence) {
  const int64_t length = lengths_[size_t(sequence)];
  for (int64_t layer = 0; layer < shape_.num_layers; ++layer)
    for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
      if (!paged()) {
        for (int64_t t = length; t < shape_.max_seq_len; ++t) poison_row(global_row(layer, sequence, g, t));
        continue;
      }
      for (int64_t i = length / paging_.block_size; i < max_blocks_per_seq_; ++i) {
        if (block_table_[size_t(sequence * max_blocks_per_seq_ + i)] < 0) continue;
        const int64_t end = std::min((i + 1) * paging_.block_size, shape_.max_seq_len);
        for (int64_t t = std::max(length, i * paging_.block_size); t < end; ++t)
          poison_row(global_row(layer, sequence, g, t));
      }
    }
}

void KvCache::poison_unused() {
  for (int64_t b = 0; b < shape_.batch; ++b) poison_past_length(b);
}

void KvCache::prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v, int64_t layer) {
  check_sequence(sequence);
  check_layer(layer);
  check_rank(k, 3, "k");
  check_shape(v, k.shape(), "v");
  const int64_t L = k.dim(1), d = shape_.head_dim, G = shape_.num_kv_heads;
  require(k.dim(0) == G && k.dim(2) == d, "k.shape", to_string(k.shape()),
          "must be [num_kv_heads = " + std::to_string(G) + ", seq_len, head_dim = " + std::to_string(d) + "]");
  require(L <= shape_.max_seq_len, "seq_len (k.shape[1])", L,
          "exceeds the cache's max_seq_len = " + std::to_string(shape_.max_seq_len));
  require_mapped(sequence, L, "seq_len (k.shape[1])");
  for (int64_t g = 0; g < G; ++g) {
    require_finite(k.data() + g * L * d, L * d, "k (prefill)", sequence, g);
    require_finite(v.data() + g * L * d, L * d, "v (prefill)", sequence, g);
  }
  for (int64_t g = 0; g < G; ++g) {
    if (format_.per_channel()) {  // calibrate K's channel scales on the prompt
      for (int64_t c = 0; c < d; ++c) {
        float max_abs = 0.0f;
        for (int64_t t = 0; t < L; ++t) max_abs = std::max(max_abs, std::fabs(k[(g * L + t) * d + c]));
        const int64_t i = channel_scale(layer, sequence, g, c);
        if (L > 0) {
          storage_->set_k_scale(i, int8_scale(max_abs));
        } else {
          storage_->poison_k_scales(i, 1);
        }
      }
    }
    for (int64_t t = 0; t < L; ++t)
      store_token(layer, sequence, g, global_row(layer, sequence, g, t), k.data() + (g * L + t) * d,
                  v.data() + (g * L + t) * d);
  }
  lengths_[size_t(sequence)] = int32_t(L);
  poison_past_length(sequence);
}

void KvCache::check_append(const Tensor<float>& k_new, const Tensor<float>& v_new) const {
  const Shape token_shape{shape_.batch, shape_.num_kv_heads, shape_.head_dim};
  check_shape(k_new, token_shape, "k_new");
  check_shape(v_new, token_shape, "v_new");
  for (int64_t b = 0; b < shape_.batch; ++b)
    require(lengths_[size_t(b)] < shape_.max_seq_len, "lengths[" + std::to_string(b) + "]", lengths_[size_t(b)],
            "sequence " + std::to_string(b) + " is full (max_seq_len = " + std::to_string(shape_.max_seq_len) +
                "): appending would write past the end of its cache");
  for (int64_t b = 0; b < shape_.batch; ++b)
    require_mapped(b, lengths_[size_t(b)] + 1, ("lengths[" + std::to_string(b) + "] + 1").c_str());
  const int64_t d = shape_.head_dim;
  for (int64_t b = 0; b < shape_.batch; ++b)
    for (int64_t g = 0; g < shape_.num_kv_heads; ++g) {
      const int64_t row = (b * shape_.num_kv_heads + g) * d;
      require_finite(k_new.data() + row, d, "k_new", b, g);
      require_finite(v_new.data() + row, d, "v_new", b, g);
    }
}

int64_t KvCache::slot(int64_t sequence, int64_t token) const {
  check_sequence(sequence);
  require(token >= 0 && token < shape_.max_seq_len, "token", token,
          "must be in [0, max_seq_len = " + std::to_string(shape_.max_seq_len) + ")");
  if (!paged()) return layout_.slot(sequence, token);
  require_mapped(sequence, token + 1, "token");
  return paged_layout().slot(sequence, token);
}

std::vector<int64_t> KvCache::append_slots() const {
  std::vector<int64_t> slots(size_t(shape_.batch));
  for (int64_t b = 0; b < shape_.batch; ++b) slots[size_t(b)] = slot(b, lengths_[size_t(b)]);
  return slots;
}

void KvCache::check_slots(const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> slots) const {
  check_rank(k, 3, "k");
  check_shape(v, k.shape(), "v");
  const int64_t n = k.dim(0), G = shape_.num_kv_heads, d = shape_.head_dim;
  require(k.dim(1) == G && k.dim(2) == d, "k.shape", to_string(k.shape()),
          "must be [num_tokens, num_kv_heads = " + std::to_string(G) + ", head_dim = " + std::to_string(d) + "]");
  require(int64_t(slots.size()) == n, "slots.size()", slots.size(),
          "must equal num_tokens = k.shape[0] = " + std::to_string(n));
  std::vector<int64_t> sorted;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] == -1) continue;
    if (slots[i] < 0 || slots[i] >= slots_per_layer())  // messages are built only for a bad entry
      require(false, "slots[" + std::to_string(i) + "]", slots[i],
              "must be −1 (skip) or in [0, slots_per_layer = " + std::to_string(slots_per_layer()) + ")");
    sorted.push_back(slots[i]);
    for (int64_t g = 0; g < G; ++g) {
      require_finite(k.data() + (int64_t(i) * G + g) * d, d, "k", int64_t(i), g);
      require_finite(v.data() + (int64_t(i) * G + g) * d, d, "v", int64_t(i), g);
    }
  }
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  require(twice == sorted.end(), "slots", twice == sorted.end() ? 0 : *twice,
          "appears twice: two tokens would write the same rows");
}

void KvCache::store_slots_unchecked(const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> slots,
                                    int64_t layer) {
  const int64_t G = shape_.num_kv_heads, d = shape_.head_dim;
  const int64_t block_size = paged() ? paging_.block_size : shape_.max_seq_len;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0) continue;
    // The owning sequence matters only for per-channel K scales, which only a contiguous cache
    // has (one block per sequence there).
    const int64_t sequence = paged() ? -1 : slots[i] / shape_.max_seq_len;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t row = layer * rows_per_layer_ + inferlab::slot_row(slots[i], g, G, block_size);
      const int64_t at = (int64_t(i) * G + g) * d;
      store_token(layer, sequence, g, row, k.data() + at, v.data() + at);
    }
  }
}

void KvCache::store_slots(const Tensor<float>& k, const Tensor<float>& v, std::span<const int64_t> slots,
                          int64_t layer) {
  check_layer(layer);
  check_slots(k, v, slots);
  store_slots_unchecked(k, v, slots, layer);
}

void KvCache::store_appended(const Tensor<float>& k_new, const Tensor<float>& v_new, int64_t layer) {
  check_layer(layer);
  check_append(k_new, v_new);  // [batch, num_kv_heads, head_dim]: one token per sequence
  store_slots_unchecked(k_new, v_new, append_slots(), layer);
}

void KvCache::commit_append() {
  for (int32_t& length : lengths_) {
    if (length >= shape_.max_seq_len) throw std::logic_error("KvCache::commit_append: a sequence is already full");
    ++length;
  }
}

void KvCache::append(const Tensor<float>& k_new, const Tensor<float>& v_new) {
  require(shape_.num_layers == 1, "num_layers", shape_.num_layers,
          "append() writes a one-layer cache; a model calls store_appended() per layer, then commit_append()");
  store_appended(k_new, v_new, 0);
  commit_append();
}

void KvCache::set_lengths(const std::vector<int64_t>& lengths) {
  require(int64_t(lengths.size()) == shape_.batch, "lengths.size()", lengths.size(),
          "must equal batch = " + std::to_string(shape_.batch));
  for (size_t b = 0; b < lengths.size(); ++b)  // messages are built only for a bad entry
    if (lengths[b] < 0 || lengths[b] > shape_.max_seq_len)
      require(false, "lengths[" + std::to_string(b) + "]", lengths[b],
              "must be in [0, max_seq_len = " + std::to_string(shape_.max_seq_len) + "]");
  for (size_t b = 0; b < lengths.size(); ++b) require_mapped(int64_t(b), lengths[b], "lengths[b]");
  for (size_t b = 0; b < lengths.size(); ++b) lengths_[b] = int32_t(lengths[b]);
  poison_unused();
}

// ---- reading ----

Tensor<float> KvCache::keys(int64_t sequence, int64_t layer) const {
  check_layer(layer);
  const int64_t L = length(sequence), d = shape_.head_dim;
  Tensor<float> out({shape_.num_kv_heads, L, d});
  for (int64_t g = 0; g < shape_.num_kv_heads; ++g)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < d; ++c) out[(g * L + t) * d + c] = key(sequence, g, t, c, layer);
  return out;
}

Tensor<float> KvCache::values(int64_t sequence, int64_t layer) const {
  check_layer(layer);
  const int64_t L = length(sequence), d = shape_.head_dim;
  Tensor<float> out({shape_.num_kv_heads, L, d});
  for (int64_t g = 0; g < shape_.num_kv_heads; ++g)
    for (int64_t t = 0; t < L; ++t)
      for (int64_t c = 0; c < d; ++c) out[(g * L + t) * d + c] = value(sequence, g, t, c, layer);
  return out;
}

KvCache KvCache::dequantized() const {
  KvCache cache(shape_, KvFormat::fp32());
  for (int64_t layer = 0; layer < shape_.num_layers; ++layer)
    for (int64_t b = 0; b < shape_.batch; ++b) cache.prefill(b, keys(b, layer), values(b, layer), layer);
  return cache;
}

template <class T, class S, class Layout>
KvRows<T, S, Layout> KvCache::rows(int64_t layer) const {
  check_layer(layer);
  constexpr bool kFp32 = std::is_same_v<T, float>, kFp16 = std::is_same_v<T, uint16_t>,
                 kInt8 = std::is_same_v<T, int8_t>, kFp8 = std::is_same_v<T, uint8_t>;
  const bool element_ok = (kFp32 && format_.dtype == KvDtype::fp32) || (kFp16 && format_.dtype == KvDtype::fp16) ||
                          (kInt8 && format_.dtype == KvDtype::int8) || (kFp8 && format_.dtype == KvDtype::fp8);
  const bool scale_ok = !format_.quantized() || format_.scale_bytes() == sizeof(S);
  if (!element_ok || !scale_ok) wrong_type("rows", format_);
  const size_t rows_per_layer = size_t(rows_per_layer_);
  const size_t element_offset = size_t(layer) * rows_per_layer * size_t(shape_.head_dim) * sizeof(T);
  KvRows<T, S, Layout> rows;
  const KvStorage& s = storage();
  rows.k = reinterpret_cast<const T*>(s.k_bytes().data() + element_offset);
  rows.v = reinterpret_cast<const T*>(s.v_bytes().data() + element_offset);
  if (format_.quantized()) {
    rows.k_scales = reinterpret_cast<const S*>(s.k_scale_bytes().data()) + size_t(layer * k_scales_per_layer());
    rows.v_scales = reinterpret_cast<const S*>(s.v_scale_bytes().data()) + size_t(layer) * rows_per_layer;
  }
  rows.lengths = lengths_.data();
  if constexpr (std::is_same_v<Layout, PagedLayout>) {
    rows.layout = paged_layout();  // std::logic_error when contiguous
  } else {
    rows.layout = layout();  // std::logic_error when paged
  }
  rows.head_dim = shape_.head_dim;
  rows.per_channel = format_.per_channel();
  return rows;
}

/// @cond INTERNAL
#define INFERLAB_KV_ROWS(T, S)                                                            \
  template KvRows<T, S, ContiguousLayout> KvCache::rows<T, S, ContiguousLayout>(int64_t) const; \
  template KvRows<T, S, PagedLayout> KvCache::rows<T, S, PagedLayout>(int64_t) const;
INFERLAB_KV_ROWS(float, float)
INFERLAB_KV_ROWS(uint16_t, float)
INFERLAB_KV_ROWS(int8_t, float)
INFERLAB_KV_ROWS(int8_t, uint16_t)
INFERLAB_KV_ROWS(uint8_t, float)
#undef INFERLAB_KV_ROWS
/// @endcond

// ---- typed views of the storage ----

namespace {

// @p buffer's bytes as a span of T, when @p ok (the format stores T there); else std::logic_error
// naming @p accessor and the format.
template <class T, class Bytes>
std::span<T> view_as(Bytes bytes, bool ok, const char* accessor, const KvFormat& format) {
  if (!ok) wrong_type(accessor, format);
  return {reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T)};
}

}  // namespace

std::span<const float> KvCache::k_fp32() const {
  return view_as<const float>(storage().k_bytes(), dtype() == KvDtype::fp32, "k_fp32", format_);
}
std::span<const float> KvCache::v_fp32() const {
  return view_as<const float>(storage().v_bytes(), dtype() == KvDtype::fp32, "v_fp32", format_);
}
std::span<const uint16_t> KvCache::k_fp16() const {
  return view_as<const uint16_t>(storage().k_bytes(), dtype() == KvDtype::fp16, "k_fp16", format_);
}
std::span<const uint16_t> KvCache::v_fp16() const {
  return view_as<const uint16_t>(storage().v_bytes(), dtype() == KvDtype::fp16, "v_fp16", format_);
}
std::span<int8_t> KvCache::k_int8() {
  return view_as<int8_t>(storage().k_bytes(), dtype() == KvDtype::int8, "k_int8", format_);
}
std::span<int8_t> KvCache::v_int8() {
  return view_as<int8_t>(storage().v_bytes(), dtype() == KvDtype::int8, "v_int8", format_);
}
std::span<const int8_t> KvCache::k_int8() const {
  return view_as<const int8_t>(storage().k_bytes(), dtype() == KvDtype::int8, "k_int8", format_);
}
std::span<const int8_t> KvCache::v_int8() const {
  return view_as<const int8_t>(storage().v_bytes(), dtype() == KvDtype::int8, "v_int8", format_);
}
std::span<const uint8_t> KvCache::k_fp8() const {
  return view_as<const uint8_t>(storage().k_bytes(), dtype() == KvDtype::fp8, "k_fp8", format_);
}
std::span<const uint8_t> KvCache::v_fp8() const {
  return view_as<const uint8_t>(storage().v_bytes(), dtype() == KvDtype::fp8, "v_fp8", format_);
}
std::span<float> KvCache::k_scales() {
  return view_as<float>(storage().k_scale_bytes(), format_.scale_bytes() == 4, "k_scales", format_);
}
std::span<float> KvCache::v_scales() {
  return view_as<float>(storage().v_scale_bytes(), format_.scale_bytes() == 4, "v_scales", format_);
}
std::span<const float> KvCache::k_scales() const {
  return view_as<const float>(storage().k_scale_bytes(), format_.scale_bytes() == 4, "k_scales", format_);
}
std::span<const float> KvCache::v_scales() const {
  return view_as<const float>(storage().v_scale_bytes(), format_.scale_bytes() == 4, "v_scales", format_);
}
std::span<uint16_t> KvCache::k_scales_fp16() {
  return view_as<uint16_t>(storage().k_scale_bytes(), format_.scale_bytes() == 2, "k_scales_fp16", format_);
}
std::span<uint16_t> KvCache::v_scales_fp16() {
  return view_as<uint16_t>(storage().v_scale_bytes(), format_.scale_bytes() == 2, "v_scales_fp16", format_);
}
std::span<const uint16_t> KvCache::k_scales_fp16() const {
  return view_as<const uint16_t>(storage().k_scale_bytes(), format_.scale_bytes() == 2, "k_scales_fp16", format_);
}
std::span<const uint16_t> KvCache::v_scales_fp16() const {
  return view_as<const uint16_t>(storage().v_scale_bytes(), format_.scale_bytes() == 2, "v_scales_fp16", format_);
}

}  // namespace inferlab
