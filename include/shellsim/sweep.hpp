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
  // More columns of the report: paths into each run's summary.json ("steps_rejected",
  // "frames[-1].bodies[0].cracks"; [-1] is the last entry of a list).
  std::vector<std::string> reportFields;
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

// A variant's folder name: its index with four digits at least ("0007").
[[nodiscard]] std::string sweepVariantName(int32_t index);

// What running one variant takes, decided from its folder: skip it (its summary says
// completed), resume it (it left a checkpoint and a summary), or start it.
struct SweepTask {
  enum class Action { kSkip, kResume, kStart };
  int32_t index = 0;
  std::filesystem::path scene;   // <out>/variants/NNNN/scene.json
  std::filesystem::path folder;  // <out>/variants/NNNN
  Action action = Action::kStart;
  std::string why;  // one line for the log: "completed before", "resumes from frame 12", ...
};
[[nodiscard]] SweepTask sweepTaskFor(const std::filesystem::path& folder, int32_t index);
// The task of variant `index` of the sweep written in `out` (`shellsim sweep-variant`, one
// Slurm array task, one farm task): InputError for an index the sweep does not have, IoError
// naming a missing sweep.json or scene.json.
[[nodiscard]] SweepTask sweepTask(const std::filesystem::path& out, int32_t index);

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

// `shellsim sweep --slurm`: a job array with one task per variant and a report job after it.
struct SlurmOptions {
  std::filesystem::path executable;  // shellsim, at the same path on every node
  std::string partition;             // empty: the cluster's default partition
  std::string timeLimit;             // per task, as sbatch --time takes it; empty: the partition's
  int32_t cpusPerTask = 1;           // also the task's --threads
  int32_t maxRunning = 0;            // tasks at once (--array=0-N%max); 0: as many as fit
  std::vector<std::string> sbatchOptions;  // more #SBATCH lines, each "--name[=value]"
};
struct SlurmScripts {
  std::filesystem::path arrayScript;   // <out>/slurm/sweep_array.sbatch
  std::filesystem::path reportScript;  // <out>/slurm/sweep_report.sbatch
  std::filesystem::path submitScript;  // <out>/slurm/submit.sh: both, the report after the array
  int32_t tasks = 0;
};
// Writes the variants (writeSweepVariants) and the scripts. Each array task runs
// `shellsim sweep-variant OUT $SLURM_ARRAY_TASK_ID` (skip, resume or start, as sweepTask
// decides) with its log appended to the variant's run.log, and is requeueable: a task
// preempted or requeued continues from its checkpoint. The report job depends on the array
// with afterany, so that failed variants are reported rather than leaving the report unwritten.
// InputError for options sbatch would refuse or a script could not carry (a malformed time
// limit, a partition or folder with spaces or quotes, an option that does not start with --).
SlurmScripts writeSlurmScripts(const SweepDef& sweep, const std::vector<SweepVariant>& variants,
                               const std::filesystem::path& out, const SlurmOptions& options);

struct SlurmSubmission {
  std::string arrayJob, reportJob;  // job ids as sbatch printed them
  std::filesystem::path record;     // <out>/slurm/jobs.json
};
// Submits the scripts with `sbatch` (the array, then the report job depending on it) and
// records the job ids in <out>/slurm/jobs.json. IoError with sbatch's own message when it
// refuses or is not installed.
SlurmSubmission submitSlurmScripts(const SlurmScripts& scripts,
                                   const std::string& sbatch = "sbatch");

struct SweepReport {
  std::filesystem::path csv, markdown;
  int32_t completed = 0, failed = 0, missing = 0;  // missing: not run (yet)
};
// `shellsim sweep-report`: <out>/report.csv and report.md, one row per variant: its values,
// status, frames, simulated and wall time, steps, final kinetic and potential energy,
// pieces, the sweep file's report_fields and `extraFields` (paths into summary.json; empty
// where a summary lacks one), and the error of a failed one. IoError / InputError naming a
// missing or broken sweep.json, InputError for an extra field that is not a path.
SweepReport writeSweepReport(const std::filesystem::path& out,
                             const std::vector<std::string>& extraFields = {});

}  // namespace shellsim
