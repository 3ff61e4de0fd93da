// Errors raised by the native core. The bindings translate them into
// gdsbench.job.errors.UsageError (bad input: the message names the parameter and
// the fix; Missing as its TargetMissing) and gdsbench.job.errors.IoFailure (the
// storage failed during a run).
#pragma once
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace gds {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The target named is not there (HTTP's 404, FTP's answer to SIZE, ENOENT): bad input too, but
// one a caller that makes new targets (prepare over a protocol) can tell from the others.
struct Missing : InputError {
  using InputError::InputError;
};

struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

#define GDS_EXPECT(cond, message)                               \
  do {                                                          \
    if (!(cond)) throw ::gds::InputError(std::string(message)); \
  } while (0)

}  // namespace gds
