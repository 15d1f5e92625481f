// Limiting the number of worker threads shellsim uses.
#pragma once

#include <memory>

namespace shellsim {

// While alive, shellsim uses at most `threads` threads (0: all cores). Results do not
// depend on the count: every parallel loop is deterministic (DESIGN.md principle 5).
class ThreadLimit {
 public:
  explicit ThreadLimit(int threads);
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;
  ~ThreadLimit();

  // Threads available to shellsim right now.
  [[nodiscard]] static int current();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shellsim
