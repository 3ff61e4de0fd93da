"""Where a training dataset lives: a local directory, an S3 prefix
(s3://BUCKET/PREFIX/), or a folder on an NFS server (read only). A dataset
(gdsbench/train/dataset.py) lists, writes and checks its files through one of
these, never through os, boto3 or libnfs itself, so a dataset reads the same
from any place.

A local directory's files are written by `prepare` (system/prepare.py) and
their page cache is dropped and measured; an S3 prefix's objects are uploaded
by object_store.py; an NFS folder is listed by the native nfs engine. On a
server there is no page cache here to drop (the server's own cache cannot be
seen). Everywhere gdsbench writes only what it created.
"""

from __future__ import annotations

import os

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.system import object_store, output_files, pagecache
from gdsbench.system.pattern import has_pattern
from gdsbench.system.prepare import prepare
from gdsbench.system.targets import kind_of, protocol_of

BLOCK = _native.PATTERN_BLOCK


class Folder:
    """What a dataset's folder of either kind answers alike."""

    name: str

    @property
    def remote(self) -> bool:
        """Whether a server holds it, with no page cache here to drop: the target layer's answer
        for its name (targets.protocol_of), not a fourth spelling of it."""
        return protocol_of(self.name) is not None


class LocalFolder(Folder):
    asking = None  # nothing here is asked of a server

    def __init__(self, name: str):
        self.name = name

    def path(self, file: str) -> str:
        return os.path.join(self.name, file)

    def check_may_hold(self) -> None:
        if os.path.lexists(self.name) and not os.path.isdir(self.name):
            raise UsageError(f"PATH {self.name}: not a directory; give a directory for the dataset (a new one, or one "
                             "`gdsbench prepare --workload` wrote)")

    def exists(self) -> bool:
        return os.path.isdir(self.name)

    def read_text(self, file: str) -> str | None:
        path = self.path(file)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read()

    def write_text(self, file: str, text: str) -> None:
        """Written whole or not at all (a temporary file renamed into place)."""
        def write(tmp: str) -> None:
            with open(tmp, "w") as f:
                f.write(text)

        try:
            output_files.write_whole(self.path(file), write)
        except OSError as e:
            raise UsageError(f"PATH {self.name}: cannot write {file}: {e.strerror}; choose a directory gdsbench may "
                             "write in") from None

    def files(self) -> list[tuple[str, int]]:
        """(path, size) of every file under it, at any depth, in name order."""
        paths = sorted(os.path.join(root, name) for root, _, names in os.walk(self.name) for name in names)
        return [(p, os.path.getsize(p)) for p in paths if os.path.isfile(p)]

    def size_of(self, path: str) -> int | None:
        return os.path.getsize(path) if os.path.isfile(path) else None

    def complete(self, path: str, size: int) -> bool:
        """Whether a file of gdsbench's of this size is there, written to its end."""
        return self.size_of(path) == size and has_pattern(path, size - BLOCK)

    def has_pattern(self, path: str, offset: int) -> bool:
        return has_pattern(path, offset)

    def free_bytes(self) -> int | None:
        """Free bytes where it is, or will be (its nearest existing parent)."""
        here = os.path.abspath(self.name)
        while not os.path.exists(here):
            here = os.path.dirname(here)
        try:
            vfs = os.statvfs(here)
        except OSError:
            return None
        if vfs.f_blocks == 0:  # no blocks at all (procfs, sysfs): nothing can be written, and creating says so
            return None
        return vfs.f_bavail * vfs.f_frsize

    def make(self) -> None:
        try:
            os.makedirs(self.name, exist_ok=True)
        except OSError as e:
            raise UsageError(f"PATH {self.name}: cannot create the directory: {e.strerror}") from None

    def write_pattern(self, path: str, size: int, seed: int, size_flag: str) -> None:
        prepare(path, size, seed=seed, size_flag=size_flag)

    def evict(self, path: str, size: int) -> None:
        pagecache.evict(path, 0, size)

    def cached_fraction(self, path: str, size: int) -> float | None:
        return pagecache.cached_fraction(path, 0, size)


class ObjectFolder(Folder):
    """An S3 prefix: s3://BUCKET/PREFIX/ (the / is added where it is left out). `asking`: how its
    server is asked, listings and pattern blocks alike (remote_object.asking_of: the command's
    --timeout and --retries; object_store.WRITING where None)."""

    def __init__(self, name: str, asking: dict | None = None):
        bucket, prefix = object_store.split(name)
        self.name = f"s3://{bucket}/{prefix.rstrip('/') + '/' if prefix.strip('/') else ''}"
        self.asking = asking
        self._s3 = None
        self._listed: list[tuple[str, int]] | None = None

    def __getstate__(self) -> dict:  # sent to accelerator processes without its client, made again there
        return {"name": self.name, "asking": self.asking, "_s3": None, "_listed": self._listed}

    @property
    def s3(self):
        if self._s3 is None:
            self._s3 = object_store.client(self.asking)
        return self._s3

    def path(self, file: str) -> str:
        return self.name + file

    def check_may_hold(self) -> None:
        pass  # a prefix holds anything; each object is checked before it is written

    def exists(self) -> bool:
        return bool(self.files())

    def read_text(self, file: str) -> str | None:
        return object_store.get_text(self.s3, self.path(file))

    def write_text(self, file: str, text: str) -> None:
        object_store.put_text(self.s3, self.path(file), text)  # a PUT is whole or not at all
        self._listed = None

    def files(self) -> list[tuple[str, int]]:
        """Every object under the prefix, listed once (a prefix can hold many)."""
        if self._listed is None:
            self._listed = object_store.list_objects(self.s3, self.name)
        return self._listed

    def size_of(self, path: str) -> int | None:
        answer = object_store.head(self.s3, path)
        return None if answer is None else int(answer["ContentLength"])

    def complete(self, path: str, size: int) -> bool:
        """An object gdsbench uploaded whole (an upload is never half there) of this size."""
        answer = object_store.head(self.s3, path)
        mark = object_store.mark_of(answer)
        return mark is not None and int(answer["ContentLength"]) == size == mark.get("size")

    def has_pattern(self, path: str, offset: int) -> bool:
        from gdsbench.system.targets.remote_object import RemoteObject

        return RemoteObject.open(path, asking={**object_store.WRITING, **(self.asking or {})}).has_pattern(offset)

    def free_bytes(self) -> int | None:
        return None  # a bucket's room cannot be asked

    def make(self) -> None:
        pass  # a prefix is there once an object under it is

    def write_pattern(self, path: str, size: int, seed: int, size_flag: str) -> None:
        object_store.put_pattern(path, size, seed=seed, size_flag=size_flag, s3=self.s3)
        self._listed = None

    def evict(self, path: str, size: int) -> None:
        pass  # no page cache here; the server's cannot be dropped

    def cached_fraction(self, path: str, size: int) -> float | None:
        return None


class ServedFolder(Folder):
    """A folder on a server whose native engine lists folders (nfs: nfs://SERVER/EXPORT/DIR/?version=3,
    libnfs's arguments after the files' names), listed and read through that engine: a dataset there
    is read as one in a local directory is (its manifest, or its files), never written (prepare it
    where the server exports it: a local directory or a mount)."""

    asking = None  # the nfs engine has no options of its own

    def __init__(self, name: str):
        where, _, arguments = name.partition("?")
        self.base = where.rstrip("/") + "/"
        self.arguments = f"?{arguments}" if arguments else ""
        self.name = self.base + self.arguments
        self.engine = kind_of(name).ENGINE
        self._listed: list[tuple[str, int]] | None = None

    def path(self, file: str) -> str:
        return self.base + file + self.arguments

    def check_may_hold(self) -> None:
        raise UsageError(f"PATH {self.name}: a dataset is not written onto an {protocol_of(self.name).upper()} server "
                         "yet; prepare it where the server exports it (`gdsbench prepare --workload W DIR` in the "
                         "exported folder, or through a mount), then train from its URL")

    def exists(self) -> bool:
        return bool(self.files())

    def read_text(self, file: str) -> str | None:
        size = self.size_of(self.path(file))
        if size is None:
            return None
        return _native.read_range(self.engine, self.path(file), 0, size, {}).decode()

    def files(self) -> list[tuple[str, int]]:
        """Every file under it, at any depth, listed once, in name order."""
        if self._listed is None:
            self._listed = [(self.path(name), size) for name, size in _native.list_folder(self.engine, self.name)]
        return self._listed

    def size_of(self, path: str) -> int | None:
        return dict(self.files()).get(path)

    def complete(self, path: str, size: int) -> bool:
        return self.size_of(path) == size and self.has_pattern(path, size - BLOCK)

    def has_pattern(self, path: str, offset: int) -> bool:
        return kind_of(path).open(path).has_pattern(offset)

    def free_bytes(self) -> int | None:
        return None

    def evict(self, path: str, size: int) -> None:
        pass  # no page cache here; the server's cannot be dropped

    def cached_fraction(self, path: str, size: int) -> float | None:
        return None


def folder_for(name: str, asking: dict | None = None) -> LocalFolder | ObjectFolder | ServedFolder:
    """Where a dataset named so lives (asking: how a remote one's server is asked, ObjectFolder). An
    HTTP, FTP or SMB server cannot be listed yet."""
    from gdsbench.job.spec import ENGINE_INFO

    protocol = protocol_of(name)
    if protocol == "s3":
        return ObjectFolder(name, asking)
    if protocol and ENGINE_INFO[kind_of(name).ENGINE]["lists_folders"]:
        return ServedFolder(name)
    if protocol:
        raise UsageError(f"PATH {name}: a dataset is a local directory, an S3 prefix (s3://BUCKET/PREFIX/) or a "
                         f"folder on an NFS server; an {protocol.upper()} server cannot be listed yet. Serve it as S3 "
                         "(e.g. `rclone serve s3`), mount it and give the directory, or read one file with `gdsbench "
                         "run URL`")
    return LocalFolder(name)
