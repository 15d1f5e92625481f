// Helpers shared by the reader and writer tests: parsing from strings, scratch folders,
// error assertions and a tiny PLY encoder for all three encodings.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "temp_folder.hpp"

namespace shellsim::test {

inline Geometry parseText(GeometryFormat format, std::string_view text, const std::string& name) {
  return parseGeometry(format, std::as_bytes(std::span(text.data(), text.size())), name);
}

// A fresh folder per test (testfiles::TempFolder), with the readers' tests' file helpers.
class ScratchDir : public testfiles::TempFolder {
 public:
  ScratchDir() : TempFolder("shellsim_io_") {}

  [[nodiscard]] std::filesystem::path file(const std::string& name) const { return path() / name; }

  std::filesystem::path write(const std::string& name, std::string_view bytes) const {
    const auto p = file(name);
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }
};

inline std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `body`, which must throw an error of type E whose message holds every one of
// `parts`; returns the message for further checks.
template <class E>
std::string expectError(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
  } catch (const E& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "message '" << message << "' lacks '" << part << "'";
    }
    return message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception thrown";
  return {};
}

// Encodes PLY bodies value by value in one of the three encodings, so that a test can
// state a file once and check that every encoding reads the same.
enum class PlyEncoding { kAscii, kLittle, kBig };

inline const char* encodingName(PlyEncoding e) {
  switch (e) {
    case PlyEncoding::kAscii: return "ascii";
    case PlyEncoding::kLittle: return "binary_little_endian";
    case PlyEncoding::kBig: return "binary_big_endian";
  }
  return "";
}

class PlyBody {
 public:
  explicit PlyBody(PlyEncoding e) : encoding_(e) {}

  template <class T>
  PlyBody& put(T value) {
    if (encoding_ == PlyEncoding::kAscii) {
      if constexpr (sizeof(T) == 1) {
        text_ += std::to_string(static_cast<int>(value));
      } else {
        text_ += std::to_string(value);
      }
      text_ += ' ';
    } else {
      auto raw = std::bit_cast<std::array<char, sizeof(T)>>(value);
      const bool big = encoding_ == PlyEncoding::kBig;
      if (big != (std::endian::native == std::endian::big)) std::reverse(raw.begin(), raw.end());
      text_.append(raw.data(), raw.size());
    }
    return *this;
  }
  PlyBody& endLine() {
    if (encoding_ == PlyEncoding::kAscii) text_ += '\n';
    return *this;
  }
  [[nodiscard]] const std::string& bytes() const { return text_; }

 private:
  PlyEncoding encoding_;
  std::string text_;
};

inline std::string plyHeader(PlyEncoding e, const std::string& elements) {
  return std::string("ply\nformat ") + encodingName(e) + " 1.0\n" + elements + "end_header\n";
}

}  // namespace shellsim::test
