#include "core/subprocess.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shellsim/errors.hpp"

extern char** environ;

namespace shellsim {

pid_t startProgram(std::vector<std::string> args, const std::filesystem::path& log,
                   ProcessResult& result) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  result = {};
  result.spawnError = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return result.spawnError == 0 ? pid : -1;
}

ProcessResult waitProgram(pid_t pid, pid_t* waited) {
  int status = 0;
  pid_t done = -1;
  while ((done = waitpid(pid, &status, 0)) < 0) {
    if (errno != EINTR)
      throw IoError("waiting for a child process failed: " + std::string(std::strerror(errno)));
  }
  if (waited != nullptr) *waited = done;
  ProcessResult result;
  result.exited = WIFEXITED(status);
  result.code = result.exited ? WEXITSTATUS(status) : WTERMSIG(status);
  return result;
}

ProcessResult runProgram(std::vector<std::string> args, const std::filesystem::path& log) {
  ProcessResult result;
  const pid_t pid = startProgram(std::move(args), log, result);
  if (pid < 0) return result;
  return waitProgram(pid);
}

std::string ProcessResult::how() const {
  if (spawnError != 0) return std::strerror(spawnError);
  return exited ? "exit code " + std::to_string(code) : "signal " + std::to_string(code);
}

}  // namespace shellsim
