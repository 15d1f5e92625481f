// Parameter sweeps (wedges): a base scene and the values to vary, expanded into one scene
// per variant (`shellsim sweep`, docs/sweeps.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace shellsim {

// One varied value: a path into the scene's JSON ("bodies[0].material.young_modulus") and
// the values it takes, each as JSON text.
struct SweepParameter {
  std::string path;
  std::vector<std::string> values;
};

struct SweepDef {
  std::filesystem::path sweepFile;    // as given
  std::string baseScene;              // the base scene file as given, or "default"
  std::filesystem::path sceneFolder;  // where the base scene's relative paths resolve
  std::string baseSceneJson;          // the base scene as sceneToJson writes it, every key
  bool zip = false;                   // true: the i-th values go together; false: every combination
  std::vector<SweepParameter> parameters;
  int64_t variantCount = 0;  // grid: the product of the value counts; zip: the common count
};

struct SweepVariant {
  int32_t index = 0;
  std::vector<std::pair<std::string, std::string>> values;  // (path, JSON text) per parameter
  std::string sceneJson;  // the variant's scene, valid (parseScene reads it)
};

// Reads and checks a sweep file: InputError lists every problem with its path (an unknown
// key of the sweep file or a path the base scene does not have, an empty list, a value of
// another type than the scene's, a range whose step is zero or points away from its end).
[[nodiscard]] SweepDef loadSweep(const std::filesystem::path& path);

// The variants in order (grid: the last parameter varies fastest), each checked as a scene
// file is; InputError names the variant and its values for one that is not a valid scene.
[[nodiscard]] std::vector<SweepVariant> expandSweep(const SweepDef& sweep);

// Writes <out>/sweep.json (the parameters and every variant's values) and, for each
// variant, <out>/variants/NNNN/scene.json and variant.json (its index and values), all
// atomically. Returns the variant folders.
std::vector<std::filesystem::path> writeSweepVariants(const SweepDef& sweep,
                                                      const std::vector<SweepVariant>& variants,
                                                      const std::filesystem::path& out);

struct SweepRunOptions {
  std::filesystem::path executable;                   // the shellsim program each variant runs with
  int32_t jobs = 1;                                   // variants at a time, >= 1
  std::function<void(const std::string&)> onMessage;  // one line per variant started / ended
};
struct SweepRunReport {
  int32_t ran = 0, skipped = 0, failed = 0;  // skipped: already completed
};
// `shellsim sweep --local`: writes the variants, then runs each one whose summary does not say
// completed (`executable run scene.json --out <folder> -q`, with --resume where a checkpoint
// was left), `jobs` at a time, each with its output in <folder>/run.log; then writes the
// report (writeSweepReport). A variant that fails is counted and reported, never dropped.
SweepRunReport runSweepLocally(const SweepDef& sweep, const std::vector<SweepVariant>& variants,
                               const std::filesystem::path& out, const SweepRunOptions& options);

struct SweepReport {
  std::filesystem::path csv, markdown;
  int32_t completed = 0, failed = 0, missing = 0;  // missing: not run (yet)
};
// `shellsim sweep-report`: <out>/report.csv and report.md, one row per variant: its values,
// status, frames, simulated and wall time, steps, final kinetic and potential energy,
// pieces, and the error of a failed one. IoError / InputError naming a missing or broken
// sweep.json.
SweepReport writeSweepReport(const std::filesystem::path& out);

}  // namespace shellsim
