#pragma once
// Given host plumbing of the chapter-03 and -04 exercises (nothing to write here): the
// per-sequence lengths checked (checked_max_length) and copied to the device as the kernels read
// them (upload_lengths). The device buffers themselves, check_cuda and blocks_for come from
// common/simt/device_buffer.h. Compiled for sim and cuda like the .cu files that include it, so
// everything lives in namespace inferlab::INFERLAB_BACKEND_NS::student.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

// A device copy of the lengths: one int per sequence, as the kernels read them.
inline DeviceBuffer<int> upload_lengths(const std::vector<int32_t>& lengths) {
  static_assert(sizeof(int) == sizeof(int32_t), "the kernels read the lengths as int");
  DeviceBuffer<int> device(lengths.size());
  device.upload(reinterpret_cast<const int*>(lengths.data()));
  return device;
}

// Checks a decode step's lengths — one per sequence (@p batch of them), each in [1, @p max_seq_len]
// — and returns the longest; throws std::invalid_argument naming the bad one otherwise.
inline int64_t checked_max_length(const std::vector<int32_t>& lengths, int64_t batch, int64_t max_seq_len) {
  require(int64_t(lengths.size()) == batch, "lengths.size()", lengths.size(),
          "must equal batch = " + std::to_string(batch));
  int64_t max_length = 0;
  for (int64_t b = 0; b < batch; ++b) {
    require(lengths[size_t(b)] >= 1 && lengths[size_t(b)] <= max_seq_len, "lengths[" + std::to_string(b) + "]",
            lengths[size_t(b)],
            "must be in [1, max_seq_len = " + std::to_string(max_seq_len) +
                "] (append the new token's K and V before decoding it)");
    max_length = std::max<int64_t>(max_length, lengths[size_t(b)]);
  }
  return max_length;
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
