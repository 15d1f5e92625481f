// Helpers shared by the force benchmarks of the models.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "models/model.hpp"
#include "shellsim/parallel.hpp"

namespace shellsim::bench {

// Times model.addGradient at `positions` moved by up to `jitter` (m) per coordinate (fixed
// seed), with state.range(1) threads, into the caller's workspace as a body holds one (no
// allocation per evaluation).
inline void timeGradient(benchmark::State& state, const Model& model,
                         std::span<const double> positions, double jitter) {
  std::vector<double> x(positions.begin(), positions.end());
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-jitter, jitter);
  for (double& v : x) v += u(rng);
  std::vector<double> gradient(x.size());
  const ThreadLimit limit(static_cast<int>(state.range(1)));
  const std::unique_ptr<ModelWorkspace> workspace = model.makeWorkspace();
  for (auto _ : state) {
    std::fill(gradient.begin(), gradient.end(), 0.0);
    benchmark::DoNotOptimize(model.addGradient(x, gradient, workspace.get()));
    benchmark::ClobberMemory();
  }
}

// A counter of the time per element (ns) for `elements` per iteration.
inline benchmark::Counter nsPer(const benchmark::State& state, double elements) {
  return benchmark::Counter(elements * static_cast<double>(state.iterations()) * 1e-9,
                            benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace shellsim::bench
