// Running the system's tools (ffmpeg, Blender) and shellsim itself as child processes.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace shellsim {

struct ProcessResult {
  int spawnError = 0;  // errno of posix_spawnp (ENOENT: not on PATH); 0: it ran
  bool exited = false;
  int code = 0;  // exit code, or the signal that ended it
  [[nodiscard]] bool succeeded() const { return spawnError == 0 && exited && code == 0; }
  [[nodiscard]] std::string how() const;  // "exit code 2", "signal 9", why it did not start
};

// Starts args[0] (looked up on PATH unless it holds a '/') with `args`, stdin from
// /dev/null, stdout and stderr to `log`. Returns its process id, or -1 with
// result.spawnError set.
pid_t startProgram(std::vector<std::string> args, const std::filesystem::path& log,
                   ProcessResult& result);
// Waits for a started process (pid > 0), or for any child (pid = -1, `waited` set to which).
ProcessResult waitProgram(pid_t pid, pid_t* waited = nullptr);
// startProgram, then waitProgram.
[[nodiscard]] ProcessResult runProgram(std::vector<std::string> args,
                                       const std::filesystem::path& log);

}  // namespace shellsim
