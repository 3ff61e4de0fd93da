"""nvidia-fs's own counters (/proc/driver/nvidia-fs/stats): the evidence that
GPUDirect Storage moved a run's bytes.

cuFile falls back to POSIX reads silently, for one file or for all, so no
platform fact (module loaded, ext4 on NVMe, compat mode not forced) proves a
read went direct. The kernel module's read counters do: they move only for
reads nvidia-fs itself served. They count only while its IO stats are on
(`rw_stats_enabled`); where they are off, or absent, the path can only be
inferred, and labels say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

STATS = Path("/proc/driver/nvidia-fs/stats")
ENABLE_STATS = "echo 1 > /sys/module/nvidia_fs/parameters/rw_stats_enabled"
MiB = 1 << 20
SEEN_SHARE = 0.9  # nvidia-fs must have counted at least this share of the bytes read (the rest: MiB rounding, timing)

OBSERVED = "GPUDirect (observed)"  # in a data-path label only where the counters showed it
INFERRED = "GPUDirect (inferred, not observed)"
STATS_OFF = "nvidia-fs IO stats are off"


def counters() -> dict | None:
    """The counters by line ({"Reads": {"n": 12, "ok": 12, "readMiB": 48, ...}, ...}) and whether
    IO stats are on ("io_stats": True/False/None), or None where nvidia-fs is not loaded."""
    try:
        text = STATS.read_text()
    except OSError:
        return None
    found: dict = {}
    for line in text.splitlines():
        label, _, rest = line.partition(":")
        pairs = dict(re.findall(r"([A-Za-z_-]+)=(\d+)", rest))
        if pairs:  # a label can have several lines ("Reads: n=..." then "Reads: Bandwidth(MiB/s)=...")
            found.setdefault(label.strip(), {}).update({k: int(v) for k, v in pairs.items()})
    stats = re.search(r"^IO stats:\s*(Enabled|Disabled)", text, re.M)
    found["io_stats"] = None if stats is None else stats.group(1) == "Enabled"
    return found


def _moved(before: dict, after: dict) -> list[str]:
    return [f"{label} {key} +{after[label][key] - value}" for label, values in before.items() if isinstance(values, dict)
            for key, value in values.items() if label in after and after[label].get(key, value) != value]


@dataclass(frozen=True)
class Observation:
    """nvidia-fs's counters before and after a run that read `nbytes` into GPU memory."""

    before: dict | None
    after: dict | None
    nbytes: int

    @property
    def counted_bytes(self) -> int | None:
        """Bytes nvidia-fs counted as read during the run (whole MiB), None where it cannot say."""
        if self.before is None or self.after is None or "readMiB" not in self.after.get("Reads", {}):
            return None
        return (self.after["Reads"]["readMiB"] - self.before.get("Reads", {}).get("readMiB", 0)) * MiB

    @property
    def direct(self) -> bool | None:
        """True: nvidia-fs counted about every byte; False: it counted fewer (cuFile read the rest
        another way); None: nothing to tell by (no nvidia-fs, or its IO stats off)."""
        if self.before is None or self.after is None or self.after.get("io_stats") is False:
            return None
        counted = self.counted_bytes
        if counted is None:
            return None
        return counted >= SEEN_SHARE * self.nbytes - MiB

    def evidence(self) -> str:
        """What the counters showed, in one clause."""
        if self.before is None or self.after is None:
            return f"{STATS} not present (nvidia-fs not loaded)"
        if self.after.get("io_stats") is False:
            return f"{STATS_OFF}, so its counters cannot show the path ({ENABLE_STATS})"
        read = f"{self.nbytes / MiB:,.0f} MiB read"
        counted = self.counted_bytes
        moved = _moved(self.before, self.after)
        if counted is None:
            return f"{STATS} has no Reads readMiB counter; {read}"
        return (f"nvidia-fs counted {counted / MiB:,.0f} MiB of reads for {read} "
                f"({', '.join(moved) if moved else 'no counter moved'})")


def observe(before: dict | None, nbytes: int) -> Observation:
    """The run's Observation: `before` is counters() read before it started."""
    return Observation(before, counters(), nbytes)
