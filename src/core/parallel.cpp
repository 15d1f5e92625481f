#include "shellsim/parallel.hpp"

#include <tbb/global_control.h>

#include <optional>

namespace shellsim {

struct ThreadLimit::Impl {
  std::optional<tbb::global_control> control;
};

ThreadLimit::ThreadLimit(int threads) : impl_(std::make_unique<Impl>()) {
  if (threads > 0) {
    impl_->control.emplace(tbb::global_control::max_allowed_parallelism,
                           static_cast<size_t>(threads));
  }
}

ThreadLimit::~ThreadLimit() = default;

int ThreadLimit::current() {
  return static_cast<int>(
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

}  // namespace shellsim
