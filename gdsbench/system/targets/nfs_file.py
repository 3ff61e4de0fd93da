"""A file on an NFS server, nfs://SERVER/EXPORT/FILE?version=4, read by the
native nfs engine through libnfs in user space: no kernel mount, so neither
the kernel client's page cache nor its mount options sit between gdsbench and
the server (fio's nfs engine reads the same way). The engine answers for it:
opening it mounts the export, opens the file and asks its size (GETATTR), so a
server that does not answer, a missing export or a missing file fail before
anything runs.

There is no page cache of it on this host (libnfs keeps none here), and the
server's own cache cannot be seen: a held region measures nothing (None), and
runs say so."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import ENGINE_INFO
from gdsbench.system.targets.remote_object import NothingHeld

OPENED_AS = "nfs file"
ENGINE = next(e["name"] for e in _native.engines() if e["opens"] == OPENED_AS)  # the nfs engine
SCHEMES = tuple(ENGINE_INFO[ENGINE]["schemes"])  # ("nfs://",), declared by the engine


@dataclass(frozen=True)
class NfsFile:
    OPENED_AS: ClassVar[str] = OPENED_AS
    path: str
    size: int
    facts: dict = field(default_factory=dict)  # what the engine found: url, server, export, libnfs's version
    kind: str = "nfs"
    device: None = None
    mount: None = None

    @classmethod
    def claims(cls, name: str) -> bool:
        return name.startswith(SCHEMES)

    @classmethod
    def protocol(cls, name: str) -> str:
        return "nfs"

    @classmethod
    def absolute(cls, name: str) -> str:
        return name

    @classmethod
    def open(cls, name: str, need: int = 0, asking: dict | None = None) -> NfsFile:
        unavailable = ENGINE_INFO[ENGINE]["unavailable"]
        if unavailable:
            raise UsageError(f"PATH {name}: reading nfs:// needs the {ENGINE} engine, not available here: {unavailable}")
        facts = _native.probe_target(ENGINE, name, {})
        return cls(path=name, size=int(facts.pop("size")), facts=facts)

    @property
    def where(self) -> str:
        return f"a file on an NFS server at {self.facts.get('server_ip') or 'a remote server'}"

    def requests(self, engine: str) -> str:
        """How its reads travel, for data-path labels: "NFS, nfs engine (libnfs, no kernel mount)"."""
        return f"NFS, {engine} engine (libnfs {self.facts.get('libnfs', '?')}, no kernel mount)"

    def identity(self) -> dict | None:
        return {"size": self.size, "url": self.path}

    def direct_alignment(self) -> int:
        return 1

    def check_direct(self, bs: int, offset: int) -> None:
        raise UsageError(f"--direct: {self.path} is {self.where}: O_DIRECT is a local file's; use --buffered")

    def hold(self, offset: int, length: int, lock: str | None = None) -> NothingHeld:
        return NothingHeld()  # the server's file: nothing held or locked here

    def check_may_write(self) -> None:
        raise UsageError(f"PATH {self.path}: writes over NFS are not measured yet; write to a local file `gdsbench "
                         "prepare` made (or to the export through a kernel mount)")

    def wrote(self) -> None:
        pass

    def folder(self) -> None:
        return None  # the server's: gdsbench makes no file beside it

    def has_pattern(self, offset: int) -> bool:
        block = _native.read_range(ENGINE, self.path, offset, _native.PATTERN_BLOCK, {})
        return len(block) == _native.PATTERN_BLOCK and _native.pattern_check(block, offset)[0] == 0

    def created_by_gdsbench(self) -> bool:
        return False  # not known over NFS without reading every block; writes are refused above

    def describe(self) -> dict:
        return {"path": self.path, "kind": self.kind, "size_bytes": self.size, **self.facts,
                "cache": "remote: no page cache here to drop (libnfs keeps none), and the server's cache cannot be seen"}


TARGET = NfsFile
