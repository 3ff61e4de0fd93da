"""Reports written where the user says (`--junit`, `--metrics`): checked before anything
runs, so a measurement is never lost to a typo; never put over a file gdsbench did not
write; and written whole, then renamed into place, so no reader sees half of one."""

from __future__ import annotations

import os
from collections.abc import Callable

from gdsbench.job.errors import UsageError


def check(flag: str, path: str, ours: Callable[[str], bool], what: str, example: str,
          error: type[Exception] = UsageError) -> None:
    """`error` unless a report can be written at path: its folder exists and takes a file, and
    what is there already, if anything, is an earlier report of this kind (ours(path)) or empty.
    example: a file name to suggest where path is a directory. flag: the option named in the
    error ("" where argparse names it: an argument type checks the file as the flag is parsed)."""
    flag = f"{flag} " if flag else ""
    if os.path.isdir(path):
        raise error(f"{flag}{path}: is a directory; give a file name in it, e.g. {os.path.join(path, example)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise error(f"{flag}{path}: the folder {folder} does not exist; create it or write elsewhere")
    if os.path.islink(path) or (os.path.exists(path) and not os.path.isfile(path)):
        raise error(f"{flag}{path}: not a regular file; gdsbench writes {what} only as a file of its own")
    if os.path.isfile(path) and os.path.getsize(path) and not ours(path):
        raise error(f"{flag}{path}: exists and is not {what} gdsbench wrote; gdsbench replaces only its own: "
                    "choose another name, or remove the file")
    try:
        os.close(os.open(_temporary(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.unlink(_temporary(path))
    except OSError as e:
        raise error(f"{flag}{path}: cannot write there ({e.strerror}); write elsewhere") from None


def starts_with(path: str, text: str) -> bool:
    """Whether the file's first bytes are `text` (how a report of ours is told from a stranger)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(text.encode())) == text.encode()
    except OSError:
        return False


def write_whole(path: str, write: Callable[[str], None]) -> None:
    """write(temporary) in path's folder, then renamed to path: readers see the old file or the new."""
    tmp = _temporary(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _temporary(path: str) -> str:
    """A name of this process's own beside path, hidden (a collector reading *.prom skips it)."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.{os.getpid()}.tmp")
