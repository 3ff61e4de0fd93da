// One line on stderr when a process is ended by SIGTERM. MPI launchers end the
// surviving ranks with SIGTERM when one rank dies (Open MPI: SIGCONT, SIGTERM,
// later SIGKILL). A rank is then usually blocked inside MPI or the native run,
// where a Python signal handler never gets to run, so the handler is C and does
// only what is safe in a signal handler: write(2), then _exit(2).
#pragma once
#include <string>

namespace gds {

// From now on, SIGTERM writes `line` to stderr and exits with 128 + SIGTERM.
// Calling it again replaces the line.
void say_on_sigterm(const std::string& line);

}  // namespace gds
