// A toy model that changes its node count as it runs: the smallest test of the world's
// topology edits (models/model.hpp, TopologyEdit; dynamics/world.hpp, applyTopologyEdit).
//
// A chain of springs in space. Nodes 0..n-1 (positions (n, 3), m); spring s joins nodes
// (a_s, b_s) with rest length L_s, m, and stiffness k, N/m:
//     E = sum_s k/2 (l_s - L_s)^2,   l_s = |x_b - x_a|
//     dE/dx_b = k (l - L) u = -dE/dx_a,  u = (x_b - x_a) / l
//     d2E/dx_b2 = k [(1 - L/l) I + (L/l) u u^T] = K_s;  blocks (a,a), (b,b): K_s; (a,b), (b,a):
//     -K_s
// Each spring carries mass mu, half at each end: m_i = mu/2 * (springs at i).
// Fracture by a node split: after a step, the spring with the largest strain above
// `splitStrain` whose first node a has another spring breaks off: a copy of a is inserted
// right after a (index a + 1, later nodes renumbered by one), at a's position and velocity,
// and takes this spring, so both copies keep mu/2 per spring: mass and momentum are
// conserved. At most one split per step.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "core/byte_stream.hpp"
#include "dynamics/world.hpp"
#include "io/json_fields.hpp"
#include "models/model.hpp"
#include "models/registry.hpp"
#include "shellsim/errors.hpp"

namespace shellsim::testing {

class SplittingChain : public Model {
 public:
  struct Topology {
    std::vector<int32_t> springs;  // (nSprings, 2)
    std::vector<double> rest;      // (nSprings), m
    int32_t nodes = 0;
    uint64_t version = 0;
    bool operator==(const Topology&) const = default;
  };

  // A straight chain of `nodes` nodes from `positions` (nodes, 3).
  SplittingChain(std::span<const double> positions, double stiffness, double springMass,
                 double splitStrain)
      : k_(stiffness), mu_(springMass), splitStrain_(splitStrain) {
    topology_.nodes = static_cast<int32_t>(positions.size() / 3);
    for (int32_t i = 0; i + 1 < topology_.nodes; ++i) {
      topology_.springs.insert(topology_.springs.end(), {i, i + 1});
      topology_.rest.push_back(length(positions, i, i + 1));
    }
    updateMasses();
  }

  [[nodiscard]] std::string name() const override { return "splitting_chain"; }
  [[nodiscard]] int32_t nodeCount() const override { return topology_.nodes; }
  [[nodiscard]] int64_t elementCount() const override {
    return static_cast<int64_t>(topology_.rest.size());
  }
  [[nodiscard]] std::span<const double> nodeMasses() const override { return masses_; }
  [[nodiscard]] bool changesNodeCount() const override { return true; }
  [[nodiscard]] uint64_t topologyVersion() const override { return topology_.version; }

  using Model::addGradient;
  using Model::energy;
  using Model::updateInelastic;
  [[nodiscard]] EnergyParts energy(std::span<const double> x, ModelWorkspace*) const override {
    EnergyParts e;
    for (size_t s = 0; s < topology_.rest.size(); ++s) {
      const double stretch = length(x, a(s), b(s)) - topology_.rest[s];
      e.stretching += 0.5 * k_ * stretch * stretch;
    }
    return e;
  }
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                          ModelWorkspace*) const override {
    for (size_t s = 0; s < topology_.rest.size(); ++s) {
      const double l = length(x, a(s), b(s));
      for (int c = 0; c < 3; ++c) {
        const double g = k_ * (l - topology_.rest[s]) * (coord(x, b(s), c) - coord(x, a(s), c)) / l;
        gradient[3 * static_cast<size_t>(b(s)) + c] += g;
        gradient[3 * static_cast<size_t>(a(s)) + c] -= g;
      }
    }
    return energy(x);
  }
  [[nodiscard]] std::vector<int32_t> hessianBlockNodes() const override {
    std::vector<int32_t> pairs;
    for (size_t s = 0; s < topology_.rest.size(); ++s) {
      pairs.insert(pairs.end(), {a(s), a(s), b(s), b(s), a(s), b(s), b(s), a(s)});
    }
    return pairs;
  }
  bool hessianBlocks(std::span<const double> x, std::span<double> values) const override {
    for (size_t s = 0; s < topology_.rest.size(); ++s) {
      const double l = length(x, a(s), b(s));
      const double ratio = topology_.rest[s] / l;
      double u[3];
      for (int c = 0; c < 3; ++c) u[c] = (coord(x, b(s), c) - coord(x, a(s), c)) / l;
      for (int block = 0; block < 4; ++block) {
        const double sign = block < 2 ? 1.0 : -1.0;
        for (int i = 0; i < 3; ++i) {
          for (int j = 0; j < 3; ++j) {
            values[36 * s + 9 * static_cast<size_t>(block) + static_cast<size_t>(3 * i + j)] =
                sign * k_ * ((i == j ? 1 - ratio : 0.0) + ratio * u[i] * u[j]);
          }
        }
      }
    }
    return true;
  }
  [[nodiscard]] double stableTimeStep() const override {
    return 0.5 * std::sqrt(*std::min_element(masses_.begin(), masses_.end()) / k_);
  }
  [[nodiscard]] Geometry surface(std::span<const double> x) const override {
    Geometry points;
    points.positions.assign(x.begin(), x.end());
    return points;
  }
  [[nodiscard]] std::vector<int32_t> nodePieces() const override {
    std::vector<int32_t> parent(static_cast<size_t>(topology_.nodes));
    std::iota(parent.begin(), parent.end(), 0);
    const auto find = [&](int32_t i) {
      while (parent[static_cast<size_t>(i)] != i) i = parent[static_cast<size_t>(i)];
      return i;
    };
    for (size_t s = 0; s < topology_.rest.size(); ++s) {
      const int32_t ra = find(a(s)), rb = find(b(s));
      parent[static_cast<size_t>(std::max(ra, rb))] = std::min(ra, rb);
    }
    std::vector<int32_t> label(parent.size(), -1), pieces(parent.size());
    int32_t next = 0;
    for (size_t i = 0; i < parent.size(); ++i) {
      const auto root = static_cast<size_t>(find(static_cast<int32_t>(i)));
      if (label[root] < 0) label[root] = next++;
      pieces[i] = label[root];
    }
    return pieces;
  }

  InelasticReport updateInelastic(std::span<const double> x, double dt, ModelWorkspace*) override {
    (void)dt;
    InelasticReport report;
    int64_t worst = -1;
    double worstStrain = splitStrain_;
    for (size_t s = 0; s < topology_.rest.size(); ++s) {
      const double strain = length(x, a(s), b(s)) / topology_.rest[s] - 1;
      if (strain > worstStrain && springsAt(a(s)) > 1) {
        worst = static_cast<int64_t>(s);
        worstStrain = strain;
      }
    }
    if (worst >= 0) report.edit = split(static_cast<size_t>(worst));
    return report;
  }

  // Splits spring s's first node (see the header); returns the edit.
  TopologyEdit split(size_t s) {
    const int32_t parent = a(s);
    TopologyEdit edit;
    edit.sourceOffsets.push_back(0);
    for (int32_t i = 0; i < topology_.nodes; ++i) {
      edit.sourceNodes.push_back(i);
      edit.sourceWeights.push_back(1.0);
      edit.sourceOffsets.push_back(static_cast<int32_t>(edit.sourceNodes.size()));
      if (i == parent) {  // the copy, right after its parent
        edit.sourceNodes.push_back(i);
        edit.sourceWeights.push_back(1.0);
        edit.sourceOffsets.push_back(static_cast<int32_t>(edit.sourceNodes.size()));
      }
    }
    for (int32_t& node : topology_.springs) {
      if (node > parent) ++node;
    }
    topology_.springs[2 * s] = parent + 1;
    ++topology_.nodes;
    ++topology_.version;
    updateMasses();
    return edit;
  }

  // The evolving state: the whole topology (it changes with every split).
  void listStateFields(StateFields& fields) override {
    fields.add("springs", &topology_.springs);
    fields.add("rest_lengths", &topology_.rest, StateShape::kPerElement);
    fields.add("nodes", &topology_.nodes);
    fields.add("version", &topology_.version);
  }
  void stateAssigned() override {
    // Every node has a spring (a split leaves one at each copy): at most 2 per spring.
    const Topology& t = topology_;
    if (t.springs.size() != 2 * t.rest.size() || t.nodes < 1 ||
        static_cast<size_t>(t.nodes) > t.springs.size() ||
        std::any_of(t.springs.begin(), t.springs.end(),
                    [&](int32_t i) { return i < 0 || i >= t.nodes; })) {
      throw InputError("splitting_chain: springs out of range");
    }
    updateMasses();
  }

  [[nodiscard]] const Topology& topology() const { return topology_; }

 private:
  [[nodiscard]] int32_t a(size_t s) const { return topology_.springs[2 * s]; }
  [[nodiscard]] int32_t b(size_t s) const { return topology_.springs[2 * s + 1]; }
  static double coord(std::span<const double> x, int32_t node, int c) {
    return x[3 * static_cast<size_t>(node) + static_cast<size_t>(c)];
  }
  static double length(std::span<const double> x, int32_t i, int32_t j) {
    double sum = 0;
    for (int c = 0; c < 3; ++c) sum += std::pow(coord(x, j, c) - coord(x, i, c), 2);
    return std::sqrt(sum);
  }
  [[nodiscard]] int springsAt(int32_t node) const {
    return static_cast<int>(std::count(topology_.springs.begin(), topology_.springs.end(), node));
  }
  void updateMasses() {
    masses_.assign(static_cast<size_t>(topology_.nodes), 0.0);
    for (const int32_t node : topology_.springs) masses_[static_cast<size_t>(node)] += 0.5 * mu_;
  }

  double k_, mu_, splitStrain_;
  Topology topology_;
  std::vector<double> masses_;  // (nNodes), kg
};

// The model's options: a scene body's "splitting_chain": {...}, or
// body.options<SplittingChainDef>().
struct SplittingChainDef {
  static constexpr std::string_view kModel = "splitting_chain";
  double stiffness = 50;      // k, N/m
  double springMass = 0.01;   // mu, kg
  double splitStrain = 0.05;  // a spring stretched past it splits its first node
  bool operator==(const SplittingChainDef&) const = default;
};

// Registers the chain as model "splitting_chain" (models/registry.hpp), once: what a new
// model adds besides its own code. Its nodes are the geometry's vertices or points, in
// order, joined one to the next.
inline void registerSplittingChain() {
  if (findModel(SplittingChainDef::kModel) != nullptr) return;
  using json_fields::FieldSpec;
  using json_fields::ObjectSpec;
  using json_fields::Range;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
  static constexpr FieldSpec kFields[] = {
      {.key = "stiffness",
       .unit = "N/m",
       .number = 50,
       .range = Range::above(0),
       .meaning = "k of every spring."},
      {.key = "spring_mass",
       .unit = "kg",
       .number = 0.01,
       .range = Range::above(0),
       .meaning = "Mass of every spring, half at each end."},
      {.key = "split_strain",
       .number = 0.05,
       .range = Range::above(0),
       .meaning = "A spring stretched past this strain splits its first node."},
  };
#pragma GCC diagnostic pop
  static constexpr ObjectSpec kSpec{
      "splitting_chain", "The test model that splits nodes.", kFields, {}};
  registerModel(
      {.name = SplittingChainDef::kModel,
       .meaning = "Options of a body whose model is `splitting_chain`.",
       .options = &kSpec,
       .nestedOptions = {},
       .readOptions =
           [](json_fields::ObjectReader& r, json_fields::Problems& problems, BodyDef& body) {
             (void)problems;
             auto& options = body.options<SplittingChainDef>();
             options.stiffness = r.number("stiffness");
             options.springMass = r.number("spring_mass");
             options.splitStrain = r.number("split_strain");
             r.finish();
           },
       .writeOptions =
           [](const BodyDef& body) {
             const auto& options = body.options<SplittingChainDef>();
             return json_fields::Json{{"stiffness", options.stiffness},
                                      {"spring_mass", options.springMass},
                                      {"split_strain", options.splitStrain}};
           },
       .discretize =
           [](const BodyDef& body, Geometry geometry, std::vector<std::string>& warnings,
              const std::string& label) {
             (void)warnings;
             (void)label;
             if (geometry.vertexCount() < 2) throw InputError("a chain needs 2 points or more");
             const auto& options = body.options<SplittingChainDef>();
             Discretization d;
             d.model = std::make_unique<SplittingChain>(geometry.positions, options.stiffness,
                                                        options.springMass, options.splitStrain);
             d.nodeOfVertex = identityMap(geometry.vertexCount());
             d.nodePositions = std::move(geometry.positions);
             return d;
           }});
}

constexpr int32_t kChainNodes = 6;
constexpr double kChainSpacing = 0.1;       // m
constexpr double kChainStiffness = 50.0;    // N/m
constexpr double kChainSpringMass = 0.01;   // kg
constexpr double kChainSplitStrain = 0.05;  // a spring stretched 5 % splits its first node

// A body: the chain along x at rest, moving apart (velocity growing along it) and
// drifting, so that its springs stretch past the split strain within a few tenths of a
// second; `stretch` > 1 starts it stretched by that factor.
inline Body splittingChainBody(double stretch = 1.0) {
  std::vector<double> rest(3 * kChainNodes, 0.0);
  for (int32_t i = 0; i < kChainNodes; ++i) rest[3 * static_cast<size_t>(i)] = kChainSpacing * i;
  Body body;
  body.name = "chain";
  body.model =
      std::make_unique<SplittingChain>(rest, kChainStiffness, kChainSpringMass, kChainSplitStrain);
  body.positions = rest;
  for (double& x : body.positions) x *= stretch;
  body.velocities.resize(body.positions.size());
  for (int32_t i = 0; i < kChainNodes; ++i) {
    const auto row = 3 * static_cast<size_t>(i);
    body.velocities[row] = 0.3 + 0.4 * (i - 2.5);
    body.velocities[row + 1] = 0.2 - 0.05 * i;
    body.velocities[row + 2] = 0.01 * i;
  }
  body.accelerations.assign(body.positions.size(), 0.0);
  body.pinned.assign(kChainNodes, 0);
  body.nodeOfInputVertex.resize(kChainNodes);
  std::iota(body.nodeOfInputVertex.begin(), body.nodeOfInputVertex.end(), 0);
  return body;
}

}  // namespace shellsim::testing
