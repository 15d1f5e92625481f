// The model registry (models/registry.hpp): a model registered in one place is read from
// scene files with its options (checked, with "did you mean"), written back, documented in
// the scene reference, and run by the world and the CLI's runScene, with nothing else
// changed. The model is the test chain that splits nodes (splitting_chain.hpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "dynamics/splitting_chain.hpp"
#include "models/registry.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/run.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"

namespace shellsim {
namespace {

using testing::SplittingChainDef;

// A scene with one chain of six points hanging from its first along +x (gravity along x).
std::string chainScene(const std::filesystem::path& points, const std::string& options) {
  return R"({
    "gravity": [20, 0, 0],
    "bodies": [{
      "name": "chain",
      "file": ")" +
         points.string() + R"(",
      "model": "splitting_chain",
      "splitting_chain": )" +
         options + R"(,
      "pins": [{"shape": "vertices", "vertices": [0]}]
    }],
    "time": {"duration": 0.5, "frame_rate": 30},
    "output": {"formats": ["ply"]}
  })";
}

std::filesystem::path writeChainPoints() {
  const auto file = std::filesystem::path(::testing::TempDir()) / "chain_points.xyz";
  std::ofstream out(file);
  for (int i = 0; i < testing::kChainNodes; ++i) out << 0.1 * i << " 0 0\n";
  return file;
}

TEST(ModelRegistry, ARegisteredModelIsReadWrittenDocumentedAndRunFromAScene) {
  testing::registerSplittingChain();
  const std::filesystem::path points = writeChainPoints();
  const SceneDef scene =
      parseScene(chainScene(points, R"({"split_strain": 0.04, "stiffness": 40})"), "chain.json",
                 ::testing::TempDir());
  ASSERT_EQ(scene.bodies[0].model, "splitting_chain");
  const auto& options = scene.bodies[0].options<SplittingChainDef>();
  EXPECT_EQ(options.splitStrain, 0.04);
  EXPECT_EQ(options.stiffness, 40);
  EXPECT_EQ(options.springMass, SplittingChainDef{}.springMass);
  EXPECT_EQ(parseScene(sceneToJson(scene), "written.json", ::testing::TempDir()), scene);

  // Its options are checked like every other object, with the same messages.
  try {
    (void)parseScene(chainScene(points, R"({"split_strian": 0.04, "stiffness": -1})"), "bad.json",
                     ::testing::TempDir());
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("bodies[0].splitting_chain.split_strian: unknown key; did you mean "
                        "'split_strain'?"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("bodies[0].splitting_chain.stiffness = -1: must be > 0"), std::string::npos)
        << what;
  }
  const std::vector<std::string>& names = knownModelNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "splitting_chain"), names.end());
  const std::string reference = sceneReferenceMarkdown();
  EXPECT_NE(reference.find("## splitting_chain\n"), std::string::npos);
  EXPECT_NE(reference.find("| `splitting_chain` | [splitting_chain](#splitting_chain) |"),
            std::string::npos);

  // The world builds and runs it: the chain splits while its pinned end holds.
  Simulation simulation(scene);
  simulation.advanceFrames(15);
  EXPECT_GT(simulation.nodeCount(0), testing::kChainNodes);
  EXPECT_EQ(simulation.pinnedNodes(0)[0], 1);
  EXPECT_EQ(simulation.positions(0)[0], 0.0);

  // And so does a run of the CLI's runScene, whose summary counts the nodes per frame.
  RunOptions run;
  run.outputFolder = std::filesystem::path(::testing::TempDir()) / "registry_chain_run";
  std::filesystem::remove_all(*run.outputFolder);
  (void)runScene(scene, run);
  std::ifstream summaryFile(*run.outputFolder / "summary.json");
  const auto summary = nlohmann::json::parse(summaryFile);
  EXPECT_EQ(summary["status"], "completed");
  EXPECT_EQ(summary["frames"].front()["bodies"][0]["nodes"], testing::kChainNodes);
  EXPECT_GT(summary["frames"].back()["bodies"][0]["nodes"].get<int>(), testing::kChainNodes);
  std::filesystem::remove_all(*run.outputFolder);
  std::filesystem::remove(points);
}

TEST(ModelRegistry, ARegistrationIsCheckedAndANameIsTakenOnce) {
  testing::registerSplittingChain();
  ModelRegistration copy = *findModel("splitting_chain");
  EXPECT_THROW(registerModel(copy), std::invalid_argument);  // the name is taken
  copy.name = "fiber";
  EXPECT_THROW(registerModel(copy), std::invalid_argument);
  copy.name = "chain_without_discretizer";
  copy.discretize = nullptr;
  EXPECT_THROW(registerModel(copy), std::invalid_argument);
  EXPECT_EQ(findModel("chain_without_discretizer"), nullptr);
  EXPECT_NE(findModel("fiber"), nullptr);
  EXPECT_EQ(findModel("fibre"), nullptr);
}

}  // namespace
}  // namespace shellsim
