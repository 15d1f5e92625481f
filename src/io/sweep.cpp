// Sweep files (shellsim/sweep.hpp). The paths address the base scene as sceneToJson writes
// it, every key present, so a path that names nothing there is a typo, reported with the
// keys that exist at that level.
#include "shellsim/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "core/subprocess.hpp"
#include "io/json_fields.hpp"
#include "io/json_file.hpp"
#include "io/json_guard.hpp"
#include "shellsim/errors.hpp"
#include "shellsim/io.hpp"
#include "shellsim/run.hpp"
#include "shellsim/scene.hpp"

namespace shellsim {

namespace {

namespace fs = std::filesystem;
using json_fields::Json;
using json_fields::Problems;

// The steps of a path: object keys and array indices.
struct Step {
  std::string key;  // empty for an index
  bool isIndex = false;
  int64_t index = 0;  // < 0 counts from the end: [-1] is the last entry
};

// "bodies[0].material.young_modulus" -> bodies, [0], material, young_modulus; false when
// the text is not a path.
bool splitPath(const std::string& path, std::vector<Step>& steps) {
  steps.clear();
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '[') {
      const size_t close = path.find(']', i);
      if (close == std::string::npos || close == i + 1) return false;
      const bool fromEnd = path[i + 1] == '-';
      const size_t first = i + 1 + (fromEnd ? 1 : 0);
      if (first == close) return false;
      int64_t index = 0;
      for (size_t k = first; k < close; ++k) {
        if (path[k] < '0' || path[k] > '9' || index > 1'000'000) return false;
        index = 10 * index + (path[k] - '0');
      }
      if (fromEnd && index == 0) return false;
      steps.push_back({"", true, fromEnd ? -index : index});
      i = close + 1;
      if (i < path.size() && path[i] == '.') ++i;
      continue;
    }
    size_t end = i;
    while (end < path.size() && path[end] != '.' && path[end] != '[') ++end;
    if (end == i) return false;
    steps.push_back({path.substr(i, end - i), false, 0});
    i = end;
    if (i < path.size() && path[i] == '.') ++i;
  }
  return !steps.empty();
}

constexpr const char* kNotAPath =
    "is not a path (keys joined by '.', list entries as [i], [-1] the last)";

// The value at `path` in `root` (named `rootName` in messages), or nullptr with `why` set;
// J is Json or const Json.
template <typename J>
J* find(J& root, const std::string& path, std::string& why,
        const std::string& rootName = "the scene") {
  std::vector<Step> steps;
  if (!splitPath(path, steps)) {
    why = kNotAPath;
    return nullptr;
  }
  J* at = &root;
  std::string where = rootName;
  for (const Step& step : steps) {
    if (step.isIndex) {
      const int64_t size = at->is_array() ? static_cast<int64_t>(at->size()) : 0;
      const int64_t index = step.index < 0 ? size + step.index : step.index;
      if (!at->is_array() || index < 0 || index >= size) {
        why = where + " has no entry [" + std::to_string(step.index) + "]" +
              (at->is_array() ? " (it has " + std::to_string(size) + ")" : "");
        return nullptr;
      }
      at = &(*at)[static_cast<size_t>(index)];
      where += "[" + std::to_string(step.index) + "]";
      continue;
    }
    if (!at->is_object() || !at->contains(step.key)) {
      std::vector<std::string> keys;
      if (at->is_object()) {
        for (const auto& [key, value] : at->items()) keys.push_back(key);
      }
      std::vector<std::string_view> views(keys.begin(), keys.end());
      why = where + " has no key '" + step.key + "'; " + json_fields::suggestion(step.key, views);
      return nullptr;
    }
    at = &(*at)[step.key];
    where = where == rootName ? step.key : where + "." + step.key;
  }
  return at;
}

bool sameKind(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return true;
  return a.type() == b.type();
}

constexpr int64_t kMaxValuesPerParameter = 100'000;

}  // namespace

SweepDef loadSweep(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw IoError(path.string() + ": no such file");
  const std::string source = path.string();
  Problems problems(source);
  const Json root = json_guard::parseJson(readTextFile(path), source, problems);
  problems.throwIfAny();
  if (!root.is_object()) throw InputError(source + ": the top level must be a JSON object {...}");
  SweepDef sweep;
  sweep.sweepFile = path;
  for (const auto& [key, value] : root.items()) {
    if (key != "scene" && key != "combine" && key != "parameters" && key != "report_fields") {
      static constexpr std::string_view kKeys[] = {"scene", "combine", "parameters",
                                                   "report_fields"};
      problems.add(key, value, "unknown key; " + json_fields::suggestion(key, kKeys));
    }
  }
  // The base scene, as JSON with every key written.
  fs::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  SceneDef base;
  sweep.baseScene = "default";
  if (const auto it = root.find("scene"); it != root.end()) {
    if (!it->is_string() || it->get<std::string>().empty()) {
      problems.add("scene", *it, "must be the path of a scene file (relative to the sweep file)");
    } else {
      sweep.baseScene = it->get<std::string>();
      const fs::path scenePath = fs::path(sweep.baseScene).is_absolute() ? fs::path(sweep.baseScene)
                                                                         : folder / sweep.baseScene;
      base = loadScene(scenePath);  // its own errors name it
    }
  } else {
    base = defaultScene();
  }
  sweep.sceneFolder = base.sceneFolder;
  sweep.baseSceneJson = sceneToJson(base);
  Json scene = Json::parse(sweep.baseSceneJson);
  if (const auto it = root.find("combine"); it != root.end()) {
    if (*it == "zip") {
      sweep.zip = true;
    } else if (*it != "grid") {
      problems.add("combine", *it, "must be \"grid\" (every combination) or \"zip\" (in step)");
    }
  }
  if (const auto it = root.find("report_fields"); it != root.end()) {
    if (!it->is_array()) {
      problems.add("report_fields", *it,
                   "must be a list of paths into a run's summary.json, e.g. "
                   "[\"steps_rejected\", \"frames[-1].bodies[0].cracks\"]");
    } else {
      std::vector<Step> steps;
      for (size_t f = 0; f < it->size(); ++f) {
        const Json& field = (*it)[f];
        if (!field.is_string() || !splitPath(field.get<std::string>(), steps)) {
          problems.add("report_fields[" + std::to_string(f) + "]", field, kNotAPath);
        } else {
          sweep.reportFields.push_back(field.get<std::string>());
        }
      }
    }
  }
  const auto list = root.find("parameters");
  if (list == root.end() || !list->is_array() || list->empty()) {
    problems.add("parameters", list == root.end() ? Json() : *list,
                 "must list at least one parameter {\"path\": ..., \"values\" | \"range\" | "
                 "\"seeds\": ...}");
  } else {
    for (size_t p = 0; p < list->size(); ++p) {
      const Json& entry = (*list)[p];
      const std::string at = "parameters[" + std::to_string(p) + "]";
      if (!entry.is_object()) {
        problems.add(at, entry, "must be an object");
        continue;
      }
      SweepParameter parameter;
      int sources = 0;
      for (const auto& [key, value] : entry.items()) {
        static constexpr std::string_view kKeys[] = {"path", "values", "range", "seeds"};
        if (key != "path" && key != "values" && key != "range" && key != "seeds") {
          problems.add(at + "." + key, value,
                       "unknown key; " + json_fields::suggestion(key, kKeys));
        } else if (key != "path") {
          ++sources;
        }
      }
      if (sources != 1) {
        problems.add(at, "give exactly one of \"values\", \"range\" or \"seeds\"");
        continue;
      }
      const auto pathIt = entry.find("path");
      if (pathIt == entry.end() || !pathIt->is_string()) {
        problems.add(at + ".path", pathIt == entry.end() ? Json() : *pathIt,
                     "must be a path into the scene, e.g. \"bodies[0].material.young_modulus\"");
        continue;
      }
      parameter.path = pathIt->get<std::string>();
      std::string why;
      const Json* current = find(scene, parameter.path, why);
      if (current == nullptr) {
        problems.add(at + ".path", *pathIt, why);
        continue;
      }
      std::vector<Json> values;
      if (const auto v = entry.find("values"); v != entry.end()) {
        if (!v->is_array() || v->empty()) {
          problems.add(at + ".values", *v, "must be a non-empty list");
          continue;
        }
        values.assign(v->begin(), v->end());
      } else if (const auto r = entry.find("range"); r != entry.end()) {
        const bool numbers = r->is_array() && r->size() == 3 && (*r)[0].is_number() &&
                             (*r)[1].is_number() && (*r)[2].is_number();
        if (!numbers) {
          problems.add(at + ".range", *r, "must be [from, to, step], numbers");
          continue;
        }
        const double from = (*r)[0].get<double>(), to = (*r)[1].get<double>(),
                     step = (*r)[2].get<double>();
        if (!(std::isfinite(from) && std::isfinite(to) && std::isfinite(step)) || step == 0 ||
            (to - from) / step < 0) {
          problems.add(at + ".range", *r,
                       step == 0 ? "the step must not be 0"
                                 : "the step must lead from `from` to `to` (finite numbers)");
          continue;
        }
        const double count = std::floor((to - from) / step * (1 + 1e-12) + 1e-9) + 1;
        if (count > kMaxValuesPerParameter) {
          problems.add(at + ".range", *r, "gives more than 100000 values");
          continue;
        }
        const bool integers = (*r)[0].is_number_integer() && (*r)[1].is_number_integer() &&
                              (*r)[2].is_number_integer();
        for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) {
          const double value = from + static_cast<double>(k) * step;
          values.push_back(integers ? Json(static_cast<int64_t>(std::llround(value)))
                                    : Json(value));
        }
      } else {
        const Json& seeds = entry["seeds"];
        if (!seeds.is_number_integer() || seeds.get<int64_t>() < 1 ||
            seeds.get<int64_t>() > kMaxValuesPerParameter) {
          problems.add(at + ".seeds", seeds, "must be a count of seeds, 1 to 100000 (1, 2, ...)");
          continue;
        }
        for (int64_t s = 1; s <= seeds.get<int64_t>(); ++s) values.push_back(Json(s));
      }
      bool typed = true;
      for (size_t k = 0; k < values.size(); ++k) {
        if (!sameKind(values[k], *current)) {
          problems.add(at + ".values[" + std::to_string(k) + "]", values[k],
                       "must be a " + std::string(current->type_name()) + ", as " + parameter.path +
                           " is in the scene");
          typed = false;
        }
      }
      if (!typed) continue;
      for (const Json& value : values) parameter.values.push_back(value.dump());
      sweep.parameters.push_back(std::move(parameter));
    }
  }
  problems.throwIfAny();
  if (sweep.zip) {
    const size_t count = sweep.parameters.front().values.size();
    for (size_t p = 0; p < sweep.parameters.size(); ++p) {
      if (sweep.parameters[p].values.size() != count) {
        problems.add("parameters[" + std::to_string(p) + "]",
                     "has " + std::to_string(sweep.parameters[p].values.size()) +
                         " values; zipped parameters need as many as parameters[0] (" +
                         std::to_string(count) + ")");
      }
    }
    sweep.variantCount = static_cast<int64_t>(count);
  } else {
    double product = 1;
    for (const SweepParameter& p : sweep.parameters)
      product *= static_cast<double>(p.values.size());
    if (product > 1e9) problems.add("parameters", "the grid has more than a billion variants");
    sweep.variantCount = static_cast<int64_t>(product);
  }
  problems.throwIfAny();
  return sweep;
}

std::vector<SweepVariant> expandSweep(const SweepDef& sweep) {
  const Json scene = Json::parse(sweep.baseSceneJson);
  std::vector<SweepVariant> variants;
  variants.reserve(static_cast<size_t>(sweep.variantCount));
  for (int64_t v = 0; v < sweep.variantCount; ++v) {
    SweepVariant variant;
    variant.index = static_cast<int32_t>(v);
    Json json = scene;
    int64_t rest = v;
    // Grid: mixed radix, the last parameter fastest; zip: the v-th value of each.
    std::vector<size_t> picks(sweep.parameters.size());
    for (size_t p = sweep.parameters.size(); p-- > 0;) {
      const auto n = static_cast<int64_t>(sweep.parameters[p].values.size());
      picks[p] = static_cast<size_t>(sweep.zip ? v : rest % n);
      if (!sweep.zip) rest /= n;
    }
    for (size_t p = 0; p < sweep.parameters.size(); ++p) {
      const SweepParameter& parameter = sweep.parameters[p];
      const std::string& value = parameter.values[picks[p]];
      std::string why;
      Json* at = find(json, parameter.path, why);
      if (at == nullptr)
        throw InputError(sweep.sweepFile.string() + ": " + parameter.path + ": " + why);
      *at = Json::parse(value);
      variant.values.emplace_back(parameter.path, value);
    }
    variant.sceneJson = json.dump(2) + "\n";
    std::string name = sweep.sweepFile.string() + ": variant " + std::to_string(v) + " (";
    for (size_t p = 0; p < variant.values.size(); ++p) {
      name += (p > 0 ? ", " : "") + variant.values[p].first + " = " + variant.values[p].second;
    }
    name += ")";
    (void)parseScene(variant.sceneJson, name, sweep.sceneFolder);  // every problem, named
    variants.push_back(std::move(variant));
  }
  return variants;
}

std::string sweepVariantName(int32_t index) {
  char name[16];
  std::snprintf(name, sizeof name, "%04d", index);
  return name;
}

SweepTask sweepTaskFor(const fs::path& folder, int32_t index) {
  SweepTask task;
  task.index = index;
  task.folder = folder;
  task.scene = folder / "scene.json";
  if (!fs::exists(task.scene)) {
    throw IoError(task.scene.string() + ": no such file (write the variants with shellsim sweep)");
  }
  if (!fs::exists(folder / "summary.json")) {
    task.why = "starts";
    return task;
  }
  RunStatus status;
  try {
    status = readRunStatus(folder);
  } catch (const Error& e) {
    task.why = std::string("starts again (") + e.what() + ")";
    return task;
  }
  if (status.status == "completed") {
    task.action = SweepTask::Action::kSkip;
    task.why = "completed before, skipped";
  } else if (fs::exists(folder / "checkpoint.bin")) {
    task.action = SweepTask::Action::kResume;
    task.why = "resumes from its checkpoint (" + status.status + ", " +
               std::to_string(status.framesWritten) + " frames written)";
  } else {
    task.why = "starts again (" + status.status + ", no checkpoint)";
  }
  return task;
}

SweepTask sweepTask(const fs::path& out, int32_t index) {
  const Json description = readJsonFile(out / "sweep.json");
  const Json& variants = description.value("variants", Json::array());
  for (const Json& variant : variants) {
    if (variant.is_object() && variant.value("index", -1) == index) {
      return sweepTaskFor(out / variant.value("folder", "variants/" + sweepVariantName(index)),
                          index);
    }
  }
  throw InputError((out / "sweep.json").string() + ": no variant " + std::to_string(index) +
                   " (the sweep has " + std::to_string(variants.size()) + ", from 0)");
}

namespace {

void writeJson(const fs::path& path, const Json& json) {
  writeFileAtomically(path, [&](std::ostream& out) { out << json.dump(2) << '\n'; });
}

}  // namespace

std::vector<fs::path> writeSweepVariants(const SweepDef& sweep,
                                         const std::vector<SweepVariant>& variants,
                                         const fs::path& out) {
  Json description;
  description["sweep"] = sweep.sweepFile.string();
  description["scene"] = sweep.baseScene;
  description["combine"] = sweep.zip ? "zip" : "grid";
  Json paths = Json::array();
  for (const SweepParameter& p : sweep.parameters) paths.push_back(p.path);
  description["parameters"] = paths;
  description["report_fields"] = sweep.reportFields;
  Json list = Json::array();
  std::vector<fs::path> folders;
  for (const SweepVariant& variant : variants) {
    const fs::path folder = out / "variants" / sweepVariantName(variant.index);
    std::error_code ec;
    fs::create_directories(folder, ec);
    if (ec) throw IoError(folder.string() + ": cannot create: " + ec.message());
    writeFileAtomically(folder / "scene.json", [&](std::ostream& o) { o << variant.sceneJson; });
    Json values = Json::object();
    for (const auto& [path, value] : variant.values) values[path] = Json::parse(value);
    writeJson(folder / "variant.json", {{"index", variant.index}, {"values", values}});
    list.push_back({{"index", variant.index},
                    {"folder", "variants/" + sweepVariantName(variant.index)},
                    {"values", values}});
    folders.push_back(folder);
  }
  description["variants"] = list;
  writeJson(out / "sweep.json", description);
  return folders;
}

SweepRunReport runSweepLocally(const SweepDef& sweep, const std::vector<SweepVariant>& variants,
                               const fs::path& out, const SweepRunOptions& options) {
  if (options.jobs < 1) throw InputError("sweep: jobs must be >= 1");
  const std::vector<fs::path> folders = writeSweepVariants(sweep, variants, out);
  SweepRunReport report;
  const auto say = [&](const std::string& line) {
    if (options.onMessage) options.onMessage(line);
  };
  // Variants still to run, in order; at most `jobs` running at once.
  std::vector<size_t> queue;
  std::vector<SweepTask> tasks;
  for (size_t v = 0; v < folders.size(); ++v) {
    tasks.push_back(sweepTaskFor(folders[v], variants[v].index));
    if (tasks.back().action == SweepTask::Action::kSkip) {
      ++report.skipped;
      say("variant " + sweepVariantName(variants[v].index) + ": " + tasks.back().why);
    } else {
      queue.push_back(v);
    }
  }
  std::map<pid_t, size_t> running;
  size_t next = 0;
  while (next < queue.size() || !running.empty()) {
    while (next < queue.size() && static_cast<int32_t>(running.size()) < options.jobs) {
      const size_t v = queue[next++];
      const fs::path& folder = folders[v];
      std::vector<std::string> args = {options.executable.string(),
                                       "run",
                                       (folder / "scene.json").string(),
                                       "--out",
                                       folder.string(),
                                       "-q",
                                       "--threads",
                                       "1"};
      if (tasks[v].action == SweepTask::Action::kResume) args.emplace_back("--resume");
      ProcessResult started;
      const pid_t pid = startProgram(args, folder / "run.log", started);
      if (pid < 0) {
        throw IoError(options.executable.string() + ": cannot start: " + started.how());
      }
      running[pid] = v;
      say("variant " + sweepVariantName(variants[v].index) + ": " + tasks[v].why);
    }
    pid_t done = -1;
    const ProcessResult result = waitProgram(-1, &done);
    const auto it = running.find(done);
    if (it == running.end()) continue;  // not ours
    const size_t v = it->second;
    running.erase(it);
    ++report.ran;
    if (!result.succeeded()) ++report.failed;
    say("variant " + sweepVariantName(variants[v].index) + ": " +
        (result.succeeded()
             ? "completed"
             : "failed (" + result.how() + "; see " + (folders[v] / "run.log").string() + ")"));
  }
  (void)writeSweepReport(out);
  return report;
}

SweepReport writeSweepReport(const fs::path& out, const std::vector<std::string>& extraFields) {
  const Json description = readJsonFile(out / "sweep.json");
  std::vector<std::string> parameters, fields;
  try {
    parameters = description.at("parameters").get<std::vector<std::string>>();
    fields = description.value("report_fields", std::vector<std::string>());
  } catch (const Json::exception&) {
    throw InputError((out / "sweep.json").string() + ": no parameter list");
  }
  std::vector<Step> steps;
  for (const std::string& field : extraFields) {
    if (!splitPath(field, steps)) throw InputError("--field '" + field + "' " + kNotAPath);
    if (std::find(fields.begin(), fields.end(), field) == fields.end()) fields.push_back(field);
  }
  struct Row {
    std::vector<std::string> cells;
  };
  std::vector<std::string> header = {"variant"};
  header.insert(header.end(), parameters.begin(), parameters.end());
  for (const char* column :
       {"status", "frames", "time_s", "wall_s", "steps", "kinetic_J", "potential_J", "pieces"}) {
    header.emplace_back(column);
  }
  header.insert(header.end(), fields.begin(), fields.end());
  header.emplace_back("error");
  SweepReport report;
  std::vector<Row> rows;
  for (const Json& variant : description.at("variants")) {
    Row row;
    const int32_t index = variant.at("index").get<int32_t>();
    row.cells.push_back(sweepVariantName(index));
    for (const std::string& p : parameters) row.cells.push_back(variant.at("values").at(p).dump());
    const fs::path folder = out / variant.at("folder").get<std::string>();
    if (!fs::exists(folder / "summary.json")) {
      ++report.missing;
      row.cells.emplace_back("not run");
      row.cells.resize(header.size());
      rows.push_back(std::move(row));
      continue;
    }
    const Json summary = readJsonFile(folder / "summary.json");
    const RunStatus status = readRunStatus(folder);
    const Json& frames = summary.value("frames", Json::array());
    const Json last = frames.empty() ? Json::object() : frames.back();
    int64_t pieces = 0;
    for (const Json& body : last.value("bodies", Json::array())) pieces += body.value("pieces", 1);
    const auto number = [](double v) { return json_fields::formatNumber(v); };
    if (status.status == "completed") {
      ++report.completed;
    } else {
      ++report.failed;
    }
    row.cells.push_back(status.stale ? "stopped" : status.status);
    row.cells.push_back(std::to_string(frames.size()));
    row.cells.push_back(number(last.value("time", 0.0)));
    row.cells.push_back(number(last.value("wall_seconds", 0.0)));
    row.cells.push_back(std::to_string(summary.value("steps", int64_t{0})));
    row.cells.push_back(number(last.value("kinetic_energy", 0.0)));
    row.cells.push_back(number(last.value("potential_energy", 0.0)));
    row.cells.push_back(std::to_string(pieces));
    for (const std::string& field : fields) {
      std::string why;
      const Json* value = find(summary, field, why, "summary.json");
      row.cells.push_back(value == nullptr     ? ""
                          : value->is_string() ? value->get<std::string>()
                          : value->is_number() ? number(value->get<double>())
                                               : value->dump());
    }
    row.cells.push_back(status.status == "completed" ? "" : status.error);
    rows.push_back(std::move(row));
  }
  // CSV: fields with a comma, quote or line break quoted, quotes doubled.
  const auto csvField = [](const std::string& text) {
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
  };
  report.csv = out / "report.csv";
  writeFileAtomically(report.csv, [&](std::ostream& o) {
    for (size_t c = 0; c < header.size(); ++c) o << (c > 0 ? "," : "") << csvField(header[c]);
    o << '\n';
    for (const Row& row : rows) {
      for (size_t c = 0; c < row.cells.size(); ++c) {
        o << (c > 0 ? "," : "") << csvField(row.cells[c]);
      }
      o << '\n';
    }
  });
  const auto mdField = [](std::string text) {
    for (size_t at = 0; (at = text.find('|', at)) != std::string::npos; at += 2) {
      text.replace(at, 1, "\\|");
    }
    for (char& c : text) c = c == '\n' ? ' ' : c;
    return text;
  };
  report.markdown = out / "report.md";
  writeFileAtomically(report.markdown, [&](std::ostream& o) {
    o << "# Sweep " << description.value("sweep", std::string()) << "\n\n"
      << report.completed << " completed, " << report.failed << " failed or stopped, "
      << report.missing << " not run, of " << rows.size() << " variants ("
      << description.value("combine", std::string("grid")) << " of " << parameters.size()
      << " parameters).\n\n|";
    for (const std::string& h : header) o << ' ' << mdField(h) << " |";
    o << "\n|";
    for (size_t c = 0; c < header.size(); ++c) o << "---|";
    o << '\n';
    for (const Row& row : rows) {
      o << '|';
      for (const std::string& cell : row.cells) o << ' ' << mdField(cell) << " |";
      o << '\n';
    }
  });
  return report;
}

}  // namespace shellsim
