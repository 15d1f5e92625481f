#include "shellsim/errors.hpp"

namespace shellsim {

ExitCode Error::exitCode() const {
  switch (kind_) {
    case ErrorKind::kBadInput: return ExitCode::kBadInput;
    case ErrorKind::kNumerical: return ExitCode::kNumerical;
    case ErrorKind::kIo: return ExitCode::kIo;
    case ErrorKind::kInterrupted: return ExitCode::kInterrupted;
  }
  return ExitCode::kInternal;
}

}  // namespace shellsim
