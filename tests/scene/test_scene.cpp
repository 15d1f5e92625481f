// Scene files: parsing, validation messages, defaults, example scenes and the generated docs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "shellsim/errors.hpp"
#include "shellsim/models/discrete_shell.hpp"
#include "shellsim/models/fiber.hpp"
#include "shellsim/models/inelastic_shell.hpp"
#include "shellsim/scene.hpp"
#include "shellsim/world.hpp"
#include "temp_folder.hpp"

namespace shellsim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSourceDir = SHELLSIM_SOURCE_DIR;

// A valid scene with one body; tests change one value and look at the message.
json minimalScene() {
  return json::parse(R"({
    "obstacles": [
      {"type": "plane"},
      {"type": "sphere", "center": [0, 0, 0.3], "radius": 0.2},
      {"type": "box", "half_extents": [0.1, 0.1, 0.1]}
    ],
    "bodies": [{
      "primitive": {"type": "sheet"},
      "pins": [
        {"shape": "box", "center": [0.5, 0.5, 0]},
        {"shape": "sphere", "radius": 0.1},
        {"shape": "vertices", "vertices": [0, 1]}
      ]
    }]
  })");
}

std::string readText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The InputError message parseScene throws, or a failure if it does not throw one.
std::string errorOf(const std::string& text, const fs::path& folder = ".") {
  try {
    (void)parseScene(text, "scene.json", folder);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError for:\n" << text;
  return {};
}

std::string errorOfJson(const json& scene) {
  return errorOf(scene.dump(2));
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A fresh folder per test.
class TempFolder : public testfiles::TempFolder {
 public:
  TempFolder() : testfiles::TempFolder("shellsim_scene_") {}
};

const std::string kTriangleObj = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";

// ---------------------------------------------------------------------------------------
// Example scenes and defaults

TEST(SceneExamples, EveryExampleSceneParses) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "scenes")) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW({
      const SceneDef scene = loadScene(entry.path());
      EXPECT_FALSE(scene.bodies.empty());
    });
    ++count;
  }
  EXPECT_GE(count, 4);
}

TEST(SceneExamples, SpotDropResolvesTheSharedModel) {
  const SceneDef scene = loadScene(kSourceDir / "scenes" / "mass_spring_spot_drop.json");
  ASSERT_TRUE(scene.bodies[0].file.has_value());
  EXPECT_TRUE(fs::exists(*scene.bodies[0].file));
  EXPECT_TRUE(fs::equivalent(*scene.bodies[0].file, fs::path(SHELLSIM_DATA_DIR) / "spot.obj"));
}

TEST(SceneExamples, DefaultSceneEqualsDefaultJson) {
  SceneDef fromCode = defaultScene();
  SceneDef fromFile = loadScene(kSourceDir / "scenes" / "default.json");
  EXPECT_EQ(fromCode.sceneFolder, fs::current_path());
  fromCode.sceneFolder = fromFile.sceneFolder;
  EXPECT_TRUE(fromCode == fromFile);
}

TEST(SceneExamples, DefaultSceneHasTheDocumentedValues) {
  const SceneDef s = defaultScene();
  EXPECT_EQ(s.gravity, (Vec3d{0, 0, -9.81}));
  ASSERT_EQ(s.bodies.size(), 1U);
  const BodyDef& b = s.bodies[0];
  ASSERT_TRUE(b.primitive.has_value());
  EXPECT_EQ(b.primitive->type, PrimitiveType::kSheet);
  EXPECT_EQ(b.primitive->size[0], 1.0);
  EXPECT_EQ(b.primitive->size[1], 1.0);
  EXPECT_EQ(b.primitive->resolution, 24);
  EXPECT_EQ(b.transform.translation, (Vec3d{0, 0, 0.8}));
  EXPECT_EQ(b.model, "fiber");
  EXPECT_EQ(b.material.youngModulus, 1e6);
  EXPECT_EQ(b.material.poisson, 0.3);
  EXPECT_EQ(b.material.thickness, 1e-3);
  EXPECT_EQ(b.material.density, 300.0);
  EXPECT_EQ(b.material.damping, 0.5);
  ASSERT_EQ(s.obstacles.size(), 2U);
  EXPECT_EQ(s.obstacles[0].type, ObstacleType::kPlane);
  EXPECT_EQ(s.obstacles[0].point, (Vec3d{0, 0, 0}));
  EXPECT_EQ(s.obstacles[0].normal, (Vec3d{0, 0, 1}));
  EXPECT_EQ(s.obstacles[0].friction, 0.5);
  EXPECT_EQ(s.obstacles[1].type, ObstacleType::kSphere);
  EXPECT_EQ(s.obstacles[1].center, (Vec3d{0, 0, 0.35}));
  EXPECT_EQ(s.obstacles[1].radius, 0.3);
  EXPECT_EQ(s.obstacles[1].friction, 0.4);
  EXPECT_EQ(s.time.duration, 3.0);
  EXPECT_EQ(s.time.frameRate, 30.0);
  EXPECT_EQ(s.time.timeStep, 0.0);
  EXPECT_EQ(s.output.folder, fs::path("out/default"));
  EXPECT_EQ(s.output.formats, std::vector<OutputFormat>{OutputFormat::kPly});
}

// The tables in scene.cpp give the defaults a scene file gets; the member initializers in
// scene.hpp give those of code that builds definitions directly. They must agree.
TEST(SceneDefaults, TableDefaultsMatchHeaderDefaults) {
  const SceneDef s = parseScene(minimalScene().dump(), "scene.json", ".");
  const SceneDef empty;
  EXPECT_EQ(s.gravity, empty.gravity);
  EXPECT_TRUE(s.time == TimeDef{});
  EXPECT_TRUE(s.output == OutputDef{});
  const BodyDef& b = s.bodies[0];
  EXPECT_EQ(b.name, "body0");
  EXPECT_EQ(b.model, BodyDef{}.model);
  EXPECT_TRUE(b.material == MaterialDef{});
  EXPECT_TRUE(b.options<FiberDef>() == FiberDef{});
  EXPECT_TRUE(b.transform == TransformDef{});
  EXPECT_EQ(b.initialVelocity, BodyDef{}.initialVelocity);
  EXPECT_TRUE(b.primitive == PrimitiveDef{});
  ObstacleDef plane;
  EXPECT_TRUE(s.obstacles[0] == plane);
  ObstacleDef sphere;
  sphere.type = ObstacleType::kSphere;
  sphere.center = {0, 0, 0.3};
  sphere.radius = 0.2;
  EXPECT_TRUE(s.obstacles[1] == sphere);
  ObstacleDef box;
  box.type = ObstacleType::kBox;
  box.halfExtents = {0.1, 0.1, 0.1};
  EXPECT_TRUE(s.obstacles[2] == box);
  PinDef pin;
  pin.center = {0.5, 0.5, 0};
  EXPECT_TRUE(b.pins[0] == pin);
}

TEST(SceneDefaults, BodiesGetIndexedNames) {
  json scene = minimalScene();
  scene["bodies"].push_back({{"primitive", {{"type", "sphere"}}}, {"name", "ball"}});
  scene["bodies"].push_back({{"primitive", {{"type", "box"}}}});
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  ASSERT_EQ(s.bodies.size(), 3U);
  EXPECT_EQ(s.bodies[0].name, "body0");
  EXPECT_EQ(s.bodies[1].name, "ball");
  EXPECT_EQ(s.bodies[2].name, "body2");
}

TEST(SceneDefaults, PlaneNormalIsNormalised) {
  json scene = minimalScene();
  scene["obstacles"][0]["normal"] = {0, 3, 4};
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  EXPECT_DOUBLE_EQ(s.obstacles[0].normal[0], 0.0);
  EXPECT_DOUBLE_EQ(s.obstacles[0].normal[1], 0.6);
  EXPECT_DOUBLE_EQ(s.obstacles[0].normal[2], 0.8);
}

TEST(SceneDefaults, ValuesAreRead) {
  json scene = minimalScene();
  scene["gravity"] = {0, -9.81, 0};
  scene["bodies"][0]["transform"] = {
      {"scale", 2}, {"rotation_degrees", {90, 0, 0}}, {"translation", {1, 2, 3}}};
  scene["bodies"][0]["material"] = {{"stiffness", 250}};
  scene["bodies"][0]["initial_velocity"] = {0, 0, -1};
  scene["obstacles"][1]["path"] = {{{"time", 0}, {"offset", {0, 0, 0}}},
                                   {{"time", 1.5}, {"offset", {0, 0, 0.5}}}};
  scene["obstacles"][1]["response"] = "penalty";
  scene["time"] = {{"duration", 5}, {"frame_rate", 60}, {"time_step", 0.001}};
  scene["output"] = {{"folder", "frames"}, {"formats", {"vtp", "obj"}}};
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  EXPECT_EQ(s.gravity, (Vec3d{0, -9.81, 0}));
  const BodyDef& b = s.bodies[0];
  EXPECT_EQ(b.transform.scale, (Vec3d{2, 2, 2}));
  EXPECT_EQ(b.transform.rotationDegrees, (Vec3d{90, 0, 0}));
  EXPECT_EQ(b.transform.translation, (Vec3d{1, 2, 3}));
  EXPECT_EQ(b.material.stiffness, 250.0);
  EXPECT_EQ(b.initialVelocity, (Vec3d{0, 0, -1}));
  EXPECT_EQ(b.pins[2].shape, PinShape::kVertices);
  EXPECT_EQ(b.pins[2].vertices, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(s.obstacles[1].path.size(), 2U);
  EXPECT_EQ(s.obstacles[1].path[1].time, 1.5);
  EXPECT_EQ(s.obstacles[1].path[1].offset, (Vec3d{0, 0, 0.5}));
  EXPECT_EQ(s.obstacles[0].response, ObstacleResponse::kProjection);
  EXPECT_EQ(s.obstacles[1].response, ObstacleResponse::kPenalty);
  EXPECT_EQ(s.time.duration, 5.0);
  EXPECT_EQ(s.time.frameRate, 60.0);
  EXPECT_EQ(s.time.timeStep, 0.001);
  EXPECT_EQ(s.output.folder, fs::path("frames"));
  EXPECT_EQ(s.output.formats, (std::vector<OutputFormat>{OutputFormat::kVtp, OutputFormat::kObj}));
}

TEST(SceneDefaults, KnownModelNamesListsMassSpring) {
  const auto& names = knownModelNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "mass_spring"), names.end());
}

// ---------------------------------------------------------------------------------------
// Messages

TEST(SceneErrors, ThreeMistakesAreAllListedWithTheirPaths) {
  const std::string text = R"({
  "bodies": [{
    "primitive": {"type": "sheet"},
    "material": {"poisson": 0.7, "densty": 300}
  }],
  "time": {"frame_rate": "fast"}
})";
  // In reading order: the time first (it bounds the obstacles' and the contact's stiffness).
  EXPECT_EQ(errorOf(text),
            "scene.json: time.frame_rate = \"fast\": must be a number\n"
            "scene.json: bodies[0].material.poisson = 0.7: must be in [0, 0.5)\n"
            "scene.json: bodies[0].material.densty: unknown key; did you mean 'density'?");
}

TEST(SceneErrors, UnknownKeysSuggestTheClosestKnownKey) {
  json scene = minimalScene();
  scene["bodies"][0]["materal"] = json::object();
  scene["bodies"][0]["primitive"]["resolutoin"] = 3;
  scene["bodies"][0]["youngModulus"] = 3;  // camelCase is close to snake_case, but not here
  scene["tmie"] = json::object();
  scene["colour"] = "red";
  const std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("scene.json: bodies[0].materal: unknown key; did you mean 'material'?"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("scene.json: bodies[0].primitive.resolutoin: unknown key; did you mean "
                         "'resolution'?"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("scene.json: tmie: unknown key; did you mean 'time'?"), std::string::npos)
      << message;
  EXPECT_NE(message.find("scene.json: colour: unknown key; expected one of 'gravity', "
                         "'obstacles', 'bodies', 'time', 'contact', 'output'"),
            std::string::npos)
      << message;
  EXPECT_EQ(lines(message).size(), 5U) << message;
}

TEST(SceneErrors, CamelCaseKeySuggestsSnakeCase) {
  json scene = minimalScene();
  scene["bodies"][0]["material"] = {{"youngModulus", 1e6}};
  EXPECT_EQ(errorOfJson(scene),
            "scene.json: bodies[0].material.youngModulus: unknown key; did you mean "
            "'young_modulus'?");
}

TEST(SceneErrors, UnknownEnumValuesSuggestTheClosest) {
  json scene = minimalScene();
  scene["obstacles"][1]["type"] = "sphre";
  scene["obstacles"][0]["response"] = "penalt";
  scene["bodies"][0]["model"] = "mass_sprin";
  const std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("scene.json: obstacles[1].type = \"sphre\": must be one of 'plane', "
                         "'sphere', 'box'; did you mean 'sphere'?"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("scene.json: obstacles[0].response = \"penalt\": must be one of "
                         "'projection', 'penalty'; did you mean 'penalty'?"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("scene.json: bodies[0].model = \"mass_sprin\": must be one of "
                         "'mass_spring', 'fiber', 'discrete_shell', 'inelastic_shell', "
                         "'mls_solid', 'thick_shell'; did you "
                         "mean 'mass_spring'?"),
            std::string::npos)
      << message;
}

struct Case {
  std::string pointer;  // JSON pointer into minimalScene()
  json value;
  std::string expected;  // the whole message
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.pointer << " = " << c.value.dump();
}

class SceneValueErrors : public testing::TestWithParam<Case> {};

TEST_P(SceneValueErrors, ReportsPathValueAndReason) {
  json scene = minimalScene();
  scene[json::json_pointer(GetParam().pointer)] = GetParam().value;
  EXPECT_EQ(errorOfJson(scene), GetParam().expected);
}

const Case kTypeCases[] = {
    {"/bodies/0/material/poisson", "high",
     "scene.json: bodies[0].material.poisson = \"high\": must be a number"},
    {"/bodies/0/material/poisson", true,
     "scene.json: bodies[0].material.poisson = true: must be a number"},
    {"/gravity", {0, -9.81}, "scene.json: gravity = [0,-9.81]: must be [x, y, z]"},
    {"/gravity", {0, "down", 0}, "scene.json: gravity[1] = \"down\": must be a number"},
    {"/bodies/0/primitive/resolution", 2.5,
     "scene.json: bodies[0].primitive.resolution = 2.5: must be an integer"},
    {"/bodies/0/primitive/resolution", "8",
     "scene.json: bodies[0].primitive.resolution = \"8\": must be an integer"},
    {"/bodies/0/material", 3, "scene.json: bodies[0].material = 3: must be an object"},
    {"/bodies/0/name", 5, "scene.json: bodies[0].name = 5: must be a string"},
    {"/bodies", json::object(), "scene.json: bodies = {}: must be a list of objects"},
    {"/bodies/0", "sheet", "scene.json: bodies[0] = \"sheet\": must be an object"},
    {"/obstacles/0/type", 1,
     "scene.json: obstacles[0].type = 1: must be a string, one of 'plane', 'sphere', 'box'"},
    {"/output",
     {{"formats", "ply"}},
     "scene.json: output.formats = \"ply\": must be a list of strings, from 'ply', 'obj', 'vtp', "
     "'pc2'"},
    {"/bodies/0/transform",
     {{"scale", "big"}},
     "scene.json: bodies[0].transform.scale = \"big\": must be a number or [x, y, z]"},
    {"/bodies/0/pins/2/vertices",
     {0, 1.5},
     "scene.json: bodies[0].pins[2].vertices[1] = 1.5: must be an integer"},
};
INSTANTIATE_TEST_SUITE_P(Types, SceneValueErrors, testing::ValuesIn(kTypeCases));

const Case kRangeCases[] = {
    {"/bodies/0/material/poisson", 0.5,
     "scene.json: bodies[0].material.poisson = 0.5: must be in [0, 0.5)"},
    {"/bodies/0/material/poisson", -0.1,
     "scene.json: bodies[0].material.poisson = -0.1: must be in [0, 0.5)"},
    {"/bodies/0/material/young_modulus", 0,
     "scene.json: bodies[0].material.young_modulus = 0: must be > 0"},
    {"/bodies/0/material/thickness", -0.001,
     "scene.json: bodies[0].material.thickness = -0.001: must be > 0"},
    {"/bodies/0/material/density", 0, "scene.json: bodies[0].material.density = 0: must be > 0"},
    {"/bodies/0/material/damping", -1, "scene.json: bodies[0].material.damping = -1: must be >= 0"},
    {"/bodies/0/material/stiffness", 0,
     "scene.json: bodies[0].material.stiffness = 0: must be > 0"},
    {"/obstacles/0/restitution", 1.5,
     "scene.json: obstacles[0].restitution = 1.5: must be in [0, 1]"},
    {"/obstacles/0/friction", -0.1, "scene.json: obstacles[0].friction = -0.1: must be >= 0"},
    {"/obstacles/1/radius", 0, "scene.json: obstacles[1].radius = 0: must be > 0"},
    {"/obstacles/2/half_extents",
     {0.1, 0, 0.1},
     "scene.json: obstacles[2].half_extents[1] = 0: must be > 0"},
    {"/obstacles/0/normal",
     {0, 0, 0},
     "scene.json: obstacles[0].normal = [0,0,0]: must be a non-zero vector"},
    {"/time/duration", 0, "scene.json: time.duration = 0: must be in (0, 1000000]"},
    {"/time/duration", 2e6, "scene.json: time.duration = 2000000: must be in (0, 1000000]"},
    {"/time/frame_rate", 0, "scene.json: time.frame_rate = 0: must be in (0, 10000]"},
    {"/time/frame_rate", 20000, "scene.json: time.frame_rate = 20000: must be in (0, 10000]"},
    {"/time/time_step", -0.01, "scene.json: time.time_step = -0.01: must be >= 0"},
    {"/time/time_step", 0.1,
     "scene.json: time.time_step = 0.1: must be <= 1 / frame_rate = 0.03333333333333333 s, so "
     "that every frame is reached"},
    {"/bodies/0/primitive/resolution", 0,
     "scene.json: bodies[0].primitive.resolution = 0: must be in [1, 2048]"},
    {"/bodies/0/primitive/resolution", 4096,
     "scene.json: bodies[0].primitive.resolution = 4096: must be in [1, 2048]"},
    {"/bodies/0/primitive/size",
     {0, 1, 1},
     "scene.json: bodies[0].primitive.size[0] = 0: must be > 0 for a sheet"},
    {"/bodies/0/primitive/size",
     {1, 1, -1},
     "scene.json: bodies[0].primitive.size[2] = -1: must be >= 0"},
    {"/bodies/0/transform",
     {{"scale", 0}},
     "scene.json: bodies[0].transform.scale = 0: must be > 0"},
    {"/bodies/0/transform",
     {{"scale", {1, -1, 1}}},
     "scene.json: bodies[0].transform.scale[1] = -1: must be > 0"},
    {"/bodies/0/pins/0/half_extents",
     {0.1, 0, 0.1},
     "scene.json: bodies[0].pins[0].half_extents[1] = 0: must be > 0"},
    {"/bodies/0/pins/1/radius", 0, "scene.json: bodies[0].pins[1].radius = 0: must be > 0"},
    {"/bodies/0/pins/2/vertices",
     {3, -1},
     "scene.json: bodies[0].pins[2].vertices[1] = -1: must be in [0, 2147483647]"},
    {"/bodies/0/pins/2/vertices", json::array(),
     "scene.json: bodies[0].pins[2].vertices = []: must list at least one vertex"},
    {"/output/formats", json::array(),
     "scene.json: output.formats = []: must list at least one of 'ply', 'obj', 'vtp', 'pc2'"},
    {"/output/formats", {"ply", "ply"}, "scene.json: output.formats[1] = \"ply\": is listed twice"},
    {"/output/formats",
     {"png"},
     "scene.json: output.formats[0] = \"png\": must be one of 'ply', 'obj', 'vtp', 'pc2'"},
    {"/output/folder", "", "scene.json: output.folder = \"\": must be a non-empty path"},
    {"/bodies", json::array(), "scene.json: bodies = []: must list at least one body"},
    {"/bodies/0/name", "../escape",
     "scene.json: bodies[0].name = \"../escape\": must be 1 to 64 letters, digits, '_', '-' or "
     "'.', not starting with '.'"},
    {"/obstacles/1/normal",
     {0, 0, 1},
     "scene.json: obstacles[1].normal: is not used when type is 'sphere' (only for 'plane')"},
    {"/bodies/0/pins/1/half_extents",
     {1, 1, 1},
     "scene.json: bodies[0].pins[1].half_extents: is not used when shape is 'sphere' (only for "
     "'box')"},
    {"/obstacles/1/path",
     {{{"time", 1}, {"offset", {0, 0, 0}}}, {{"time", 1}, {"offset", {0, 0, 1}}}},
     "scene.json: obstacles[1].path[1].time = 1: must be greater than the previous keyframe's "
     "time (1)"},
    {"/bodies/0/pins/0/path",
     {{{"offset", {0, 0, 0}}}},
     "scene.json: bodies[0].pins[0].path[0].time: is required"},
    {"/obstacles/0",
     {{"normal", {0, 0, 1}}},
     "scene.json: obstacles[0].type: is required: one of 'plane', 'sphere', 'box'"},
};
INSTANTIATE_TEST_SUITE_P(Ranges, SceneValueErrors, testing::ValuesIn(kRangeCases));

// JSON has no NaN or infinity; a number too large for a double is the only way to write
// one, and the JSON reader already rejects it, with its place in the file.
TEST(SceneErrors, AThrownObstacleNeedsThePenaltyAndNoPath) {
  json scene = minimalScene();
  scene["obstacles"][0]["mass"] = 0.5;
  scene["obstacles"][1]["mass"] = 0.5;
  scene["obstacles"][1]["response"] = "penalty";
  scene["obstacles"][1]["velocity"] = {0, 0, 3};
  scene["obstacles"][1]["path"] = {{{"time", 0}, {"offset", {0, 0, 0}}},
                                   {{"time", 1}, {"offset", {0, 0, 1}}}};
  const std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("scene.json: obstacles[0].mass = 0.5: a thrown obstacle (mass > 0) "
                         "needs \"response\": \"penalty\""),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("scene.json: obstacles[1].mass = 0.5: a thrown obstacle (mass > 0) "
                         "cannot also follow a path"),
            std::string::npos)
      << message;
  scene["obstacles"][1].erase("path");
  scene["obstacles"][0]["response"] = "penalty";
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  EXPECT_EQ(s.obstacles[1].mass, 0.5);
  EXPECT_EQ(s.obstacles[1].velocity, (Vec3d{0, 0, 3}));
}

// The plastic step limit bounds the flow of plasticity, so it needs a yield strain.
TEST(SceneErrors, APlasticStepNeedsAYieldStrain) {
  json scene = minimalScene();
  scene["bodies"][0]["model"] = "inelastic_shell";
  scene["bodies"][0]["inelastic_shell"] = {{"plastic_step", 0.25}};
  const std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("scene.json: bodies[0].inelastic_shell.plastic_step = 0.25: bounds the "
                         "plastic flow of a step: it needs \"yield_strain\""),
            std::string::npos)
      << message;
  scene["bodies"][0]["inelastic_shell"]["yield_strain"] = 1e-3;
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  EXPECT_EQ(s.bodies[0].options<InelasticShellDef>().plasticStep, 0.25);
  scene["bodies"][0]["inelastic_shell"]["plastic_step"] = 0;
  EXPECT_NE(errorOfJson(scene).find("plastic_step = 0: must be > 0"), std::string::npos)
      << errorOfJson(scene);
}

// The hardening limit bounds the plasticity's back strain, so it needs a yield strain; it
// round-trips through the scene's JSON.
TEST(SceneErrors, AHardeningLimitNeedsAYieldStrain) {
  json scene = minimalScene();
  scene["bodies"][0]["model"] = "inelastic_shell";
  scene["bodies"][0]["inelastic_shell"] = {{"hardening_limit", 0.001}};
  const std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("scene.json: bodies[0].inelastic_shell.hardening_limit = 0.001: bounds "
                         "the hardening of the plasticity: it needs \"yield_strain\""),
            std::string::npos)
      << message;
  scene["bodies"][0]["inelastic_shell"]["yield_strain"] = 3e-3;
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  EXPECT_EQ(s.bodies[0].options<InelasticShellDef>().hardeningLimit, 0.001);
  const SceneDef again = parseScene(sceneToJson(s), "again.json", ".");
  EXPECT_EQ(again.bodies[0].options<InelasticShellDef>(), s.bodies[0].options<InelasticShellDef>());
  scene["bodies"][0]["inelastic_shell"]["hardening_limit"] = -1;
  EXPECT_NE(errorOfJson(scene).find("hardening_limit = -1: must be > 0"), std::string::npos)
      << errorOfJson(scene);
}

// The penalty's kappa is bounded by 4 only where explicit steps would make it unstable.
TEST(SceneErrors, ContactStiffnessOf4OrMoreNeedsAnImplicitIntegrator) {
  json scene = minimalScene();
  scene["contact"] = {{"stiffness", 50}};
  const std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("scene.json: contact.stiffness = 50: must be < 4 with an explicit "
                         "integrator"),
            std::string::npos)
      << message;
  scene["time"] = {{"integrator", "backward_euler"}};
  EXPECT_EQ(parseScene(scene.dump(), "scene.json", ".").contact.stiffness, 50.0);
}

// An obstacle's own kappa: penalty springs only, bounded by 4 as the contact's is.
TEST(SceneErrors, AnObstaclesOwnStiffnessNeedsThePenaltyAndBelow4AnExplicitIntegrator) {
  json scene = minimalScene();
  scene["obstacles"][0]["stiffness"] = 2;
  scene["obstacles"][1]["stiffness"] = 300;
  scene["obstacles"][1]["response"] = "penalty";
  std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("scene.json: obstacles[0].stiffness = 2: is the stiffness of penalty "
                         "springs: it needs \"response\": \"penalty\""),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("scene.json: obstacles[1].stiffness = 300: must be < 4 with an "
                         "explicit integrator"),
            std::string::npos)
      << message;
  scene["obstacles"][0].erase("stiffness");
  scene["time"] = {{"integrator", "backward_euler"}};
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  EXPECT_EQ(s.obstacles[0].stiffness, 0.0);
  EXPECT_EQ(s.obstacles[1].stiffness, 300.0);
  // Written and read back.
  EXPECT_EQ(parseScene(sceneToJson(s), "scene.json", ".").obstacles, s.obstacles);
}

TEST(SceneErrors, NonFiniteNumbersAreRejected) {
  const std::string text =
      "{\"bodies\": [{\"primitive\": {\"type\": \"sheet\"},\n"
      "  \"material\": {\"poisson\": 1e999}}]}";
  EXPECT_EQ(errorOf(text), "scene.json:2:31: invalid JSON: number overflow parsing '1e999'");
}

// A body made of a part of its input: the crop is read, written back and checked.
TEST(SceneCrop, IsReadWrittenBackAndChecked) {
  json scene = minimalScene();
  scene["bodies"][0]["crop"] = {
      {"shape", "box"}, {"center", {0, 0, 0.1}}, {"half_extents", {1, 1, 0.08}}};
  const SceneDef def = parseScene(scene.dump(), "scene.json", ".");
  ASSERT_TRUE(def.bodies[0].crop);
  EXPECT_EQ(def.bodies[0].crop->shape, PinShape::kBox);
  EXPECT_EQ(def.bodies[0].crop->halfExtents, (Vec3d{1, 1, 0.08}));
  EXPECT_EQ(parseScene(sceneToJson(def), "written.json", "."), def);
  scene["bodies"][0]["crop"] = {{"shape", "sphere"}, {"radius", -1}, {"half_extents", {1, 1, 1}}};
  const std::string message = errorOf(scene.dump());
  EXPECT_NE(message.find("bodies[0].crop.radius = -1: must be > 0"), std::string::npos) << message;
  EXPECT_NE(message.find("bodies[0].crop.half_extents"), std::string::npos) << message;
  scene["bodies"][0]["crop"] = {{"shape", "vertices"}};
  EXPECT_NE(errorOf(scene.dump()).find("bodies[0].crop.shape"), std::string::npos);
}

TEST(SceneErrors, BodyNeedsExactlyOneGeometry) {
  json scene = minimalScene();
  scene["bodies"][0]["file"] = "mesh.obj";
  EXPECT_EQ(errorOfJson(scene).rfind(
                "scene.json: bodies[0]: give either 'file' or 'primitive', not both\n", 0),
            0U);
  scene["bodies"][0].erase("file");
  scene["bodies"][0].erase("primitive");
  EXPECT_EQ(errorOfJson(scene),
            "scene.json: bodies[0]: needs a geometry: give 'file' or 'primitive'");
}

TEST(SceneErrors, BodyNamesMustBeDistinct) {
  json scene = minimalScene();
  scene["bodies"][0]["name"] = "body1";
  scene["bodies"].push_back({{"primitive", {{"type", "box"}}}});
  EXPECT_EQ(errorOfJson(scene),
            "scene.json: bodies[1].name = \"body1\": already names bodies[0]; names must be "
            "distinct");
}

TEST(SceneErrors, MissingBodiesIsAnError) {
  EXPECT_EQ(errorOf("{}"), "scene.json: bodies: is required");
}

TEST(SceneErrors, DuplicateKeysAreErrors) {
  const std::string text =
      R"({"bodies": [{"primitive": {"type": "sheet", "type": "box"}}], "gravity": [0, 0, 0]})";
  EXPECT_EQ(errorOf(text),
            "scene.json: bodies[0].primitive.type: key given more than once (only one may be "
            "given)");
}

TEST(SceneErrors, OddKeysAreQuotedSoEachProblemStaysOnOneLine) {
  json scene = minimalScene();
  scene["bodies"][0]["material"]["a\nb"] = 1;
  scene[std::string(1000, 'k')] = 1;
  const auto all = lines(errorOfJson(scene));
  ASSERT_EQ(all.size(), 2U);
  EXPECT_EQ(all[0].rfind("scene.json: bodies[0].material[\"a\\nb\"]: unknown key; ", 0), 0U)
      << all[0];
  EXPECT_LT(all[1].size(), 300U);
}

TEST(SceneErrors, TopLevelMustBeAnObject) {
  EXPECT_EQ(errorOf("[1, 2]"), "scene.json: the top level must be a JSON object {...}, not array");
}

TEST(SceneErrors, ManyProblemsAreCappedButCounted) {
  json scene = minimalScene();
  for (int i = 0; i < 80; ++i) scene["unknown" + std::to_string(i)] = i;
  const auto all = lines(errorOfJson(scene));
  ASSERT_EQ(all.size(), 51U);
  EXPECT_EQ(all.back(), "scene.json: ... and 30 more problems");
}

// ---------------------------------------------------------------------------------------
// JSON syntax

TEST(SceneSyntax, ErrorNamesLineAndColumn) {
  const std::string text = "{\n  \"bodies\": [\n    {\"name\": tru}\n  ]\n}\n";
  const std::string message = errorOf(text);
  EXPECT_EQ(message.rfind("scene.json:3:17: invalid JSON: ", 0), 0U) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(SceneSyntax, TrailingCommaAndEmptyInput) {
  EXPECT_EQ(errorOf("{\"bodies\": [],\n}").rfind("scene.json:2:1: invalid JSON: ", 0), 0U);
  EXPECT_EQ(errorOf("").rfind("scene.json:1:1: invalid JSON: ", 0), 0U) << errorOf("");
}

TEST(SceneSyntax, DeepNestingIsRejectedWithoutCrashing) {
  const std::string deep =
      "{\"bodies\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(errorOf(deep), "scene.json: JSON nested deeper than 64 levels");
}

// ---------------------------------------------------------------------------------------
// Files

TEST(SceneFiles, RelativeGeometryPathsResolveAgainstTheSceneFolder) {
  TempFolder tmp;
  tmp.write("models/tri.obj", kTriangleObj);
  json scene = minimalScene();
  scene["bodies"][0].erase("primitive");
  scene["bodies"][0]["file"] = "models/tri.obj";
  const SceneDef s = parseScene(scene.dump(), "scene.json", tmp.path());
  ASSERT_TRUE(s.bodies[0].file.has_value());
  EXPECT_EQ(*s.bodies[0].file, tmp.path() / "models" / "tri.obj");
  EXPECT_EQ(s.sceneFolder, tmp.path());

  // loadScene uses the folder of the file, whatever the working directory.
  tmp.write("scenes/s.json", [&] {
    json inner = scene;
    inner["bodies"][0]["file"] = "../models/tri.obj";
    return inner.dump();
  }());
  const SceneDef loaded = loadScene(tmp.path() / "scenes" / "s.json");
  ASSERT_TRUE(loaded.bodies[0].file.has_value());
  EXPECT_TRUE(fs::equivalent(*loaded.bodies[0].file, tmp.path() / "models" / "tri.obj"));
}

TEST(SceneFiles, AbsolutePathsAreKept) {
  TempFolder tmp;
  tmp.write("tri.obj", kTriangleObj);
  json scene = minimalScene();
  scene["bodies"][0].erase("primitive");
  scene["bodies"][0]["file"] = (tmp.path() / "tri.obj").string();
  const SceneDef s = parseScene(scene.dump(), "scene.json", "/nonexistent");
  EXPECT_EQ(*s.bodies[0].file, tmp.path() / "tri.obj");
}

TEST(SceneFiles, MissingGeometryNamesThePathAndTheResolvedPath) {
  TempFolder tmp;
  json scene = minimalScene();
  scene["bodies"][0].erase("primitive");
  scene["bodies"][0]["file"] = "missing.obj";
  const std::string resolved = (tmp.path() / "missing.obj").string();
  EXPECT_EQ(errorOf(scene.dump(), tmp.path()),
            "scene.json: bodies[0].file = \"missing.obj\": no such file (resolved to '" + resolved +
                "')");
}

TEST(SceneFiles, GeometryFileMustHaveAKnownFormatAndNotBeAFolder) {
  TempFolder tmp;
  tmp.write("mesh.txt", kTriangleObj);
  fs::create_directories(tmp.path() / "folder.obj");
  json scene = minimalScene();
  scene["bodies"][0].erase("primitive");
  scene["bodies"][0]["file"] = "mesh.txt";
  EXPECT_EQ(errorOf(scene.dump(), tmp.path()),
            "scene.json: bodies[0].file = \"mesh.txt\": unsupported geometry format: expected "
            ".obj, .ply, .off, .stl or .xyz");
  scene["bodies"][0]["file"] = "folder.obj";
  EXPECT_EQ(errorOf(scene.dump(), tmp.path()),
            "scene.json: bodies[0].file = \"folder.obj\": is a directory, not a file (resolved "
            "to '" +
                (tmp.path() / "folder.obj").string() + "')");
}

TEST(SceneFiles, LoadSceneMissingFileIsAnIoErrorNamingThePath) {
  const fs::path missing = fs::path(testing::TempDir()) / "shellsim_no_such_scene.json";
  try {
    (void)loadScene(missing);
    FAIL() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
    EXPECT_EQ(e.exitCode(), ExitCode::kIo);
  }
}

TEST(SceneFiles, LoadSceneOnADirectoryIsAnIoError) {
  TempFolder tmp;
  try {
    (void)loadScene(tmp.path());
    FAIL() << "no IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), tmp.path().string() + ": is a directory, not a scene file");
  }
}

TEST(SceneFiles, LoadSceneReportsTheFileNameInValidationErrors) {
  TempFolder tmp;
  tmp.write("bad.json", R"({"bodies": [{"primitive": {"type": "sheet"}, "model": "fem"}]})");
  const fs::path path = tmp.path() / "bad.json";
  try {
    (void)loadScene(path);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path.string() +
                  ": bodies[0].model = \"fem\": must be one of 'mass_spring', 'fiber', "
                  "'discrete_shell', 'inelastic_shell', 'mls_solid', 'thick_shell'");
  }
}

// ---------------------------------------------------------------------------------------
// Docs

// docs/scene-reference.md is generated from the same tables the parser uses. To refresh it:
//   shellsim scene-reference > docs/scene-reference.md
// or run this test with SHELLSIM_UPDATE_DOCS=1 in the environment.
TEST(SceneDocs, ReferenceIsInSyncWithTheParser) {
  const fs::path doc = kSourceDir / "docs" / "scene-reference.md";
  const std::string generated = sceneReferenceMarkdown();
  if (const char* update = std::getenv("SHELLSIM_UPDATE_DOCS");
      update && std::string(update) == "1") {
    std::ofstream(doc, std::ios::binary) << generated;
  }
  EXPECT_TRUE(readText(doc) == generated)
      << doc.string() << " is out of date. Regenerate it with\n"
      << "  shellsim scene-reference > docs/scene-reference.md\n"
      << "or run test_scene with SHELLSIM_UPDATE_DOCS=1.";
}

TEST(SceneDocs, ReferenceMentionsEveryKeyAndModel) {
  const std::string md = sceneReferenceMarkdown();
  for (const char* key : {"`young_modulus`", "`poisson`", "`half_extents`", "`frame_rate`",
                          "`time_step`", "`initial_velocity`", "`rotation_degrees`", "`formats`",
                          "`vertices`", "`restitution`", "## keyframe"}) {
    EXPECT_NE(md.find(key), std::string::npos) << key;
  }
  for (const auto& model : knownModelNames()) EXPECT_NE(md.find(model), std::string::npos);
}

TEST(SceneFiber, ValuesAreReadAndCountAndSpacingExcludeEachOther) {
  json scene = minimalScene();
  scene["bodies"][0]["fiber"] = {
      {"node_count", 500}, {"neighbours", 10}, {"arc_length_samples", 6}, {"bend_stiffness", 0.25}};
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  EXPECT_EQ(s.bodies[0].options<FiberDef>().nodeCount, 500);
  EXPECT_EQ(s.bodies[0].options<FiberDef>().neighbours, 10);
  EXPECT_EQ(s.bodies[0].options<FiberDef>().arcLengthSamples, 6);
  EXPECT_EQ(s.bodies[0].options<FiberDef>().bendStiffness, 0.25);
  EXPECT_FALSE(s.bodies[0].options<FiberDef>().stretchStiffness.has_value());

  scene["bodies"][0]["fiber"] = {{"node_count", 500}, {"node_spacing", 0.1}, {"neighbours", 2}};
  const std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("bodies[0].fiber: give at most one of 'node_count' and 'node_spacing'"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("bodies[0].fiber.neighbours = 2: must be in [4, 32]"), std::string::npos)
      << message;
}

// The perfect flow has no creep rates: giving one is refused (it would be silently unused),
// and a perfect plasticity survives the writer and reader.
TEST(SceneFiber, PerfectPlasticFlowRefusesCreepRatesAndRoundTrips) {
  json scene = minimalScene();
  json& body = scene["bodies"][0];
  body["model"] = "fiber";
  body["fiber"] = {{"plasticity", {{"flow", "perfect"}, {"yield_angle", 0.01}}}};
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  const FiberDef& f = s.bodies[0].options<FiberDef>();
  ASSERT_TRUE(f.plasticity);
  EXPECT_EQ(f.plasticity->flow, FiberPlasticFlow::kPerfect);
  EXPECT_EQ(f.plasticity->yieldAngle, 0.01);
  const SceneDef again = parseScene(sceneToJson(s), "again.json", ".");
  EXPECT_EQ(again.bodies[0].options<FiberDef>().plasticity, f.plasticity);

  body["fiber"] = {{"plasticity", {{"flow", "perfect"}, {"bend_creep", 40}}}};
  std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("bodies[0].fiber.plasticity: 'stretch_creep' and 'bend_creep' are rates "
                         "of the creep flow"),
            std::string::npos)
      << message;
  body["fiber"] = {{"plasticity", {{"flow", "instant"}}}};
  message = errorOfJson(scene);
  EXPECT_NE(message.find("bodies[0].fiber.plasticity.flow = \"instant\""), std::string::npos)
      << message;
}

TEST(SceneFiber, ResampleRoundTripsAndChecksItsSpacing) {
  json scene = minimalScene();
  json& body = scene["bodies"][0];
  body["model"] = "fiber";
  body["fiber"] = {{"resample", {{"max_spacing", 2.5}}}};
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  const FiberDef& f = s.bodies[0].options<FiberDef>();
  ASSERT_TRUE(f.resample);
  EXPECT_EQ(f.resample->maxSpacing, 2.5);
  const SceneDef again = parseScene(sceneToJson(s), "again.json", ".");
  EXPECT_EQ(again.bodies[0].options<FiberDef>().resample, f.resample);

  body["fiber"] = {{"resample", {{"max_spacing", 1.2}}}};
  std::string message = errorOfJson(scene);
  EXPECT_NE(message.find("bodies[0].fiber.resample.max_spacing"), std::string::npos) << message;
  // Clustered nodes, drawn through the dense input or not (the binding follows new nodes).
  body["fiber"] = {{"node_count", 50}, {"resample", json::object()}};
  EXPECT_NO_THROW((void)parseScene(scene.dump(), "scene.json", "."));
  body["fiber"] = {
      {"node_count", 50}, {"resample", json::object()}, {"high_resolution_surface", "off"}};
  EXPECT_NO_THROW((void)parseScene(scene.dump(), "scene.json", "."));
}

TEST(SceneInelastic, FiberPlasticityFractureRegionsLoadsAndPressureAreReadAndChecked) {
  json scene = minimalScene();
  json& body = scene["bodies"][0];
  body["model"] = "fiber";
  body["fiber"] = {
      {"plasticity", {{"yield_angle", 0.1}}},
      {"fracture", {{"stretch_limit", 1.2}, {"cooldown_steps", 3}, {"min_piece_nodes", 4}}},
      {"regions", {{{"shape", "sphere"}, {"radius", 0.2}, {"fracture_scale", 0.3}}}},
      {"anisotropy", {{"axis", {0, 1, 0}}, {"ratio", 2}}},
      {"high_resolution_surface", "off"}};
  body["loads"] = {{{"shape", "box"},
                    {"force", {0, 0, -2}},
                    {"ramp", {{{"time", 0}, {"value", 0}}, {{"time", 1}, {"value", 1}}}}}};
  body["pressure"] = {{"pressure", 500}};
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  const FiberDef& f = s.bodies[0].options<FiberDef>();
  ASSERT_TRUE(f.plasticity && f.fracture && f.anisotropy);
  EXPECT_EQ(f.plasticity->yieldAngle, 0.1);
  EXPECT_EQ(f.plasticity->yieldStrain, FiberPlasticityDef{}.yieldStrain);
  EXPECT_EQ(f.fracture->stretchLimit, 1.2);
  EXPECT_EQ(f.fracture->cooldownSteps, 3);
  EXPECT_EQ(f.fracture->minPieceNodes, 4);
  EXPECT_EQ(parseScene(sceneToJson(s), "again.json", ".").bodies[0].options<FiberDef>().fracture,
            f.fracture);
  ASSERT_EQ(f.regions.size(), 1u);
  EXPECT_EQ(f.regions[0].shape, PinShape::kSphere);
  EXPECT_EQ(f.regions[0].fractureScale, 0.3);
  EXPECT_EQ(f.anisotropy->ratio, 2);
  EXPECT_FALSE(f.highResolutionSurface);
  ASSERT_EQ(s.bodies[0].loads.size(), 1u);
  EXPECT_EQ(s.bodies[0].loads[0].ramp.size(), 2u);
  ASSERT_TRUE(s.bodies[0].pressure);
  EXPECT_EQ(s.bodies[0].pressure->pressure, 500);
  EXPECT_TRUE(s.bodies[0].pressure->releaseOnFracture);
  EXPECT_EQ(s.bodies[0].pressure->vent, VentModel::kExponential);

  // The orifice vent and its gas; the exponential vent's time is refused with it.
  body["pressure"] = {{"pressure", 500}, {"vent", "orifice"}, {"gas_density", 0.17}};
  const PressureDef orifice = *parseScene(scene.dump(), "scene.json", ".").bodies[0].pressure;
  EXPECT_EQ(orifice.vent, VentModel::kOrifice);
  EXPECT_EQ(orifice.gasDensity, 0.17);
  EXPECT_EQ(orifice.ambientPressure, 101325);
  EXPECT_EQ(orifice.dischargeCoefficient, 0.61);
  body["pressure"] = {{"pressure", 500},
                      {"vent", "orifice"},
                      {"vent_time", 0.1},
                      {"gas_density", 0},
                      {"discharge_coefficient", 1.5}};
  const std::string ventMessage = errorOfJson(scene);
  for (const char* expected :
       {"bodies[0].pressure.vent_time: is not used when vent is 'orifice'",
        "bodies[0].pressure.gas_density = 0: must be > 0",
        "bodies[0].pressure.discharge_coefficient = 1.5: must be in (0, 1]"}) {
    EXPECT_NE(ventMessage.find(expected), std::string::npos) << expected << "\n" << ventMessage;
  }
  body["pressure"] = {{"pressure", 500}, {"vent", "valve"}};
  EXPECT_NE(errorOfJson(scene).find("bodies[0].pressure.vent = \"valve\""), std::string::npos)
      << errorOfJson(scene);

  body["fiber"] = {
      {"fracture", {{"stretch_limit", 0.9}, {"broken_ratio", 0}, {"min_piece_nodes", -1}}},
      {"regions", {{{"shape", "cone"}}}},
      {"anisotropy", {{"axis", {0, 0, 0}}}}};
  body["loads"] = {
      {{"shape", "box"}, {"ramp", {{{"time", 1}, {"value", 0}}, {{"time", 0.5}, {"value", 1}}}}}};
  body["pressure"] = json::object();
  const std::string message = errorOfJson(scene);
  for (const char* expected :
       {"bodies[0].fiber.fracture.stretch_limit = 0.9: must be > 1",
        "bodies[0].fiber.fracture.broken_ratio = 0: must be in (0, 1]",
        "bodies[0].fiber.fracture.min_piece_nodes = -1",
        "bodies[0].fiber.regions[0].shape = \"cone\"", "bodies[0].fiber.anisotropy.axis",
        "bodies[0].loads[0].ramp[1].time = 0.5: must be greater than the previous key's time",
        "bodies[0].pressure.pressure"}) {
    EXPECT_NE(message.find(expected), std::string::npos) << expected << "\n" << message;
  }
}

TEST(SceneDiscreteShell, OptionsAreReadAndCheckedAndIntegratorsToo) {
  json scene = minimalScene();
  scene["bodies"][0]["model"] = "discrete_shell";
  scene["bodies"][0]["discrete_shell"] = {{"bend_stiffness", 0.5}, {"hessian", "projected"}};
  scene["time"]["integrator"] = "newmark";
  scene["time"]["newmark_gamma"] = 0.6;
  const SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  EXPECT_EQ(s.bodies[0].options<DiscreteShellDef>().bendStiffness, 0.5);
  EXPECT_TRUE(s.bodies[0].options<DiscreteShellDef>().projectHessian);
  EXPECT_FALSE(s.bodies[0].options<DiscreteShellDef>().stretchStiffness.has_value());
  EXPECT_EQ(s.time.integrator, Integrator::kNewmark);
  EXPECT_EQ(s.time.newmarkGamma, 0.6);
  EXPECT_EQ(s.time.newmarkBeta, 0.25);
  EXPECT_TRUE(s.time.newtonFrozenHessian);
  EXPECT_FALSE(s.time.newtonQuasiNewton);
  scene["time"]["newton_hessian"] = "exact";
  EXPECT_FALSE(parseScene(scene.dump(), "scene.json", ".").time.newtonFrozenHessian);
  scene["time"]["newton_hessian"] = "quasi_newton";
  const TimeDef quasiNewton = parseScene(scene.dump(), "scene.json", ".").time;
  EXPECT_TRUE(quasiNewton.newtonQuasiNewton);
  EXPECT_TRUE(quasiNewton.newtonFrozenHessian);  // what it falls back on

  scene["bodies"][0]["discrete_shell"] = {{"stretch_stiffness", -1}, {"hessian", "psd"}};
  scene["time"]["integrator"] = "implicit";
  scene["time"]["newmark_beta"] = 0.7;
  scene["time"]["newton_hessian"] = "lagged";
  const std::string message = errorOfJson(scene);
  for (const char* expected :
       {"bodies[0].discrete_shell.stretch_stiffness = -1: must be > 0",
        "bodies[0].discrete_shell.hessian = \"psd\": must be one of 'exact', 'projected'",
        "time.integrator = \"implicit\": must be one of 'verlet', 'newmark', 'backward_euler'",
        "time.newmark_beta = 0.7: must be in [0, 0.5]",
        "time.newton_hessian = \"lagged\": must be one of 'frozen', 'exact', 'quasi_newton'"}) {
    EXPECT_NE(message.find(expected), std::string::npos) << expected << "\n" << message;
  }
}

}  // namespace
// ---------------------------------------------------------------------------------------
// The camera of rendered previews (output.camera)

TEST(SceneCamera, AbsentMeansFitted) {
  const SceneDef s = parseScene(minimalScene().dump(), "scene.json", ".");
  EXPECT_FALSE(s.output.camera.has_value());
}

TEST(SceneCamera, ValuesAndDefaultsAreRead) {
  json scene = minimalScene();
  scene["output"]["camera"] = {{"eye", {1, -2, 1.5}}, {"target", {0, 0, 0.3}}};
  SceneDef s = parseScene(scene.dump(), "scene.json", ".");
  ASSERT_TRUE(s.output.camera.has_value());
  EXPECT_EQ(s.output.camera->eye, (Vec3d{1, -2, 1.5}));
  EXPECT_EQ(s.output.camera->target, (Vec3d{0, 0, 0.3}));
  EXPECT_EQ(s.output.camera->up, (Vec3d{0, 0, 1}));
  EXPECT_EQ(s.output.camera->fovDegrees, 40);
  scene["output"]["camera"]["up"] = {0, 1, 0};
  scene["output"]["camera"]["fov"] = 60;
  s = parseScene(scene.dump(), "scene.json", ".");
  EXPECT_EQ(s.output.camera->up, (Vec3d{0, 1, 0}));
  EXPECT_EQ(s.output.camera->fovDegrees, 60);
}

TEST(SceneCamera, BadCamerasAreRejectedWithTheirPaths) {
  json scene = minimalScene();
  scene["output"]["camera"] = {{"target", {0, 0, 0}}};
  EXPECT_NE(errorOfJson(scene).find("output.camera.eye: is required"), std::string::npos);
  scene["output"]["camera"] = {{"eye", {1, 1, 1}}, {"target", {1, 1, 1}}};
  EXPECT_NE(errorOfJson(scene).find("output.camera.target = [1,1,1]: must differ from camera.eye"),
            std::string::npos);
  scene["output"]["camera"] = {{"eye", {0, 0, 5}}, {"target", {0, 0, 0}}};
  EXPECT_NE(errorOfJson(scene).find("output.camera.up = [0,0,1]: must not be parallel"),
            std::string::npos);
  scene["output"]["camera"] = {{"eye", {0, -5, 0}}, {"target", {0, 0, 0}}, {"fov", 180}};
  EXPECT_NE(errorOfJson(scene).find("output.camera.fov = 180: must be in [1, 179]"),
            std::string::npos);
}

// sceneToJson writes what parseScene reads back to the same definitions: every example scene
// and the corpus scene that sets every key (file paths resolved, so the folders may differ).
TEST(SceneWriter, EveryExampleSceneReadsBackToTheSameDefinitions) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kSourceDir / "scenes")) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  files.push_back(kSourceDir / "fuzz" / "corpus" / "scene" / "valid_all_keys.json");
  ASSERT_GE(files.size(), 10u);
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    const SceneDef scene = loadScene(file);
    const std::string text = sceneToJson(scene);
    const SceneDef back = parseScene(text, "written.json", scene.sceneFolder);
    EXPECT_EQ(back, scene) << text;
  }
}

TEST(SceneWriter, NonDefaultValuesOfEveryKindSurviveTheRoundTrip) {
  SceneDef scene = loadScene(kSourceDir / "fuzz" / "corpus" / "scene" / "valid_all_keys.json");
  ASSERT_FALSE(scene.bodies.empty());
  BodyDef& body = scene.bodies[0];
  body.material.stiffness = 123.5;
  body.options<FiberDef>().anisotropy = FiberAnisotropyDef{{0, 1, 0}, 2.5};
  body.options<DiscreteShellDef>().projectHessian = true;
  body.options<DiscreteShellDef>().bendStiffness = 0.25;
  ASSERT_TRUE(body.options<FiberDef>().fracture.has_value());
  body.options<FiberDef>().fracture->delay = 0.015;
  ASSERT_FALSE(body.pins.empty());
  body.pins[0].path = {{0, {0, 0, 0}}, {0.5, {0, 0.1, 0}}};
  body.pins[0].release = 0.75;
  body.initialVelocity = {0.1, -0.2, 1.0 / 3.0};  // not a short decimal
  scene.time.integrator = Integrator::kBackwardEuler;
  scene.time.newtonFrozenHessian = false;
  scene.output.formats = {OutputFormat::kVtp, OutputFormat::kObj};
  body.pressure = PressureDef{.pressure = 900,
                              .ramp = {{0, 0}, {1, 1}},
                              .vent = VentModel::kOrifice,
                              .ambientPressure = 9e4,
                              .gasDensity = 0.17,
                              .dischargeCoefficient = 0.8};
  const SceneDef back = parseScene(sceneToJson(scene), "written.json", scene.sceneFolder);
  EXPECT_EQ(back, scene);
  scene.time.newtonFrozenHessian = true;
  scene.time.newtonQuasiNewton = true;
  EXPECT_EQ(parseScene(sceneToJson(scene), "written.json", scene.sceneFolder), scene);
}

TEST(DefinitionChecks, ABodyMadeInCodeIsCheckedAsTheSceneReaderChecksAFile) {
  BodyDef body;
  body.name = "leaf";
  EXPECT_NO_THROW(validateBody(body, "bodies[3]", true));
  // Without geometry in memory it needs a file or a primitive.
  try {
    validateBody(body, "bodies[3]", false);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bodies[3]: needs a geometry"), std::string::npos)
        << e.what();
  }
  body.material.poisson = 0.7;
  body.options<FiberDef>().neighbours = 2;
  body.model = "fibre";
  try {
    validateBody(body, "bodies[3]", true);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("shellsim: bodies[3].material.poisson = 0.7: must be in [0, 0.5)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("bodies[3].fiber.neighbours = 2"), std::string::npos) << what;
    EXPECT_NE(what.find("bodies[3].model = \"fibre\""), std::string::npos) << what;
  }
  body = BodyDef{};
  body.material.density = std::nan("");
  EXPECT_THROW(validateBody(body, "bodies[0]", true), InputError);
}

TEST(DefinitionChecks, ObstaclesAndTimeSettingsMadeInCodeAreChecked) {
  ObstacleDef sphere;
  sphere.type = ObstacleType::kSphere;
  EXPECT_NO_THROW(validateObstacle(sphere, "obstacles[0]"));
  sphere.radius = -1;
  sphere.friction = -0.5;
  try {
    validateObstacle(sphere, "obstacles[1]");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("obstacles[1].radius = -1"), std::string::npos) << what;
    EXPECT_NE(what.find("obstacles[1].friction = -0.5"), std::string::npos) << what;
  }
  TimeDef time;
  EXPECT_NO_THROW(validateTime(time, "time"));
  time.newmarkBeta = 0.75;
  EXPECT_THROW(validateTime(time, "time"), InputError);
}

// Definitions handed over as JSON text (the Python module's dictionaries): the same values
// as the scene reader gives, every problem listed under the caller's path, and a body whose
// mesh comes as arrays may not name a file or primitive.
TEST(DefinitionChecks, DefinitionsFromJsonTextReadAsInAScene) {
  const BodyDef body = parseBodyDef(
      R"({"name": "leaf", "model": "discrete_shell", "material": {"poisson": 0.4},
          "pins": [{"shape": "sphere", "radius": 0.1}]})",
      "add_body", true);
  EXPECT_EQ(body.name, "leaf");
  EXPECT_EQ(body.model, "discrete_shell");
  EXPECT_EQ(body.material.poisson, 0.4);
  EXPECT_EQ(body.pins.size(), 1U);
  EXPECT_FALSE(body.primitive.has_value());
  const BodyDef back = parseBodyDef(definitionToJson(body), "again", true);
  EXPECT_EQ(back, body);
  const BodyDef primitive =
      parseBodyDef(R"({"primitive": {"type": "sphere", "resolution": 4}})", "add_body", false);
  ASSERT_TRUE(primitive.primitive.has_value());
  EXPECT_EQ(primitive.primitive->type, PrimitiveType::kSphere);
  // Unnamed, it is named by the simulation it joins ("body<i>"), not as a file's first body:
  // two unnamed bodies added to one simulation were both "body0", and the second refused.
  EXPECT_EQ(primitive.name, "");
  Simulation sim;
  for (int k = 0; k < 2; ++k) (void)sim.addBody(primitive);
  EXPECT_EQ(sim.bodyName(1), "body1");
  try {
    (void)parseBodyDef(R"({"file": "a.obj", "material": {"poisson": 0.7}, "modle": 1})", "add_body",
                       true);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("shellsim: add_body.file"), std::string::npos) << what;
    EXPECT_NE(what.find("add_body.material.poisson = 0.7"), std::string::npos) << what;
    EXPECT_NE(what.find("did you mean 'model'"), std::string::npos) << what;
  }
  EXPECT_THROW((void)parseBodyDef("[1, 2]", "add_body", true), InputError);
  EXPECT_THROW((void)parseBodyDef("{\"name\": ", "add_body", true), InputError);
  const ObstacleDef ball = parseObstacleDef(
      R"({"type": "sphere", "radius": 0.2, "mass": 1, "response": "penalty"})", "add_obstacle");
  EXPECT_EQ(ball.type, ObstacleType::kSphere);
  EXPECT_EQ(ball.mass, 1.0);
  EXPECT_EQ(parseObstacleDef(definitionToJson(ball), "again"), ball);
  EXPECT_THROW((void)parseObstacleDef(R"({"type": "sphere", "mass": 1})", "add_obstacle"),
               InputError);  // thrown needs penalty
  EXPECT_EQ(parsePinDef(R"({"shape": "vertices", "vertices": [0, 3]})", "add_pin").vertices,
            (std::vector<int32_t>{0, 3}));
  EXPECT_THROW((void)parsePinDef(R"({"shape": "vertices"})", "add_pin"), InputError);
  EXPECT_EQ(parseLoadDef(R"({"shape": "box", "force": [0, 0, -2]})", "add_load").force,
            (Vec3d{0, 0, -2}));
  const TimeDef implicit = parseTimeDef(R"({"integrator": "backward_euler"})", "time");
  EXPECT_EQ(implicit.integrator, Integrator::kBackwardEuler);
  EXPECT_THROW((void)parseTimeDef(R"({"frame_rate": 0})", "time"), InputError);
  EXPECT_NO_THROW((void)parseContactDef(R"({"enabled": "on"})", "contact", implicit));
  EXPECT_THROW((void)parseContactDef(R"({"enabled": "maybe"})", "contact", implicit), InputError);
}

}  // namespace shellsim

namespace shellsim {
namespace {

TEST(ModelOptions, CopiesAreDeepAndAbsentOptionsEqualTheirDefaults) {
  BodyDef a, b;
  EXPECT_EQ(a, b);
  (void)a.options<FiberDef>();  // made with its defaults: still equal to none
  EXPECT_TRUE(a.modelOptions.has("fiber"));
  EXPECT_EQ(a, b);
  EXPECT_EQ(b, a);
  a.options<FiberDef>().nodeCount = 7;
  EXPECT_NE(a, b);
  EXPECT_NE(b, a);
  BodyDef copy = a;
  copy.options<FiberDef>().nodeCount = 8;
  EXPECT_EQ(a.options<FiberDef>().nodeCount, 7);
  EXPECT_NE(copy, a);
  const BodyDef& untouched = b;
  EXPECT_EQ(untouched.options<FiberDef>(), FiberDef{});
  EXPECT_FALSE(untouched.modelOptions.has("fiber"));
  a.options<DiscreteShellDef>().projectHessian = true;
  EXPECT_TRUE(a.options<DiscreteShellDef>().projectHessian);
  EXPECT_EQ(a.options<FiberDef>().nodeCount, 7);
}

}  // namespace
}  // namespace shellsim
