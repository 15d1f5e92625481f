#include "shellsim/errors.hpp"

namespace shellsim {

ExitCode Error::exitCode() const {
  switch (kind_) {
    case ErrorKind::kBadInput: return ExitCode::kBadInput;
    case ErrorKind::kNumerical: return ExitCode::kNumerical;
    case ErrorKind::kIo: return ExitCode::kIo;
  }
  return ExitCode::kInternal;
}

}  // namespace shellsim
