// Rigid fragments (steinemann section 4.3; notes A10, A11): a piece that breaks off a body
// and is small (BodyDef::rigidFragments) becomes a rigid body that Bullet moves.
//
// Hand-over. The piece's nodes keep their places in the body: they become driven nodes
// (Body::pinned) whose path is the rigid body's, x_i = c + R r_i, v_i = v + w x (x_i - c),
// so the frames, the pieces and the colours go on as before. The rigid body gets the nodes'
// mass m = sum m_i, centre c = sum m_i x_i / m, momentum m v = sum m_i v_i, angular momentum
// I w = sum m_i r_i x (v_i - v) with I = sum m_i (|r_i|^2 1 - r_i r_i^T) about c: linear and
// angular momentum are conserved exactly, the kinetic energy of the deformation is lost.
// The body frame is the principal frame of I (Bullet wants a diagonal inertia), so R holds
// the eigenvectors of I and Bullet's inertia is exact, never its shape-based estimate (17x
// too large with the default margin, notes A11).
//
// Shape. One convex cell per surface triangle of the piece (Model::contactMesh): the prism
// between the triangle pushed below and above the surface by the material's extent there
// (Model::nodeSolidExtents; half the thickness each side by default); a node of no triangle
// gets an octahedron of that size. The cells are Bullet convex hulls, shrunk by their
// collision margin (btConvexHullComputer) so that the margin, which Bullet adds outside a
// hull, puts the contact back on the piece's surface (a 2 mm shard on the floor rests at
// 1 mm, not at the default margin's 4 cm, notes A11).
//
// Coupling (the paper is silent; [ours]). Bullet moves the fragments under gravity against
// the scene's obstacles (static, or kinematic where they move: a thrown obstacle pushes
// fragments and is not pushed back) and each other. The deformable nodes see a fragment
// only through mesh contact (ContactDef), where the driven nodes push them one way.
//
// Steps. Bullet steps the fragments every kRigidStep (1 ms), not every step of the shell
// (often 10 us): the nodes of a fragment jump once a millisecond, and every advance ends with
// the fragments at its end time.
//
// Determinism. The Bullet world is made anew from the fragments' state at the start of every
// advance (a frame) and after a restore, so that a run resumed from a saved state takes the
// same steps as the run that saved it (Bullet keeps contact caches between steps that no
// state holds). It runs on one thread: the same frames for any thread count.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/vec3.hpp"

namespace shellsim {

struct World;
struct Body;

// One rigid fragment: what Bullet needs to make it again, and its motion.
struct RigidFragment {
  int32_t body = 0;                                        // index in World::bodies
  double mass = 0;                                         // kg
  Vec3 principalInertia = Vec3::Zero();                    // kg m^2, about the centre
  Vec3 centre = Vec3::Zero();                              // m, centre of mass
  Eigen::Matrix3d rotation = Eigen::Matrix3d::Identity();  // principal frame -> world
  Vec3 velocity = Vec3::Zero();                            // m/s, of the centre
  Vec3 spin = Vec3::Zero();                                // rad/s, world frame
  // The convex cells it fills, their corners in the principal frame (already shrunk by
  // their margin): cell k is points [cellOffsets[k], cellOffsets[k + 1]).
  std::vector<int32_t> cellOffsets;  // (nCells + 1)
  std::vector<double> cellPoints;    // (nPoints, 3), m
  std::vector<double> cellMargins;   // (nCells), m, Bullet's collision margin of each
  bool operator==(const RigidFragment&) const = default;
};

class RigidFragments {
 public:
  RigidFragments();
  ~RigidFragments();
  RigidFragments(RigidFragments&&) noexcept;
  RigidFragments& operator=(RigidFragments&&) noexcept;
  RigidFragments(const RigidFragments&) = delete;
  RigidFragments& operator=(const RigidFragments&) = delete;

  [[nodiscard]] const std::vector<RigidFragment>& fragments() const { return fragments_; }
  // Replaces the fragments (a restored state); Bullet's world is made anew before the next
  // step.
  void setFragments(std::vector<RigidFragment> fragments);
  // Makes Bullet's world anew from the fragments before the next step (the start of an
  // advance: see Determinism above).
  void invalidate();

  // After an accepted step of length dt that ended at world.time: the fragments fall
  // behind by dt; once they are kRigidStep behind (or a piece is handed over) Bullet moves
  // them, and their nodes, to world.time in one step. Then hands over the pieces that
  // qualify now. Returns true when it moved or handed over nodes (forces that depend on them,
  // mesh contact, must be recomputed; a new rigid node's acceleration is set to 0 here).
  bool advance(World& world, double dt);
  // Moves the fragments to world.time if they are behind; true if it moved nodes.
  bool flush(World& world);
  // The end of an advance: flush, so that frames and saved states never hold fragments
  // behind, and check the pieces; the schedule of checks starts anew there, as a resumed
  // run starts it.
  bool finishAdvance(World& world);
  // A restored state: the pieces as they are now count as checked (as they were at the end
  // of the advance that saved it).
  void markChecked(const World& world);

  // Fragments of body `body`.
  [[nodiscard]] int32_t count(size_t body) const;

 private:
  struct Engine;  // Bullet's world (rigid_fragments.cpp)
  void build(const World& world, double startTime);
  bool handOver(World& world);
  void placeNodes(World& world) const;

  // Bullet steps at least this long (but never across the end of an advance): rigid bodies
  // need no steps as short as a stiff shell's, and each costs a collision pass.
  static constexpr double kRigidStep = 1e-3;  // s

  std::vector<RigidFragment> fragments_;
  double behind_ = 0;  // s, how far the fragments are behind world.time
  // Pieces are checked for hand-over after a step that changed a body's topology (its
  // Model::topologyVersion, per body, at the last check) and every kRigidStep besides (pins
  // let go, pieces come to rest).
  std::vector<uint64_t> checkedVersion_;
  double sinceCheck_ = 0;           // s
  std::unique_ptr<Engine> engine_;  // null: to be made before the next step
};

}  // namespace shellsim
