// Binary serialization for checkpoints: values appended to a byte buffer in the machine's
// order (x86-64: little endian; a checkpoint is read back on the kind of machine that wrote
// it), and read back with every length checked against what is left, so that a corrupt or
// hostile file gives an error naming it, never a huge allocation or a read past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "shellsim/errors.hpp"

namespace shellsim {

class ByteWriter {
 public:
  template <class T>
  requires std::is_trivially_copyable_v<T>
  void value(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  // A count (uint64) followed by the elements.
  template <class T>
  requires std::is_trivially_copyable_v<T>
  void array(std::span<const T> values) {
    value<uint64_t>(values.size());
    const auto* p = reinterpret_cast<const uint8_t*>(values.data());
    bytes_.insert(bytes_.end(), p, p + values.size_bytes());
  }
  template <class T>
  void array(const std::vector<T>& values) {
    array(std::span<const T>(values));
  }
  void string(const std::string& s) { array(std::span<const char>(s.data(), s.size())); }

  [[nodiscard]] const std::vector<uint8_t>& bytes() const { return bytes_; }
  [[nodiscard]] std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  // `source` names the data in errors ("out/checkpoint.bin").
  ByteReader(std::span<const uint8_t> bytes, std::string source)
      : bytes_(bytes), source_(std::move(source)) {}

  template <class T>
  requires std::is_trivially_copyable_v<T> T value(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return v;
  }
  template <class T>
  requires std::is_trivially_copyable_v<T> std::vector<T> array(const char* what) {
    const auto count = value<uint64_t>(what);
    if (count > (bytes_.size() - position_) / sizeof(T)) {
      fail(std::string(what) + ": " + std::to_string(count) + " elements do not fit in the " +
           std::to_string(bytes_.size() - position_) + " bytes left");
    }
    std::vector<T> values(static_cast<size_t>(count));
    if (count == 0) return values;  // data() may be null: no memcpy
    std::memcpy(values.data(), bytes_.data() + position_, count * sizeof(T));
    position_ += count * sizeof(T);
    return values;
  }
  std::string string(const char* what) {
    const std::vector<char> chars = array<char>(what);
    return {chars.begin(), chars.end()};
  }

  [[nodiscard]] bool atEnd() const { return position_ == bytes_.size(); }
  [[nodiscard]] size_t position() const { return position_; }
  [[nodiscard]] const std::string& source() const { return source_; }
  // Throws InputError "<source>: <message>".
  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(source_ + ": " + message);
  }

 private:
  void need(size_t count, const char* what) const {
    if (count > bytes_.size() - position_) {
      fail(std::string("truncated: ") + what + " needs " + std::to_string(count) +
           " bytes at byte " + std::to_string(position_) + ", " +
           std::to_string(bytes_.size() - position_) + " left");
    }
  }

  std::span<const uint8_t> bytes_;
  std::string source_;
  size_t position_ = 0;
};

// FNV-1a, 64 bit: the checksum of a checkpoint and the fingerprint of a simulation's set-up.
// Not cryptographic: it detects corruption and mix-ups, not tampering.
inline uint64_t fnv1a(std::span<const uint8_t> bytes, uint64_t hash = 1469598103934665603ULL) {
  for (const uint8_t b : bytes) {
    hash ^= b;
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace shellsim
