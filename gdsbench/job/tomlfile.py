"""TOML files users write (sweep files, validate profiles): read with errors
that name the file and line, since tomllib gives values without positions."""

from __future__ import annotations

import re
from typing import Any

from gdsbench.job.errors import UsageError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?")
_KEY = re.compile(r"^\s*([\"']?)([A-Za-z0-9_.\-]+)\1\s*=")


def read(path: str, flag: str, error=UsageError) -> tuple[dict[str, Any], str]:
    """The parsed file and its text; `error` (one line, naming the flag or line) if it cannot be read."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise error(f"{flag} {path}: {e.strerror}") from None
    text = decode(raw, f"{flag} {path}", "TOML", error)
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as e:  # its message ends "(at line N, column M)"
        raise error(f"{path}: not valid TOML: {e}") from None
    except RecursionError:  # arrays in arrays, thousands deep
        raise error(f"{flag} {path}: nested too deeply (its values are a level or two deep)") from None
    except ValueError:  # an integer past Python's 4,300 digits
        raise error(f"{flag} {path}: a number of more than 4,300 digits; no setting is that large") from None


def decode(raw: bytes, where: str, kind: str, error=UsageError) -> str:
    """A file's bytes as UTF-8 text; `error` (one line: where, the line, what the file should be) if not."""
    try:
        return raw.decode()
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise error(f"{where} line {line}: not a text file ({kind}, UTF-8)") from None


def line_of(text: str, key: str, table: str = "") -> int | None:
    """The line where `key` is set (key = ...) inside [table] ("" for the top
    level), or where [table.key] is opened."""
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            current = header.group(1).replace('"', "").replace("'", "")
            if current == (f"{table}.{key}" if table else key):
                return number
            continue
        found = _KEY.match(line)
        if found and current == table and found.group(2) == key:
            return number
    return None
