// A fresh folder for one test, named after the test and removed at its end; shared by the
// test executables that write files. (Not in shellsim::testing: these tests use gtest's
// `testing::` unqualified inside namespace shellsim.)
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace shellsim::testfiles {

class TempFolder {
 public:
  // `prefix` keeps the folders of different test executables apart.
  explicit TempFolder(const std::string& prefix) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            (prefix + info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  // Writes `text` to path() / relative, creating folders on the way.
  void write(const std::filesystem::path& relative, const std::string& text) const {
    std::filesystem::create_directories((path_ / relative).parent_path());
    std::ofstream(path_ / relative, std::ios::binary) << text;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace shellsim::testfiles
