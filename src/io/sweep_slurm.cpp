// `shellsim sweep --slurm`: the batch scripts of a sweep's job array and its report job
// (shellsim/sweep.hpp, docs/sweeps.md).
//
// Each array task is `shellsim sweep-variant OUT $SLURM_ARRAY_TASK_ID`: the task, not the
// script, decides whether its variant is skipped, resumed or started, so that the same
// command serves a first run, a requeue after preemption, a resubmission after a time limit
// and any other farm. A SIGTERM (scancel, preemption, the time limit) makes the run write its
// checkpoint and stop; the next attempt resumes from it with the same frames.
#include <chrono>
#include <regex>
#include <sstream>

#include "core/subprocess.hpp"
#include "io/json_fields.hpp"
#include "io/json_file.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/sweep.hpp"

namespace shellsim {

namespace {

namespace fs = std::filesystem;

// Text bash reads as one word, whatever it holds.
std::string shellQuoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

// sbatch reads #SBATCH lines itself, without a shell: a value there cannot be quoted, and
// '%' starts one of its file-name patterns.
bool fitsSbatchLine(const std::string& text) {
  return text.find_first_of(" \t\r\n'\"\\%#") == std::string::npos;
}

void checkSlurmOptions(const SlurmOptions& options, const fs::path& out) {
  std::vector<std::string> problems;
  if (options.executable.empty() || !options.executable.is_absolute()) {
    problems.push_back("the shellsim program must be named by an absolute path (got '" +
                       options.executable.string() + "')");
  }
  if (!options.partition.empty() &&
      !std::regex_match(options.partition, std::regex("[A-Za-z0-9_.,-]+"))) {
    problems.push_back(
        "--partition '" + options.partition +
        "': a partition name (letters, digits, '_', '.', '-'; several joined by ',')");
  }
  // sbatch --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED / INFINITE.
  static const std::regex kTime(
      R"((\d+(:\d{1,2}){0,2})|(\d+-\d{1,2}(:\d{1,2}){0,2})|UNLIMITED|INFINITE)");
  if (!options.timeLimit.empty() && !std::regex_match(options.timeLimit, kTime)) {
    problems.push_back("--time '" + options.timeLimit +
                       "': expected minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED");
  }
  if (options.cpusPerTask < 1) {
    problems.push_back("--cpus " + std::to_string(options.cpusPerTask) + ": must be >= 1");
  }
  if (options.maxRunning < 0) {
    problems.push_back("--max-running " + std::to_string(options.maxRunning) +
                       ": must be >= 1, or 0 for no limit");
  }
  for (const std::string& option : options.sbatchOptions) {
    if (option.size() < 3 || option.rfind("--", 0) != 0 ||
        option.find_first_of("\r\n") != std::string::npos) {
      problems.push_back("--sbatch '" + option +
                         "': one sbatch option on one line, starting with -- (--account=lab)");
    }
  }
  if (!fitsSbatchLine(out.string())) {
    problems.push_back(out.string() +
                       ": the sweep folder's path goes into #SBATCH --output lines, which "
                       "cannot hold spaces, quotes, '#' or '%': choose another folder");
  }
  if (!problems.empty()) {
    std::string message = "sweep --slurm:";
    for (const std::string& p : problems) message += "\n  " + p;
    throw InputError(message);
  }
}

void writeScript(const fs::path& path, const std::string& text) {
  writeFileAtomically(path, [&](std::ostream& o) { o << text; });
  std::error_code ec;
  fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add, ec);
  if (ec) throw IoError(path.string() + ": cannot make executable: " + ec.message());
}

// The job id in sbatch --parsable's output: "1234" or "1234;cluster" on its own line.
std::string parsedJobId(const std::string& output) {
  static const std::regex kId(R"(^(\d+)(;\S+)?$)");
  std::istringstream lines(output);
  std::string line, id;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (std::regex_match(line, match, kId)) id = match[1];
  }
  return id;
}

}  // namespace

SlurmScripts writeSlurmScripts(const SweepDef& sweep, const std::vector<SweepVariant>& variants,
                               const fs::path& out, const SlurmOptions& options) {
  if (variants.empty()) throw InputError(sweep.sweepFile.string() + ": no variants");
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw IoError(out.string() + ": cannot create: " + ec.message());
  const fs::path folder = fs::weakly_canonical(fs::absolute(out));
  checkSlurmOptions(options, folder);
  (void)writeSweepVariants(sweep, variants, out);

  const fs::path slurm = folder / "slurm";
  fs::create_directories(slurm, ec);
  if (ec) throw IoError(slurm.string() + ": cannot create: " + ec.message());
  SlurmScripts scripts;
  scripts.tasks = static_cast<int32_t>(variants.size());
  scripts.arrayScript = slurm / "sweep_array.sbatch";
  scripts.reportScript = slurm / "sweep_report.sbatch";
  scripts.submitScript = slurm / "submit.sh";

  std::string name = sweep.sweepFile.stem().string();
  if (!std::regex_match(name, std::regex("[A-Za-z0-9_.-]+"))) name = "sweep";
  const auto common = [&](std::ostringstream& s) {
    if (!options.partition.empty()) s << "#SBATCH --partition=" << options.partition << '\n';
    for (const std::string& option : options.sbatchOptions) s << "#SBATCH " << option << '\n';
  };
  const std::string program = shellQuoted(options.executable.string());
  const std::string sweepFolder = shellQuoted(folder.string());

  std::ostringstream array;
  array << "#!/bin/bash\n"
        << "# One task per variant of the sweep " << sweep.sweepFile.filename().string() << " ("
        << variants.size() << " variants), written by `shellsim sweep --slurm`.\n"
        << "# Submit with submit.sh (the report job runs once every task has ended). A task\n"
        << "# skips a variant that completed, resumes one that left a checkpoint (after a\n"
        << "# requeue, a preemption or the time limit) and starts the others; its output is\n"
        << "# appended to the variant's run.log.\n"
        << "#SBATCH --job-name=shellsim-" << name << '\n'
        << "#SBATCH --array=0-" << variants.size() - 1;
  if (options.maxRunning > 0) array << '%' << options.maxRunning;
  array << '\n'
        << "#SBATCH --ntasks=1\n"
        << "#SBATCH --cpus-per-task=" << options.cpusPerTask << '\n';
  if (!options.timeLimit.empty()) array << "#SBATCH --time=" << options.timeLimit << '\n';
  // %4a: the task index with four digits, as the variant folders are named.
  array << "#SBATCH --output=" << (folder / "variants" / "%4a" / "run.log").string() << '\n'
        << "#SBATCH --open-mode=append\n"
        << "#SBATCH --requeue\n";
  common(array);
  array << "set -euo pipefail\n"
        << "exec " << program << " sweep-variant " << sweepFolder
        << " \"$SLURM_ARRAY_TASK_ID\" --threads \"${SLURM_CPUS_PER_TASK:-1}\"\n";
  writeScript(scripts.arrayScript, array.str());

  std::ostringstream report;
  report << "#!/bin/bash\n"
         << "# The report of the sweep " << sweep.sweepFile.filename().string()
         << ": report.csv, report.md and sweep_sheet.png in the sweep's folder.\n"
         << "#SBATCH --job-name=shellsim-" << name << "-report\n"
         << "#SBATCH --ntasks=1\n"
         << "#SBATCH --cpus-per-task=" << options.cpusPerTask << '\n';
  if (!options.timeLimit.empty()) report << "#SBATCH --time=" << options.timeLimit << '\n';
  report << "#SBATCH --output=" << (slurm / "report.log").string() << '\n';
  common(report);
  report << "set -euo pipefail\n"
         << "exec " << program << " sweep-report " << sweepFolder
         << " --threads \"${SLURM_CPUS_PER_TASK:-1}\"\n";
  writeScript(scripts.reportScript, report.str());

  std::ostringstream submit;
  submit << "#!/bin/bash\n"
         << "# Submits the sweep's job array, then its report job to run once every task has\n"
         << "# ended (afterany: a failed variant is reported, not left without a report).\n"
         << "set -euo pipefail\n"
         << "array=$(sbatch --parsable " << shellQuoted(scripts.arrayScript.string()) << ")\n"
         << "array=${array%%;*}\n"
         << "report=$(sbatch --parsable --dependency=afterany:\"$array\" "
         << shellQuoted(scripts.reportScript.string()) << ")\n"
         << "report=${report%%;*}\n"
         << "echo \"array job $array (" << variants.size() << " tasks), report job $report\"\n";
  writeScript(scripts.submitScript, submit.str());
  return scripts;
}

SlurmSubmission submitSlurmScripts(const SlurmScripts& scripts, const std::string& sbatch) {
  const fs::path slurm = scripts.arrayScript.parent_path();
  const auto submit = [&](std::vector<std::string> args, const std::string& what) {
    args.insert(args.begin(), {sbatch, "--parsable"});
    const fs::path log = slurm / ("sbatch_" + what + ".log");
    const ProcessResult result = runProgram(args, log);
    if (result.spawnError != 0) {
      throw IoError(sbatch + " " + args.back() + ": " + result.how() + " (is Slurm installed?)");
    }
    const std::string output = readTextFile(log);
    const std::string id = parsedJobId(output);
    if (!result.succeeded() || id.empty()) {
      throw IoError(sbatch + " " + args.back() + ": " + result.how() + ": " + output);
    }
    return id;
  };
  SlurmSubmission submission;
  submission.arrayJob = submit({scripts.arrayScript.string()}, "array");
  submission.reportJob = submit(
      {"--dependency=afterany:" + submission.arrayJob, scripts.reportScript.string()}, "report");
  submission.record = slurm / "jobs.json";
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  json_fields::Json record = {{"array_job", submission.arrayJob},
                              {"report_job", submission.reportJob},
                              {"tasks", scripts.tasks},
                              {"submitted_unix", static_cast<int64_t>(now)}};
  writeFileAtomically(submission.record, [&](std::ostream& o) { o << record.dump(2) << '\n'; });
  return submission;
}

}  // namespace shellsim
