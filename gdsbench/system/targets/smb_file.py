"""A file on an SMB share, smb://SERVER[:PORT]/SHARE/PATH, read and written (a file
gdsbench made, without fsync: libsmbclient has no flush call) by the native
smb engine through libsmbclient in user space: no kernel cifs mount, so
neither its page cache nor its mount options sit between gdsbench and the
server. The login is smbclient's ($USER as user%password, or $PASSWD), never
a password in the URL. Opening it logs in, opens the file and asks its size;
the rest is every served file's (_served.py)."""

from __future__ import annotations

from dataclasses import dataclass

from gdsbench.system.targets._served import ServedFile, engine_opening


@dataclass(frozen=True)
class SmbFile(ServedFile):
    OPENED_AS = "smb file"
    ENGINE = engine_opening(OPENED_AS)
    WHAT = "an SMB share"
    SYNCS = False

    def requests(self, engine: str, direction: str = "read") -> str:
        """How its reads travel, for data-path labels: "SMB, smb engine (libsmbclient 4.17.12, no cifs mount)"."""
        return f"SMB, {engine} engine (libsmbclient {self.facts.get('libsmbclient', '?')}, no cifs mount)"


TARGET = SmbFile
