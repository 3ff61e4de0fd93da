"""A local file or block device: the first kind of target. Looked at with
stat(2) and sysfs, its page cache dropped and measured by descriptor."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import ClassVar

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size
from gdsbench.system import pagecache, pattern, prepare
from gdsbench.system.storage import SYS_BLOCK, Mount, describe_local, find_mount, sysfs_queue


@dataclass(frozen=True)
class LocalFile:
    OPENED_AS: ClassVar[str] = "local file"
    path: str
    kind: str  # "file" or "block"
    size: int
    device: tuple[int, int] | None
    mount: Mount | None  # for files

    @classmethod
    def claims(cls, name: str) -> bool:
        return "://" not in name  # every name that is not a URL is a path

    @classmethod
    def absolute(cls, name: str) -> str:
        return os.path.abspath(name)

    @classmethod
    def open(cls, name: str, need: int = 0, asking: dict | None = None) -> LocalFile:  # (asking: no server here)
        from gdsbench.system.targets import size_to_prepare

        path = name
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise UsageError(f"PATH {path}: does not exist; create a test file with "
                             f"`gdsbench prepare {path} --size {size_to_prepare(need)}`") from None
        except PermissionError:
            raise UsageError(f"PATH {path}: permission denied; run as a user who may read it") from None
        except OSError as e:
            raise UsageError(f"PATH {path}: cannot stat: {e.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"PATH {path}: is a directory; give a file inside it "
                             f"(e.g. `gdsbench prepare {path}/test.dat --size 1G`)")
        if stat.S_ISREG(st.st_mode):
            kind, size, dev = "file", st.st_size, st.st_dev
        elif stat.S_ISBLK(st.st_mode):
            kind, size, dev = "block", 0, st.st_rdev
        else:
            raise UsageError(f"PATH {path}: is not a regular file or block device")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except PermissionError:
            raise UsageError(f"PATH {path}: permission denied; run as a user who may read it") from None
        except OSError as e:
            raise UsageError(f"PATH {path}: cannot open for reading: {e.strerror}") from None
        try:
            if kind == "block":
                size = os.lseek(fd, 0, os.SEEK_END)
        finally:
            os.close(fd)
        device = (os.major(dev), os.minor(dev))
        has_sysfs = (SYS_BLOCK / f"{device[0]}:{device[1]}").exists()
        return cls(path=path, kind=kind, size=size, device=device if has_sysfs else None,
                   mount=find_mount(path, st.st_dev) if kind == "file" else None)

    @property
    def where(self) -> str:
        if self.mount:
            return f"{self.mount.fs_type} at {self.mount.mount_point}"
        return "block device"

    def identity(self) -> dict | None:
        """A file's size, device, inode and modification time (reading does not
        change it; a new file under the name, even on a reused inode, does)."""
        if self.kind != "file":
            return None
        st = os.stat(self.path)
        return {"size": st.st_size, "device": st.st_dev, "inode": st.st_ino, "mtime_ns": st.st_mtime_ns}

    def direct_alignment(self) -> int:
        _, offset_align = _native.dio_alignment(self.path)
        if offset_align:
            return offset_align
        lbs = sysfs_queue(self.device, "logical_block_size")
        return int(lbs) if lbs else 512

    def check_direct(self, bs: int, offset: int) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
        except OSError as e:
            if e.errno == errno.EINVAL:
                raise UsageError(f"--direct: {self.where} refuses O_DIRECT for {self.path}; use --buffered") from None
            raise UsageError(f"--direct: cannot open {self.path} with O_DIRECT: {e.strerror}") from None
        os.close(fd)
        align = self.direct_alignment()
        for flag, value in (("--bs", bs), ("--offset", offset)):
            if value % align:
                raise UsageError(
                    f"{flag} {value}: O_DIRECT on {self.path} needs multiples of its logical block size "
                    f"({format_size(align)}); use a multiple of {align} or --buffered"
                )

    def check_uncached(self) -> None:
        reason = pagecache.uncached_refusal(self.path)
        if reason:
            raise UsageError(f"--uncached: {reason}; drop --uncached, or bypass the page cache with O_DIRECT "
                             "(--direct, or --mode bounce)")

    def hold(self, offset: int, length: int, lock: str | None = None) -> pagecache.HeldFileRegion:
        return pagecache.HeldFileRegion(self.path, offset, length, lock)

    def check_may_write(self, spec=None) -> None:
        """Only into a regular file gdsbench made, named by its own path: never a block device,
        a file without its mark (system/prepare.py), or a symbolic link."""
        if self.kind != "file":
            raise UsageError(f"PATH {self.path}: a block device: gdsbench never writes to one; give a file "
                             "`gdsbench prepare` made on a filesystem there")
        if os.path.islink(self.path):
            raise UsageError(f"PATH {self.path}: a symbolic link: gdsbench writes only to a file it made, by the file's "
                             "own path; give that path")
        if not self.created_by_gdsbench():
            raise UsageError(f"PATH {self.path}: gdsbench did not create this file, and writes only into files it made; "
                             "make one with `gdsbench prepare NEW.dat --size 1G`")

    def wrote(self) -> None:
        prepare.sign(self.path)

    def has_pattern(self, offset: int) -> bool:
        return pattern.has_pattern(self.path, offset)

    def created_by_gdsbench(self) -> bool:
        return self.kind == "file" and prepare.created_by_gdsbench(self.path)

    def folder(self) -> str | None:
        return os.path.dirname(os.path.abspath(self.path)) if self.kind == "file" else None

    def describe(self) -> dict:
        return {"path": self.path, "kind": self.kind, "size_bytes": self.size, **describe_local(self.mount, self.device)}


TARGET = LocalFile
