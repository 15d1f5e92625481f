// Fuzz target for state and checkpoint files (Simulation::readStateFile, runScene --resume):
// any input must either restore or raise a shellsim::Error; a crash, sanitizer report,
// hang or huge allocation is a bug. The input is a state file without its last 8 bytes,
// the checksum, which the target appends: random bytes would otherwise never get past it
// to the parser and the models' restore checks behind it.
//
// The simulation is a mass-spring sheet, two fiber sheets with plasticity and fracture, one
// of them clustered, with an embedded surface, a plastic inelastic shell, and the test model
// that splits nodes. With
// FUZZ_STATE_SEED=FILE in the environment the target first writes a valid input for it to FILE (the
// seed corpus, corpus/state/).
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <span>
#include <vector>

#include "core/byte_stream.hpp"
#include "dynamics/simulation_impl.hpp"
#include "dynamics/splitting_chain.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/models/fiber.hpp"
#include "shellsim/models/inelastic_shell.hpp"
#include "shellsim/world.hpp"

namespace {

// A 0.3 m square sheet primitive of cells x cells at height z.
void placeSheet(shellsim::BodyDef& def, int cells, double z) {
  shellsim::PrimitiveDef sheet;
  sheet.size = {0.3, 0.3, 0};
  sheet.resolution = cells;
  def.primitive = sheet;
  def.transform.translation = {0, 0, z};
}

struct Fixture {
  shellsim::Simulation sim;
  shellsim::SimulationState pristine;

  Fixture() {
    shellsim::BodyDef cloth;
    cloth.name = "cloth";
    placeSheet(cloth, 4, 0.1);
    sim.addBody(cloth);
    shellsim::BodyDef poster;
    poster.name = "poster";
    poster.model = "fiber";
    poster.options<shellsim::FiberDef>().plasticity = shellsim::FiberPlasticityDef{};
    poster.options<shellsim::FiberDef>().fracture = shellsim::FiberFractureDef{};
    poster.options<shellsim::FiberDef>().fracture->stretchLimit = 1.01;
    poster.initialVelocity = {0.5, -0.2, 1};
    shellsim::PinDef corner;
    corner.shape = shellsim::PinShape::kVertices;
    corner.vertices = {0};
    poster.pins.push_back(corner);
    placeSheet(poster, 6, 0.2);
    sim.addBody(poster);
    shellsim::BodyDef leaf = poster;  // clustered nodes: an embedded surface to rebind
    leaf.name = "leaf";
    leaf.pins.clear();
    leaf.options<shellsim::FiberDef>().nodeCount = 30;
    placeSheet(leaf, 12, 0.3);
    sim.addBody(leaf);
    // An inelastic shell (gingold2004) pinned at a corner, plastic from the start.
    shellsim::BodyDef plate;
    plate.name = "plate";
    plate.model = "inelastic_shell";
    plate.options<shellsim::InelasticShellDef>().yieldStrain = 1e-6;
    plate.options<shellsim::InelasticShellDef>().hardening = 0.5;
    plate.pins.push_back(corner);
    placeSheet(plate, 4, 0.5);
    sim.addBody(plate);
    // A model that changes its nodes (tests/dynamics/splitting_chain.hpp, registered):
    // node sets and a topology that differs from the set-up's in the state.
    shellsim::testing::registerSplittingChain();
    shellsim::BodyDef chain;
    chain.name = "chain";
    chain.model = "splitting_chain";
    shellsim::Geometry points;
    for (int i = 0; i < shellsim::testing::kChainNodes; ++i) {
      points.positions.insert(points.positions.end(), {0.11 * i, 0.0, 0.4});
    }
    // Held at one end, it stretches under gravity past the split strain at once.
    chain.options<shellsim::testing::SplittingChainDef>().splitStrain = 0.001;
    shellsim::PinDef end;
    end.shape = shellsim::PinShape::kVertices;
    end.vertices = {0};
    chain.pins.push_back(end);
    sim.addBody(points, chain);
    sim.advanceFrames(3);  // some plastic flow and broken fibers in the state
    pristine = sim.saveState();
    if (const char* seed = std::getenv("FUZZ_STATE_SEED"); seed != nullptr) {
      const std::vector<uint8_t> bytes = shellsim::encodeState(shellsim::implOf(sim), pristine, {});
      std::ofstream out(seed, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size() - sizeof(uint64_t)));
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  std::vector<uint8_t> file(data, data + size);
  const uint64_t checksum = shellsim::fnv1a(file);
  const auto* c = reinterpret_cast<const uint8_t*>(&checksum);
  file.insert(file.end(), c, c + sizeof checksum);
  try {
    shellsim::SimulationState state;
    (void)shellsim::decodeState(shellsim::implOf(fixture.sim), file, "fuzz", state);
    fixture.sim.restoreState(state);
    // What was restored must be usable: energies and a surface at the restored positions.
    for (int32_t b = 0; b < fixture.sim.bodyCount(); ++b) {
      (void)fixture.sim.energies(b);
      (void)fixture.sim.surface(b);
      (void)fixture.sim.pieceCount(b);
    }
  } catch (const shellsim::Error&) {
  }
  fixture.sim.restoreState(fixture.pristine);
  return 0;
}
