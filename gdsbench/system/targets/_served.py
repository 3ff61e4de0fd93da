"""What the kinds of target on a server share (a module whose name starts with _ is
not itself a kind): OnAServer, what every remote kind is (remote_object.py's too):
nothing of it cached or held on this host, no O_DIRECT, no folder beside it; and
ServedFile, a file on a server read by a native engine of its own without a
kernel mount (nfs_file.py, smb_file.py): the engine looks at the file when it is
opened (so a server that does not answer, a missing share or file, or a refused
login fail before anything runs), and reads it; its engine (nfs, smb) also
writes, into a file gdsbench made: one holding its pattern in every block,
read whole to know it before anything is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import ENGINE_INFO


def engine_opening(opened_as: str) -> str:
    """The native engine that declares it opens this kind of target."""
    return next(e["name"] for e in _native.engines() if e["opens"] == opened_as)


class NothingHeld:
    """A region on a server: nothing cached here to drop or measure."""

    def evict(self) -> None:
        pass

    def cached_fraction(self) -> float | None:
        return None

    def close(self) -> None:
        pass


class OnAServer:
    """What a target on a server is, whatever its protocol: named by the schemes its ENGINE declares, looked
    at and read by it as `asking` says (path, size, facts, where: the kind's own)."""

    ENGINE: ClassVar[str]  # engine_opening(its OPENED_AS)

    @classmethod
    def claims(cls, name: str) -> bool:
        return name.startswith(tuple(ENGINE_INFO[cls.ENGINE]["schemes"]))

    @classmethod
    def protocol(cls, name: str) -> str:
        """What a name it claims is asked over, as its engine names the scheme's protocol ("s3", "nfs")."""
        return next(protocol for scheme, protocol in ENGINE_INFO[cls.ENGINE]["schemes"].items()
                    if name.startswith(scheme))

    @classmethod
    def absolute(cls, name: str) -> str:
        return name  # a URL reads the same from any directory

    def identity(self) -> dict | None:
        return {"size": self.size, "url": self.facts.get("url", self.path)}

    def direct_alignment(self) -> int:
        return 1

    def check_direct(self, bs: int, offset: int) -> None:
        raise UsageError(f"--direct: {self.path} is {self.where}: O_DIRECT is a local file's; use --buffered")

    def check_uncached(self) -> None:
        raise UsageError(f"--uncached: {self.path} is {self.where}: uncached buffered I/O is a local file's; drop "
                         "--uncached")

    def hold(self, offset: int, length: int, lock: str | None = None) -> NothingHeld:
        return NothingHeld()  # the server's: nothing held or locked here

    def wrote(self) -> None:
        pass

    def folder(self) -> None:
        return None  # the server's: gdsbench makes no file beside it

    def has_pattern(self, offset: int) -> bool:
        block = _native.read_range(self.ENGINE, self.path, offset, _native.PATTERN_BLOCK, self.asking)
        return len(block) == _native.PATTERN_BLOCK and _native.pattern_check(block, offset)[0] == 0

    def describe(self) -> dict:
        return {"path": self.path, "kind": self.kind, "size_bytes": self.size, **self.facts,
                "cache": "remote: no page cache here to drop, and the server's cache cannot be seen"}

    def all_pattern(self) -> bool:
        """Every block of it carries gdsbench's pattern, read through its engine (a whole read of it):
        how a file on a server that keeps no mark of gdsbench's is known as one gdsbench made."""
        if not self.size or self.size % _native.PATTERN_BLOCK:
            return False
        for offset in range(0, self.size, LOOK_PIECE):
            length = min(LOOK_PIECE, self.size - offset)
            piece = _native.read_range(self.ENGINE, self.path, offset, length, self.asking)
            if len(piece) != length or _native.pattern_check(piece, offset)[0]:
                return False
        return True


@dataclass(frozen=True)
class ServedFile(OnAServer):
    OPENED_AS: ClassVar[str]
    WHAT: ClassVar[str]  # "an NFS server": where the file is, in messages
    SYNCS: ClassVar[bool] = True  # its engine makes writes durable (sync()); smb's cannot
    path: str
    size: int
    facts: dict = field(default_factory=dict)  # what the engine found: url, server, its client library's version
    device: None = None
    mount: None = None

    @property
    def kind(self) -> str:  # its protocol, as the engine names it: "nfs", "smb"
        return self.facts.get("protocol", self.ENGINE)

    @property
    def asking(self) -> dict:
        return {}  # the nfs and smb engines have no options of their own

    @classmethod
    def open(cls, name: str, need: int = 0, asking: dict | None = None):
        unavailable = ENGINE_INFO[cls.ENGINE]["unavailable"]
        if unavailable:
            raise UsageError(f"PATH {name}: reading it needs the {cls.ENGINE} engine, not available here: {unavailable}")
        facts = _native.probe_target(cls.ENGINE, name, {})
        return cls(path=name, size=int(facts.pop("size")), facts=facts)

    @property
    def where(self) -> str:
        return f"a file on {self.WHAT} at {self.facts.get('server_ip') or 'a remote server'}"

    def check_may_write(self, spec=None) -> None:
        """Without fsync where its engine has none, and only into a file of gdsbench's pattern, every
        block of it (a server keeps no mark of gdsbench's: the file is read whole, once, to know it)."""
        if spec is not None and (spec.fsync_every or spec.fsync_end) and not self.SYNCS:
            raise UsageError(f"--fsync-every/--fsync-end: {self.ENGINE} has no flush call over {self.kind.upper()} "
                             "(libsmbclient has none); leave them out")
        if not self.created_by_gdsbench():
            raise UsageError(f"PATH {self.path}: not a file gdsbench made (not its pattern in every block), and gdsbench "
                             "writes only into files it made; make one at another name (`gdsbench prepare URL --size "
                             "SIZE`), then write into it")

    def created_by_gdsbench(self) -> bool:
        return self.all_pattern()


LOOK_PIECE = 64 << 20  # bytes a read of the whole-file look asks at once (each a session of the engine's)
