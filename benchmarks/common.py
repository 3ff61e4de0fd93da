"""Shared by the benchmark scripts: where tables go, and how they are written."""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import sys
import time

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "benchmarks")


def median(values):
    return statistics.median(values) if values else float("nan")


def markdown_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_outputs(name: str, title: str, table: str, notes: list[str], raw: dict,
                  directory: str = RESULTS) -> tuple[str, str]:
    """Write <name>.md (a table a person reads) and <name>.json (every measured value)."""
    os.makedirs(directory, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = "python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    header = [f"# {title}", "", f"Measured {stamp} on {platform.node()} ({platform.release()}, "
              f"{os.cpu_count()} CPUs). Command: `{command}`", ""]
    md_path = os.path.join(directory, f"{name}.md")
    with open(md_path, "w") as f:
        f.write("\n".join(header + [table, ""] + [f"- {n}" for n in notes]) + "\n")
    json_path = os.path.join(directory, f"{name}.json")
    with open(json_path, "w") as f:
        json.dump({"measured": stamp, "command": command, "host": platform.node(), **raw}, f, indent=1, default=str)
    return md_path, json_path


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
            raise SystemExit(f"needs a writable blkio cgroup (v1) at {BLKIO} (root) to slow the disk down")
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


def drop_caches() -> None:
    """Drop the whole page cache (root), as MLPerf Storage's runs do before each."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
