// A buffer of doubles that ends where an unreadable page begins, so that a test reading one
// value past its end faults instead of passing by luck (the batched kernels' 256-bit loads
// read one value past each node).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <stdexcept>

namespace shellsim {

class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t count) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = count * sizeof(double);
    dataPages_ = (bytes + page - 1) / page * page;
    size_ = dataPages_ + page;
    void* base = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<char*>(base);
    if (mprotect(base_ + dataPages_, page, PROT_NONE) != 0) {
      munmap(base_, size_);
      throw std::runtime_error("mprotect failed");
    }
    data_ = reinterpret_cast<double*>(base_ + dataPages_ - bytes);
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() { munmap(base_, size_); }

  [[nodiscard]] double* data() const { return data_; }

 private:
  char* base_ = nullptr;
  double* data_ = nullptr;
  size_t dataPages_ = 0, size_ = 0;
};

}  // namespace shellsim
