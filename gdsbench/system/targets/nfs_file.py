"""A file on an NFS server, nfs://SERVER/EXPORT/FILE?version=4 (or 3), read and
written (a file gdsbench made; NFSv3 where libnfs cannot write NFSv4) by the
native nfs engine through libnfs in user space: no kernel mount, so neither
the kernel client's page cache nor its mount options sit between gdsbench and
the server (fio's nfs engine reads the same way). Opening it mounts the
export, opens the file and asks its attributes (GETATTR); the rest is every
served file's (_served.py)."""

from __future__ import annotations

from dataclasses import dataclass

from gdsbench.system.targets._served import ServedFile, engine_opening


@dataclass(frozen=True)
class NfsFile(ServedFile):
    OPENED_AS = "nfs file"
    ENGINE = engine_opening(OPENED_AS)
    WHAT = "an NFS server"

    def requests(self, engine: str, direction: str = "read") -> str:
        """How its reads travel, for data-path labels: "NFS, nfs engine (libnfs 4.0.0, no kernel mount)"."""
        return f"NFS, {engine} engine (libnfs {self.facts.get('libnfs', '?')}, no kernel mount)"


TARGET = NfsFile
