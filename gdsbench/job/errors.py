"""Errors users see, and the exit codes the CLI gives them.

Every message is one line that names the parameter at fault and the fix. The
native core raises the same classes (its bindings translate C++ exceptions).
"""


class GdsbenchError(Exception):
    """Base of every error gdsbench reports to a user; never shown as a traceback."""

    exit_code = 1


class UsageError(GdsbenchError):
    """Bad input: an option value, a target path, a spec file."""

    exit_code = 2


class IncompatibleOptions(UsageError):
    """Options that make no sense together (psync with QD>1). A sweep skips such
    points with a note instead of failing."""


class IoFailure(GdsbenchError):
    """The storage failed during a run (read error, short read)."""

    exit_code = 3


class VerifyFailure(GdsbenchError):
    """--verify found blocks whose contents do not match the prepared pattern.
    The measurement is not lost: it is the exception's .result."""

    exit_code = 4

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result


# Exit code after Ctrl-C: the shell convention 128 + SIGINT.
EXIT_INTERRUPTED = 130
