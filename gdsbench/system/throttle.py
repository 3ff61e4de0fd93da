"""A real slower tier for the tests and the benchmark scripts: the kernel's blkio
throttle (cgroup v1) slows reads of one disk for the processes put in it. Not a
fake: the storage itself is slower, so every layer above sees what a slower
tier would give it."""

from __future__ import annotations

import os
import time

BLKIO = "/sys/fs/cgroup/blkio"


class Throttle:
    """A real slower tier: a blkio cgroup (v1) that reads the disk holding
    `path` at `bytes_per_s` (None: unthrottled, commands run as they are).
    wrap(cmd) runs a command, and everything it starts, inside the cgroup."""

    def __init__(self, path: str, bytes_per_s: int | None, name: str):
        self.group = None
        if bytes_per_s is None:
            return
        if not os.access(BLKIO, os.W_OK):
            raise PermissionError(f"needs a writable blkio cgroup (v1) at {BLKIO} (root) to slow the disk down")
        st = os.stat(path)
        self.device = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        self.group = os.path.join(BLKIO, f"gdsbench-{name}-{os.getpid()}")
        os.makedirs(self.group, exist_ok=True)
        try:
            with open(os.path.join(self.group, "blkio.throttle.read_bps_device"), "w") as f:
                f.write(f"{self.device} {bytes_per_s}\n")
        except OSError:
            self.close()
            raise

    def wrap(self, cmd: list[str]) -> list[str]:
        if self.group is None:
            return cmd
        return ["sh", "-c", f'echo $$ > {self.group}/cgroup.procs && exec "$@"', "sh", *cmd]

    def read_bytes(self) -> int | None:
        """The bytes the cgroup's processes have read from the disk so far (blkio.throttle.io_service_bytes:
        what reached the device, page-cache hits not counted); None where unthrottled."""
        if self.group is None:
            return None
        with open(os.path.join(self.group, "blkio.throttle.io_service_bytes")) as f:
            for line in f:
                device, op, value = (line.split() + ["", "", ""])[:3]
                if device == self.device and op == "Read":
                    return int(value)
        return 0  # nothing read from the disk yet: the kernel lists a device once it has served one

    def close(self) -> None:
        """Remove the cgroup; processes that are still exiting (a run's children) keep it busy a moment."""
        if self.group is None:
            return
        for _ in range(50):
            try:
                os.rmdir(self.group)
                return
            except FileNotFoundError:
                return
            except OSError:  # EBUSY while a process is still in it
                time.sleep(0.05)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
