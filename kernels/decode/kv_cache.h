#pragma once
/// @file kv_cache.h
/// The contiguous KV cache of chapter 03 (one layer), on the host.
///
/// Layout (row-major): K and V are each [batch][num_kv_heads][max_seq_len][head_dim]; sequence
/// b holds lengths[b] tokens in slots 0..lengths[b]-1 of every one of its KV heads. Memory for
/// max_seq_len tokens is reserved up front for every sequence (the "contiguous max-length
/// allocation" whose waste chapter 06 measures); slots at or past a sequence's length are
/// poisoned (NaN bits, 0xFF bytes) so that a kernel reading one of them produces NaN.
///
///     bytes = 2 (K and V) · batch · num_kv_heads · max_seq_len · head_dim · bytes_per_element
///
/// Prefill fills a sequence's first L slots; each decode step appends one token (K and V of
/// every KV head) per sequence at slot lengths[b] and increments the length. Appending to a
/// full sequence throws std::invalid_argument; nothing is ever written past max_seq_len.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/huge_pages.h"
#include "common/tensor.h"
#include "common/tolerance.h"

namespace inferlab {

/// The element type a KV cache stores (chapter 04 adds INT8 with scales).
enum class KvDtype {
  fp32,  ///< float
  fp16,  ///< IEEE half (stored on the host as its 16 bits; rounded to nearest even on write)
};

/// "fp32", "fp16".
std::string_view to_string(KvDtype dtype);
/// Parses "fp32" | "fp16"; throws std::invalid_argument naming @p text otherwise.
KvDtype parse_kv_dtype(std::string_view text);
/// Bytes per cached element: 4 (fp32), 2 (fp16).
size_t bytes_per_element(KvDtype dtype);
/// The precision (and so the test tolerance) of attention over a cache of @p dtype.
Precision precision_of(KvDtype dtype);

/// The sizes of a contiguous KV cache.
struct KvCacheShape {
  int64_t batch = 0;         ///< sequences
  int64_t num_kv_heads = 0;  ///< key/value heads per sequence
  int64_t max_seq_len = 0;   ///< capacity in tokens of every sequence
  int64_t head_dim = 0;      ///< d

  /// {batch, num_kv_heads, max_seq_len, head_dim}: the shape of K (and of V).
  Shape shape() const { return {batch, num_kv_heads, max_seq_len, head_dim}; }
  /// Elements of K (= of V).
  int64_t elements() const { return batch * num_kv_heads * max_seq_len * head_dim; }
  /// Flat index of element 0 of token @p token of KV head @p kv_head of sequence @p sequence.
  int64_t offset(int64_t sequence, int64_t kv_head, int64_t token) const {
    return ((sequence * num_kv_heads + kv_head) * max_seq_len + token) * head_dim;
  }
};

/// A contiguous KV cache on the host, fp32 or fp16. Device versions upload its bytes as they
/// are (kv_bytes()), so the poisoned tail travels to the device too.
class KvCache {
 public:
  /// An empty cache (every length 0, every slot poisoned). Throws std::invalid_argument naming
  /// the size that is not positive.
  KvCache(const KvCacheShape& shape, KvDtype dtype);

  /// The sizes.
  const KvCacheShape& shape() const { return shape_; }
  /// The stored element type.
  KvDtype dtype() const { return dtype_; }
  /// Tokens cached for every sequence (int32, as the device kernels read them).
  const std::vector<int32_t>& lengths() const { return lengths_; }
  /// Tokens cached for @p sequence.
  int64_t length(int64_t sequence) const;
  /// The longest length in the batch.
  int64_t max_length() const;
  /// Bytes of K (= of V): elements() · bytes_per_element(dtype).
  size_t bytes_per_tensor() const { return k_.size(); }

  /// Fills sequence @p sequence with the tokens of @p k and @p v, both
  /// [num_kv_heads, seq_len, head_dim]: its length becomes seq_len, and the slots past it are
  /// poisoned again. Throws std::invalid_argument when seq_len > max_seq_len or a shape differs.
  void prefill(int64_t sequence, const Tensor<float>& k, const Tensor<float>& v);

  /// Checks that one token can be appended to every sequence: @p k_new and @p v_new are
  /// [batch, num_kv_heads, head_dim] and no sequence is full. Throws std::invalid_argument
  /// naming the first full sequence ("lengths[b] = max_seq_len: ... is full") otherwise. Every
  /// append version calls this before it writes anything.
  void check_append(const Tensor<float>& k_new, const Tensor<float>& v_new) const;
  /// Increments every length by one: the last step of an append, after the new token's K and
  /// V were written at slot lengths[b] (by append() or by a device append kernel).
  void commit_append();
  /// The CPU append ("cpu/append"): check_append(), write each sequence's new K and V at slot
  /// lengths[b] (rounded to fp16 for an fp16 cache), commit_append().
  void append(const Tensor<float>& k_new, const Tensor<float>& v_new);

  /// Sets every length (each in [0, max_seq_len], else std::invalid_argument naming it) and
  /// poisons the slots past them; the tokens below them keep their values.
  void set_lengths(const std::vector<int64_t>& lengths);
  /// Writes 0xFF bytes (NaN) into every slot at or past its sequence's length.
  void poison_unused();

  /// Element (sequence, kv_head, token, c) of K as float (fp16 converted exactly).
  float key(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const;
  /// Element (sequence, kv_head, token, c) of V as float.
  float value(int64_t sequence, int64_t kv_head, int64_t token, int64_t c) const;
  /// The cached keys of @p sequence as [num_kv_heads, length, head_dim] floats.
  Tensor<float> keys(int64_t sequence) const;
  /// The cached values of @p sequence as [num_kv_heads, length, head_dim] floats.
  Tensor<float> values(int64_t sequence) const;

  /// K's storage as float; throws std::logic_error unless dtype() is fp32.
  const float* k_fp32() const;
  /// V's storage as float; throws std::logic_error unless dtype() is fp32.
  const float* v_fp32() const;
  /// K's storage as fp16 bits; throws std::logic_error unless dtype() is fp16.
  const uint16_t* k_fp16() const;
  /// V's storage as fp16 bits; throws std::logic_error unless dtype() is fp16.
  const uint16_t* v_fp16() const;
  /// K's raw bytes (bytes_per_tensor() of them), for uploads and device appends.
  std::byte* k_bytes() { return k_.data(); }
  /// V's raw bytes.
  std::byte* v_bytes() { return v_.data(); }
  /// K's raw bytes.
  const std::byte* k_bytes() const { return k_.data(); }
  /// V's raw bytes.
  const std::byte* v_bytes() const { return v_.data(); }

 private:
  void store(HugePageBuffer<std::byte>& to, int64_t index, float x);
  float load(const HugePageBuffer<std::byte>& from, int64_t index) const;
  void check_sequence(int64_t sequence) const;

  KvCacheShape shape_;
  KvDtype dtype_;
  std::vector<int32_t> lengths_;
  HugePageBuffer<std::byte> k_, v_;
};

/// A cache of @p dtype holding external data: @p k and @p v are full caches
/// [batch, num_kv_heads, max_seq_len, head_dim] (as .npy files store them) and @p lengths the
/// tokens of each sequence. Only the first lengths[b] tokens are copied; the rest is poisoned.
/// Throws std::invalid_argument naming k, v or lengths[b] when shapes or lengths are wrong.
KvCache make_kv_cache(const Tensor<float>& k, const Tensor<float>& v, const std::vector<int64_t>& lengths,
                      KvDtype dtype);

}  // namespace inferlab
