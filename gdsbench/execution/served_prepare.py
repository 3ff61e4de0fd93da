"""`gdsbench prepare` of a file on a server, through the native engine that opens it (ftp://,
http(s):// on a WebDAV server, nfs://, smb://): the pattern written as a new file by the engine's
create (curl: one STOR or PUT of all of it, sent from one buffer; nfs and smb: a file created only
where none is, O_EXCL, written in chunks). One of gdsbench's of that size already there is kept; anything else
there is refused in one line: on a server gdsbench makes only new files, since none of these
protocols replaces a file whole and at once (as a local rename or S3's upload does), and it never
writes over one it did not make (the server keeps no mark: gdsbench's own holds its pattern in
every block). S3 is object_store.put_pattern's; a local file, system/prepare.py's."""

from __future__ import annotations

import json

from gdsbench import _native
from gdsbench.execution.loops import sample_writers
from gdsbench.execution.runner import runnable_here
from gdsbench.job.errors import TargetMissing, UsageError
from gdsbench.job.spec import OPTIONS, spec_from_values
from gdsbench.job.units import format_size
from gdsbench.system.object_store import Written
from gdsbench.system.targets import kind_of, protocol_of
from gdsbench.system.targets.remote_object import WHOLE_WRITES, written_noun

WHOLE_AT_MOST = 4 << 30  # a whole-file request is sent from one buffer of all of it
CHUNK = 4 << 20  # nfs's and smb's writes of a new file, one after another


def kept(url: str, size: int, force: bool = False, asking: dict | None = None) -> bool:
    """Whether a file of gdsbench's pattern of that size is at url to keep (True; never with force)
    or nothing is (False, to make one); UsageError for anything else there (prepare --files looks
    at every file this way before it writes the first)."""
    try:
        there = kind_of(url).open(url, 0, asking)
    except TargetMissing:
        return False
    if not there.all_pattern():
        raise UsageError(f"PATH {url}: not {written_noun(protocol_of(url))} gdsbench made (not its "
                         "pattern in every block); gdsbench never writes over one it did not make: give another name")
    if there.size == size and not force:
        return True
    raise UsageError(f"PATH {url}: holds {format_size(there.size)} of gdsbench's pattern already; on a server gdsbench "
                     "makes only new files (none of its protocols replaces one whole and at once): give another name, "
                     "or remove it")


def prepare_served(url: str, size: int, *, seed: int = 1, force: bool = False, progress=None,
                   size_flag: str = "--size", asking: dict | None = None) -> Written:
    """A new pattern file of `size` bytes at url (or the one of gdsbench's there, kept); asking:
    how a curl server is asked (--timeout, --retries). progress(done, total) once it is written."""
    if size <= 0 or size % _native.PATTERN_BLOCK:
        raise UsageError(f"{size_flag} {size}: must be a positive multiple of 4 KiB, e.g. 1G")
    if kept(url, size, force, asking):
        return Written(url, size, reused=True)
    kind, protocol = kind_of(url), protocol_of(url)
    whole = protocol in WHOLE_WRITES
    if whole and size > WHOLE_AT_MOST:
        raise UsageError(f"{size_flag} {format_size(size)}: {protocol.upper()} writes {written_noun(protocol)} whole, "
                         "in one request sent from one buffer of all of it; give at most "
                         f"{format_size(WHOLE_AT_MOST)}")
    engines_own = {o.name for o in OPTIONS if o.engine == kind.ENGINE}  # curl's --timeout and --retries
    values = {name: value for name, value in (asking or {}).items() if name in engines_own}
    spec = runnable_here(spec_from_values({"path": url, "rw": "write", "engine": kind.ENGINE, "qd": 1, "seed": seed,
                                           "bs": size if whole else min(size, CHUNK)}))
    spec = spec.replace(direct=False, runtime_ns=0, **values)  # no O_DIRECT on a server; all of it, however long
    (writer,) = sample_writers(spec, spec.gpu[0], 1)
    writer.create(url, size, json.dumps({"size": size, "seed": seed}))
    if progress:
        progress(size, size)
    return Written(url, size, reused=False)
