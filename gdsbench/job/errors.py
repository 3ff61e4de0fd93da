"""Errors users see, and the exit codes the CLI gives them.

Every message is one line that names the parameter at fault and the fix. The
native core raises the same classes (its bindings translate C++ exceptions).
"""

import re
import reprlib

# how much of a user's value an error quotes: enough to recognise it, one line whatever the input
QUOTE_LIMIT = 80
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 2 * QUOTE_LIMIT  # then clipped at the end
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8
_REPR.maxlevel = 3


def clip(text: str, limit: int = QUOTE_LIMIT) -> str:
    """Text a user wrote, as an error shows it: on one line (line breaks shown as \\n), cut to `limit`
    characters with "…" (never megabytes)."""
    text = str(text).replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def quoted(value, limit: int = QUOTE_LIMIT) -> str:
    """A user's value as an error quotes it (its repr), clipped; bounded in time and memory too, where
    repr() of a YAML alias bomb would build gigabytes (reprlib stops at a few items and levels)."""
    try:
        return clip(_REPR.repr(value), limit)
    except ValueError:  # an int past Python's 4,300 digits for str()
        return "a number of more than 4,300 digits"


class GdsbenchError(Exception):
    """Base of every error gdsbench reports to a user; never shown as a traceback."""

    exit_code = 1


class UsageError(GdsbenchError):
    """Bad input: an option value, a target path, a spec file."""

    exit_code = 2


class TargetMissing(UsageError):
    """The target named is not there (HTTP's 404, FTP's answer to SIZE, a share's ENOENT): what a
    command that makes new targets (prepare over a protocol) tells from other bad input."""


class IncompatibleOptions(UsageError):
    """Options that make no sense together (psync with QD>1). A sweep skips such
    points with a note instead of failing."""


def renamed_flags(error: UsageError, renames: dict[str, str]) -> UsageError:
    """The same refusal of a job a command made, naming its flags as that command spells them
    (checkpoint's read job: --read-bs for --bs; kvcache's movers: --io-threads for --threads)."""
    flag = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, renames)) + r")\b")
    return type(error)(flag.sub(lambda m: renames[m.group(1)], str(error)))


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
