#pragma once
/// @file tensor.h
/// A host tensor: a shape and a contiguous, row-major (C order) buffer. Shapes are checked on
/// construction and by check_shape(); element access is unchecked (the asan preset catches
/// out-of-bounds accesses).

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"

namespace inferlab {

/// A tensor's shape: one extent per dimension, outermost first.
using Shape = std::vector<int64_t>;

/// "[2, 31, 64]": a shape as printed in messages.
std::string to_string(const Shape& shape);

/// The number of elements of @p shape; throws std::invalid_argument on a negative extent or
/// an element count that overflows.
int64_t element_count(const Shape& shape);

/// A row-major host tensor owning its elements.
template <class T>
class Tensor {
 public:
  /// An empty tensor of rank 0 and no elements.
  Tensor() = default;
  /// A tensor of @p shape, value-initialised (zeros).
  explicit Tensor(Shape shape) : shape_(std::move(shape)), data_(static_cast<size_t>(element_count(shape_))) {}
  /// A tensor of @p shape filled with @p value.
  Tensor(Shape shape, T value)
      : shape_(std::move(shape)), data_(static_cast<size_t>(element_count(shape_)), value) {}
  /// A tensor of @p shape holding @p values (whose size must match).
  Tensor(Shape shape, std::vector<T> values) : shape_(std::move(shape)), data_(std::move(values)) {
    require(static_cast<int64_t>(data_.size()) == element_count(shape_), "values.size()", data_.size(),
            "must equal the element count of shape " + to_string(shape_));
  }

  /// The shape.
  const Shape& shape() const { return shape_; }
  /// The number of dimensions.
  int rank() const { return static_cast<int>(shape_.size()); }
  /// The extent of dimension @p i (negative counts from the end).
  int64_t dim(int i) const { return shape_.at(static_cast<size_t>(i < 0 ? rank() + i : i)); }
  /// The number of elements.
  int64_t size() const { return static_cast<int64_t>(data_.size()); }

  /// Pointer to the first element.
  T* data() { return data_.data(); }
  /// Pointer to the first element.
  const T* data() const { return data_.data(); }
  /// All elements, in C order.
  std::span<T> span() { return data_; }
  /// All elements, in C order.
  std::span<const T> span() const { return data_; }
  /// Element @p i of the flat buffer.
  T& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  /// Element @p i of the flat buffer.
  const T& operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }

  /// Sets every element to @p value.
  void fill(T value) { std::fill(data_.begin(), data_.end(), value); }
  /// Gives the same elements the shape @p shape (same element count; e.g. [T, H, d] → [T, H·d]).
  /// Throws std::invalid_argument when the counts differ.
  void reshape(Shape shape) {
    require(element_count(shape) == size(), "reshape to " + to_string(shape), size(), "elements must be kept");
    shape_ = std::move(shape);
  }

  /// Fills the tensor with a value no correct kernel writes (NaN for floating point, 0x7F..
  /// for integers), so an element a kernel forgot to write fails the comparison.
  void poison() {
    if constexpr (std::numeric_limits<T>::has_quiet_NaN) {
      fill(std::numeric_limits<T>::quiet_NaN());
    } else {
      fill(std::numeric_limits<T>::max());
    }
  }

 private:
  Shape shape_;
  std::vector<T> data_;
};

/// Throws std::invalid_argument unless @p tensor has rank @p rank; @p name names it.
template <class T>
void check_rank(const Tensor<T>& tensor, int rank, std::string_view name) {
  if (tensor.rank() == rank) return;  // the message is built only for a bad tensor
  require(false, std::string(name) + ".shape", to_string(tensor.shape()),
          "must have " + std::to_string(rank) + " dimensions");
}

/// Throws std::invalid_argument unless @p tensor has exactly @p expected shape.
template <class T>
void check_shape(const Tensor<T>& tensor, const Shape& expected, std::string_view name) {
  if (tensor.shape() == expected) return;  // the message is built only for a bad tensor
  require(false, std::string(name) + ".shape", to_string(tensor.shape()), "must be " + to_string(expected));
}

/// A copy of @p from with every element converted to @p To.
template <class To, class From>
Tensor<To> convert(const Tensor<From>& from) {
  std::vector<To> values(static_cast<size_t>(from.size()));
  for (int64_t i = 0; i < from.size(); ++i) values[static_cast<size_t>(i)] = static_cast<To>(from[i]);
  return Tensor<To>(from.shape(), std::move(values));
}

}  // namespace inferlab
