// The energy contract every model offers the stepper (DESIGN.md principle 1).
//
// Degrees of freedom: node positions, a flat array of shape (nNodes, 3), metres.
// A model owns its rest state and topology; the stepper owns positions and velocities.
#pragma once

#include <Eigen/SparseCore>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/crack.hpp"
#include "models/model_state.hpp"
#include "shellsim/geometry.hpp"

namespace shellsim {

// Energies of one model, J, split by kind for the run summary.
struct EnergyParts {
  double stretching = 0;
  double bending = 0;
  [[nodiscard]] double total() const { return stretching + bending; }
};

// A change of a body's nodes and elements made by an inelastic update (fracture that
// duplicates vertices, vertex splits, merges, cuts), as one event: the model has already
// changed itself; the world applies the same change to every per-node array it owns
// (dynamics/world.hpp, applyTopologyEdit) and the implicit solver rebuilds its pattern
// (the model bumps Model::topologyVersion).
//
// Nodes. Empty sourceOffsets: the nodes did not change. Otherwise new node i (of
// nodeCount() = sourceOffsets.size() - 1, Model::nodeCount() after the edit) is made from
// the old nodes sourceNodes[k], k in [sourceOffsets[i], sourceOffsets[i + 1]), with weights
// sourceWeights[k] (positive, summing to 1): position x_i = sum_k w_k x_k, velocity
// v_i = sum_k w_k v_k. An old node that no new node names is removed.
//   - renumbering: one source of weight 1 each;
//   - split (a node duplicated along a crack): every copy has the parent as its one source,
//     so position and velocity are the parent's; the model divides the parent's mass among
//     the copies, so mass and momentum are conserved exactly;
//   - merge: one new node whose sources are the merged nodes with weights m_k / sum m, and
//     mass sum m: mass and momentum conserved (kinetic energy is lost, as in any inelastic
//     collision of the merged nodes).
// Cuts. Surfaces that separate the body from now on, in rest space (wicke2005 sec. 7.2,
// the crack discs of the fiber model): an embedded surface rebinds across them.
struct TopologyEdit {
  std::vector<int32_t> sourceOffsets;  // (nNewNodes + 1), or empty: nodes unchanged
  std::vector<int32_t> sourceNodes;    // (nSources), old node indices
  std::vector<double> sourceWeights;   // (nSources), sum 1 per new node
  // (nNewNodes, 3), m, or empty: moved by this after the blend (the world moves free nodes
  // only: a pinned node stays on its path, a rigid fragment's node with its fragment).
  std::vector<double> displacements;
  std::vector<CrackDisc> cuts;  // new cuts, rest space
  int64_t elementsAdded = 0;    // for the run's statistics
  int64_t elementsRemoved = 0;

  [[nodiscard]] bool changesNodes() const { return !sourceOffsets.empty(); }
  [[nodiscard]] bool empty() const {
    return !changesNodes() && cuts.empty() && elementsAdded == 0 && elementsRemoved == 0;
  }
  [[nodiscard]] int32_t nodeCount() const {
    return changesNodes() ? static_cast<int32_t>(sourceOffsets.size() - 1) : 0;
  }
};

// What one inelastic update (plasticity, fracture) changed.
struct InelasticReport {
  int64_t yieldingElements = 0;  // elements whose rest state flowed this step
  int64_t brokenElements = 0;    // elements that broke this step
  TopologyEdit edit;             // nodes, elements and cuts changed this step, if any
};

// A model's verdict on a proposed step (Model::inspectStep): accepted, or rejected with
// the reason, in words, for the run's warnings.
struct StepVerdict {
  bool accepted = true;
  std::string reason;  // why it was rejected; empty when accepted
  // A rejection that only asks to resolve an event in time (gingold2004 section 4.1: large
  // force changes, fracture events): at the deepest split the step is accepted instead of
  // failing the run (the paper's k > k_max).
  bool acceptAtFinest = false;
  // [ours] The cause lasts over many steps (plastic flow, not an event): the following steps
  // start at the split that resolved it instead of proposing the whole step again
  // (step_pipeline.hpp).
  bool sustained = false;
};

// Scratch of a model's energy passes, owned by whoever evaluates the model (a body:
// Body::workspace), so that energy and gradient are pure functions of (model, positions):
// no `mutable` members, and two workspaces let two threads evaluate one model at once. A
// workspace also carries what the last gradient pass measured for updateInelastic (the
// fiber model's fiber lengths and angles), as an explicit input instead of a member. A
// model resizes what it needs on use, so one workspace serves it across topology edits.
class ModelWorkspace {
 public:
  virtual ~ModelWorkspace() = default;
};

class Model {
 public:
  Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  virtual ~Model() = default;

  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual int32_t nodeCount() const = 0;
  [[nodiscard]] virtual int64_t elementCount() const = 0;

  // Lumped node masses, kg, shape (nNodes).
  [[nodiscard]] virtual std::span<const double> nodeMasses() const = 0;

  // Updates state that is held fixed while the energy is differentiated (for example
  // reference normals that orient a curvature sign). The stepper calls it once before each
  // force evaluation; energy() and addGradient() are exact derivatives of each other for
  // the state last prepared. Returns true if the state changed, i.e. values computed
  // before the call (an energy or gradient at x) are stale; a model without such state
  // returns false.
  virtual bool prepare(std::span<const double> x) {
    (void)x;
    return false;
  }

  // A workspace for this model's passes, or null when it needs none.
  [[nodiscard]] virtual std::unique_ptr<ModelWorkspace> makeWorkspace() const { return nullptr; }

  // Internal energy at positions x, J. `workspace`: one made by makeWorkspace (null only
  // for a model that makes none).
  [[nodiscard]] virtual EnergyParts energy(std::span<const double> x,
                                           ModelWorkspace* workspace) const = 0;

  // gradient += dE/dx (shape (nNodes, 3)); returns the energy. The internal forces are
  // the negative gradient. Deterministic for any thread count.
  virtual EnergyParts addGradient(std::span<const double> x, std::span<double> gradient,
                                  ModelWorkspace* workspace) const = 0;

  // The same with a workspace made for the call (tests and tools; the stepper passes the
  // body's, which saves the allocation and keeps what updateInelastic reads).
  [[nodiscard]] EnergyParts energy(std::span<const double> x) const {
    const std::unique_ptr<ModelWorkspace> workspace = makeWorkspace();
    return energy(x, workspace.get());
  }
  EnergyParts addGradient(std::span<const double> x, std::span<double> gradient) const {
    const std::unique_ptr<ModelWorkspace> workspace = makeWorkspace();
    return addGradient(x, gradient, workspace.get());
  }

  // The Hessian d2E/dx2 as a sum of 3x3 node blocks whose layout is fixed while
  // topologyVersion() is unchanged (implicit integration assembles it once per topology,
  // dynamics/implicit.cpp): hessianBlockNodes() lists the (row node, column node) of every
  // block, shape (nBlocks, 2), a pair possibly repeated (repeats are summed);
  // hessianBlocks() writes their values at x, shape (nBlocks, 3, 3) row-major, in that
  // order. A model without a Hessian returns an empty list and false.
  [[nodiscard]] virtual std::vector<int32_t> hessianBlockNodes() const { return {}; }
  virtual bool hessianBlocks(std::span<const double> x, std::span<double> values) const {
    (void)x;
    (void)values;
    return false;
  }

  // Appends the Hessian at x as triplets (row, col, value) over 3*nNodes dofs, one per
  // entry of every block (tests and tools; the integrators use the blocks). Returns false,
  // appending nothing, for a model without a Hessian.
  bool addHessian(std::span<const double> x, std::vector<Eigen::Triplet<double>>& triplets) const {
    const std::vector<int32_t> pairs = hessianBlockNodes();
    if (pairs.empty()) return false;
    std::vector<double> values(pairs.size() / 2 * 9);
    if (!hessianBlocks(x, values)) return false;
    triplets.reserve(triplets.size() + values.size());
    for (size_t block = 0; block < pairs.size() / 2; ++block) {
      const double* h = &values[9 * block];
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
          triplets.emplace_back(3 * pairs[2 * block] + i, 3 * pairs[2 * block + 1] + j,
                                h[3 * i + j]);
        }
      }
    }
    return true;
  }

  // An estimate of the largest stable explicit (velocity Verlet) time step, s.
  [[nodiscard]] virtual double stableTimeStep() const = 0;

  // The surface to write as a frame for positions x (shares the model's topology).
  [[nodiscard]] virtual Geometry surface(std::span<const double> x) const = 0;

  // The nodes the world moves itself (pinned, or riding a rigid fragment), (nNodes) flags, as
  // of the next updateInelastic: a model that moves nodes in a topology edit
  // (TopologyEdit::displacements) leaves them where they are. The world sets it before every
  // update; a model that moves no nodes ignores it.
  virtual void setWorldMovedNodes(std::span<const uint8_t> moved) { (void)moved; }

  // Plasticity and fracture after an accepted step of length dt that ended at positions x
  // (DESIGN.md: "forces -> integrate -> contact -> accept? -> plasticity -> fracture").
  // Elastic models change nothing. A model that changes its nodes (report.edit) has
  // nodeCount(), nodeMasses() and its elements for the new nodes when it returns.
  // `workspace`: the one the step's last gradient evaluation used, at x (or null: the
  // model measures what it needs itself).
  virtual InelasticReport updateInelastic(std::span<const double> x, double dt,
                                          ModelWorkspace* workspace) {
    (void)x;
    (void)dt;
    (void)workspace;
    return {};
  }
  InelasticReport updateInelastic(std::span<const double> x, double dt) {
    return updateInelastic(x, dt, nullptr);
  }
  // The step pipeline's "accept?" stage (dynamics/step_pipeline.hpp): a proposed step moved
  // the nodes from `before` to `after` in dt seconds (forces, integration and contact done;
  // plasticity and fracture not yet). A model that must resolve what happens within a step
  // with smaller steps (gingold2004 section 4.4, the time-step search: too large a change
  // of strain, too many elements that would break at once) rejects it; the step is then
  // undone and retried as two half steps that land on the same time. Both spans have
  // shape (nNodes, 3). Elastic models accept every step.
  [[nodiscard]] virtual StepVerdict inspectStep(std::span<const double> before,
                                                std::span<const double> after, double dt) const {
    (void)before;
    (void)after;
    (void)dt;
    return {};
  }

  // Bumped whenever the elements change (fracture): caches keyed on the sparsity pattern or
  // the element count must be rebuilt.
  [[nodiscard]] virtual uint64_t topologyVersion() const { return 0; }

  // Elastic energy, J, that the model's own changes of discretization added at fixed positions
  // since it was built (the fiber model's resampling: the new fibers measure the same shape
  // with other weights), part of the model's state; the energy guard counts it as put in, the
  // way it counts the work of moving pins. Negative when they took energy out.
  [[nodiscard]] virtual double addedEnergy() const { return 0; }

  // The evolving state (plastic rest values, broken elements, cracks; model_state.hpp) as a
  // copyable value: a body saves a frame's state by copying it and puts it back with
  // setState (a frame recomputed with smaller steps, a restored SimulationState, a
  // checkpoint read by --resume). Empty for a model without evolving state. The same code
  // serves every model: a model only lists its evolving members (listStateFields) and
  // rebuilds what follows from them (stateAssigned).
  [[nodiscard]] ModelState state() const;
  // Puts back a state of this model (from state(), or ModelState::read of a checkpoint).
  // Throws InputError, leaving the model as it was, when the state does not fit: another
  // model, other fields, arrays of other lengths than its node or element count.
  void setState(const ModelState& state);
  [[nodiscard]] bool hasState() const;

  // Whether updateInelastic may change the node count (TopologyEdit::changesNodes). Such a
  // body cannot carry an embedded high-resolution surface (its binding holds node indices;
  // addBody refuses the combination), and a saved state of it holds the body's pins, loads
  // and contact per node as well.
  [[nodiscard]] virtual bool changesNodeCount() const { return false; }

  // Connected piece of every node, (nNodes), labels 0.. numbered by smallest node; empty if
  // the model does not track pieces (then it is one piece).
  [[nodiscard]] virtual std::vector<int32_t> nodePieces() const { return {}; }

  // Quantities per node for the frames (Geometry::vertexScalars), e.g. a fiber node's
  // damage; each (nNodes). Empty for a model with none.
  struct NodeScalar {
    std::string name;            // letters, digits and '_'
    std::vector<double> values;  // (nNodes)
  };
  [[nodiscard]] virtual std::vector<NodeScalar> nodeScalars() const { return {}; }

  // Positions at which the implicit solver's quasi-Newton stand-in of the Hessian (the
  // graph Laplacian of NewtonSolver::buildLaplacian) is built, (nNodes, 3), m: a reference
  // shape that changes only with topologyVersion(), so that the stand-in depends on the
  // model's state alone and is kept across frames. Empty: built at the run's positions,
  // again at each frame's start (the same whether the run came to that frame or was
  // restored there).
  [[nodiscard]] virtual std::span<const double> standInPositions() const { return {}; }

  // The surface that collides in mesh contact (dynamics/mesh_contact.hpp): triangles over
  // the nodes, (nTriangles, 3), and the nodes' rest positions, (nNodes, 3), m, from which
  // contact leaves out pairs that are neighbours in the rest shape (across a fresh crack
  // they coincide). Views of the model's own arrays, valid until it next changes. Empty
  // triangles: the model's nodes take no part in mesh contact.
  struct ContactMesh {
    std::span<const int32_t> triangles;
    std::span<const double> restPositions;
  };
  [[nodiscard]] virtual ContactMesh contactMesh() const { return {}; }

  // Outward area vectors at x, (nNodes, 3), m^2: the area a node represents times its unit
  // normal, for pressure loads. Returns false if the model has none.
  virtual bool nodeAreaVectors(std::span<const double> x, std::span<double> out) const {
    (void)x;
    (void)out;
    return false;
  }

  // How far the material reaches from each node below its surface (against the outward
  // normal of contactMesh's triangles) and above it, m, each (nNodes): the solid a piece fills
  // when it becomes a rigid body (dynamics/rigid_fragments.hpp). Returns false for the
  // default, half the material's thickness on either side of the surface.
  virtual bool nodeSolidExtents(std::span<double> below, std::span<double> above) const {
    (void)below;
    (void)above;
    return false;
  }

  // Lists the members that make up the evolving state (StateFields::add), in a fixed
  // order; nothing for an elastic model. The fields may depend on the model's options (the
  // fiber model lists its plastic values only with plasticity or fracture) but not on its
  // state. (Public so that a model wrapping another can list the inner one's.)
  virtual void listStateFields(StateFields& fields) { (void)fields; }
  // Called by setState once the listed members hold the state's values: rebuilds what is
  // derived from them (the fiber network from its cracks, masses from a topology) and
  // throws InputError when the values are inconsistent (setState then restores the model).
  virtual void stateAssigned() {}

 protected:
  // Assigns the fields of a state that setState has checked to the listed members (for a
  // model whose stateAssigned rebuilds derived data over them and must put them back).
  void assignStateFields(const ModelState& state);

 private:
  [[nodiscard]] StateFields stateFields() const;
};

}  // namespace shellsim
