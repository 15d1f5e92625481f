// Errors and process exit codes shared by the library and the command-line tool.
#pragma once

#include <stdexcept>
#include <string>

namespace shellsim {

// Exit codes of the `shellsim` tool; `shellsim --help` lists them.
enum class ExitCode : int {
  kSuccess = 0,
  kInternal = 1,   // a bug in shellsim: please report it
  kBadInput = 2,   // bad command line, scene file or geometry file
  kNumerical = 3,  // the simulation blew up (NaN, energy or velocity beyond a bound)
  kIo = 4,         // a file could not be read or written
  // Stopped on request (SIGINT: 128 + 2, the shell's code for Ctrl-C; the tool returns
  // 128 + 15 for SIGTERM), after writing what it had finished.
  kInterrupted = 130,
};

enum class ErrorKind { kBadInput, kNumerical, kIo, kInterrupted };

// Every error shellsim raises on purpose. The message is one line that names the file
// and line/byte offset, the scene path of a value, or the body and frame.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  [[nodiscard]] ErrorKind kind() const { return kind_; }
  [[nodiscard]] ExitCode exitCode() const;

 private:
  ErrorKind kind_;
};

// Malformed or impossible input: a scene value, geometry file content, a CLI argument.
class InputError : public Error {
 public:
  explicit InputError(const std::string& message) : Error(ErrorKind::kBadInput, message) {}
};

// The simulation state became invalid (NaN, blow-up).
class NumericalError : public Error {
 public:
  explicit NumericalError(const std::string& message) : Error(ErrorKind::kNumerical, message) {}
};

// A path could not be opened, read, written or renamed.
class IoError : public Error {
 public:
  explicit IoError(const std::string& message) : Error(ErrorKind::kIo, message) {}
};

// A stop was requested (Simulation::setStopFlag, RunOptions::stopFlag) and honoured between
// two steps: the simulation is where it was before the advance that was stopped.
class Interrupted : public Error {
 public:
  explicit Interrupted(const std::string& message) : Error(ErrorKind::kInterrupted, message) {}
};

}  // namespace shellsim
