"""What a job reads or writes. A target is a local file or block device, an
HTTP(S), S3 or FTP object, or a file on an NFS server or SMB share: each kind is one module
in this package with a class that answers the Target protocol below, so a new
kind of target is one file and nothing else in gdsbench asks the operating
system about it.

target_for(name) hands a name to the first kind that claims it. The checks a
kind makes raise UsageError with the parameter and the fix; the native engine
then opens the target itself. A job writes only into a target gdsbench made
(check_may_write), never into a user's file or a block device.

What a kind is follows from the one word it declares, OPENED_AS (the kind of
target an engine says it opens, native/engine.hpp's Opens): the engines that
read it (engines_for), and whether it is on this host, with a page cache here
and O_DIRECT a choice (is_local). A bare name, before it is looked at, is asked
here too (protocol_of). Nothing outside this package compares OPENED_AS or
reads a name's URL scheme to tell what it is (tests/test_layout.py).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import ClassVar, Protocol, runtime_checkable

from gdsbench.job.errors import UsageError
from gdsbench.system.storage import Mount


class Held(Protocol):
    """A region of a target, held from before a run to after it, so the page
    cache is measured on what was read even if its name is gone by the end."""

    def evict(self) -> None: ...  # drop its cached pages (fio's invalidate=1); a no-op where none are kept

    def cached_fraction(self) -> float | None: ...  # 0..1 resident now; None where nothing is cached locally

    def close(self) -> None: ...


@runtime_checkable
class Target(Protocol):
    OPENED_AS: ClassVar[str]  # what kind of engine reads it: "local file" or "url" (an engine's `opens`); the
    # rest follows from it (is_local, engines_for), and a kind not opened as a local file also answers
    # protocol(name) (protocol_of)
    path: str  # the name the user gave (a path; a URL for a remote kind)
    kind: str  # "file", "block", or a remote kind's own word (its protocol: "http", "s3")
    size: int  # bytes
    device: tuple[int, int] | None  # (major, minor) of the local block device holding it, if any
    mount: Mount | None  # the local filesystem holding it, if any

    @classmethod
    def claims(cls, name: str) -> bool: ...  # whether a name is one of this kind (a URL scheme, or a plain path)

    @classmethod
    def open(cls, name: str, need: int = 0, asking: dict | None = None) -> Target: ...  # look at it without reading
    # its data (target_for); asking: how a remote kind asks its server (remote_object.asking_of), as the run will

    @classmethod
    def absolute(cls, name: str) -> str: ...  # the name as it reads from any directory (a resumed sweep's)

    @property
    def where(self) -> str: ...  # "ext4 at /", "block device", for messages

    def identity(self) -> dict | None: ...  # what makes it the same data later (--resume); None: cannot tell

    def check_direct(self, bs: int, offset: int) -> None: ...  # UsageError unless O_DIRECT reads can work

    def check_uncached(self) -> None: ...  # UsageError unless --uncached (RWF_DONTCACHE) can work on it

    def direct_alignment(self) -> int: ...  # bytes O_DIRECT offsets and lengths must be multiples of

    def hold(self, offset: int, length: int, lock: str | None = None) -> Held: ...  # lock: "read" or "write" it

    def check_may_write(self, spec=None) -> None: ...  # UsageError unless gdsbench may write into it (a file it
    # made), as the job (a JobSpec) would write it (an S3 object: whole, by one writer)

    def folder(self) -> str | None: ...  # the directory on this host it lies in, where gdsbench may make files of
    # its own beside it (validate's test files); None: a block device or a remote object, beside which it makes none

    def wrote(self) -> None: ...  # after gdsbench wrote into it: its mark kept true

    def has_pattern(self, offset: int) -> bool: ...  # whether the 4 KiB block there is one `gdsbench prepare` wrote

    def created_by_gdsbench(self) -> bool: ...  # whether `gdsbench prepare` made it (so may make it again)

    def describe(self) -> dict: ...  # everything known about it and the storage beneath, for the record


def kinds() -> list[type[Target]]:
    """Every kind of target: the TARGET class of each module in this package."""
    return _kinds_in(tuple(__path__))


@functools.cache
def _kinds_in(folders: tuple[str, ...]) -> list[type[Target]]:  # looked for once, not at every plan
    return [importlib.import_module(f"{__name__}.{m.name}").TARGET for m in pkgutil.iter_modules(list(folders))
            if not m.name.startswith("_")]  # _served.py: what several kinds share, not a kind


def kind_of(name: str) -> type[Target]:
    """The kind of target a name is (UsageError if none reads it)."""
    if not name:
        raise UsageError("PATH: no target given; name a file or block device, or create one with `gdsbench prepare FILE`")
    for kind in kinds():
        if kind.claims(name):
            return kind
    raise UsageError(f"PATH {name}: no kind of target reads this name; give a file or block device path, or an "
                     f"{url_schemes()} URL")


def url_schemes() -> str:
    """The URL schemes gdsbench reads (the native protocols'), for messages and help:
    "http://, https://, s3:// or ftp://" (read from the engines, not the remote kind: cheap for --help)."""
    from gdsbench.job.spec import ENGINE_INFO

    *first, last = [scheme for engine in ENGINE_INFO.values() for scheme in engine.get("schemes", ())]
    return f"{', '.join(first)} or {last}"


LOCAL_FILE = "local file"  # what the engines that read this host's files declare they open


def is_local(target: Target | type[Target]) -> bool:
    """Whether a target (or a kind of target) lives on this host, read by the engines that open
    a local file: its page cache is here, dropped and measured, and O_DIRECT is a choice. Not:
    an object a server holds, with no page cache here to drop and no O_DIRECT."""
    return target.OPENED_AS == LOCAL_FILE


def engines_for(kind: type[Target]) -> tuple[str, ...]:
    """Every engine that reads targets of this kind: those that declare they open what it is
    opened as (job/spec.py's ENGINE_INFO), in the registry's order."""
    from gdsbench.job.spec import ENGINE_INFO

    return tuple(name for name, engine in ENGINE_INFO.items() if kind.OPENED_AS in engine["opens"])


def protocol_of(name: str | None) -> str | None:
    """What a bare name is, before it is looked at: None for a path on this host (or no name),
    else the protocol its remote kind asks its server over ("http" or "s3", the word such a
    target's `kind` will be; a remote kind answers protocol(name))."""
    if not name:
        return None
    kind = kind_of(name)
    return None if is_local(kind) else kind.protocol(name)


def target_for(name: str, need: int = 0, asking: dict | None = None) -> Target:
    """The target a name means, looked at (UsageError if it cannot be one). need: the bytes from
    its start a job would use, so that a hint to make it suggests a size that holds them. asking:
    how a remote target's server is asked (remote_object.asking_of(spec): the job's --timeout and
    --retries), the look included; None: the defaults."""
    return kind_of(name).open(name, need, asking)


def job_target(spec, path: str | None = None, need: int = 0) -> Target:
    """The target a job reads or writes (its PATH, or `path`: one file of a dataset, a
    process's own file), looked at as the job asks its server (remote_object.asking_of)."""
    from gdsbench.system.targets.remote_object import asking_of

    return target_for(path or spec.path, need, asking_of(spec))


def size_to_prepare(need: int, least: int = 1 << 30) -> str:
    """The --size to suggest to `gdsbench prepare` for a job that uses `need` bytes from the
    start: `least` (1G), or need rounded up to a whole multiple of it ("10G")."""
    from gdsbench.job.units import format_size

    return format_size(max(least, -(-need // least) * least)).replace(" ", "").replace("iB", "")


class HeldRegions:
    """The regions a run reads or writes, (target, offset, length) each, held open
    and locked for it from before it to after it (a context manager)."""

    def __init__(self, regions: list[tuple[Target, int, int]], lock: str = "read"):
        self.held: list[tuple[Held, int]] = []  # (held region, its length)
        try:
            for target, offset, length in regions:
                self.held.append((target.hold(offset, length, lock), length))
        except BaseException:
            self.close()
            raise

    def evict(self) -> None:
        for held, _ in self.held:
            held.evict()

    def cached_fraction(self) -> float | None:
        """The fraction of all the regions' pages in the page cache now (None: no region has a cache)."""
        known = [(held.cached_fraction(), length) for held, length in self.held]
        known = [(f, n) for f, n in known if f is not None]
        total = sum(n for _, n in known)
        return sum(f * n for f, n in known) / total if total else None

    def close(self) -> None:
        for held, _ in self.held:
            held.close()
        self.held = []

    def __enter__(self) -> HeldRegions:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
