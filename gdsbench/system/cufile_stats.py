"""cuFile's own statistics (libcufile 1.15, CUDA 13.0, on): per GPU, how many
reads and writes went through nvidia-fs, by PCI P2PDMA, or by POSIX calls
(compatibility mode). They observe the path where nvidia-fs's counters cannot:
P2PDMA's reads never reach nvidia-fs.

They count in the process that calls cuFile, so they are read around a run
served in this process (not across --procs workers or spawned accelerators).
The first snapshot turns them on at level 3 (the native side: cuFileSetStatsLevel
+ cuFileStatsStart), overriding cufile.json's profile.cufile_stats in that
process only, unless GDSBENCH_CUFILE_STATS=0; a process that never reads them
leaves them as cufile.json has them.

The layout: cuFileGetStatsL3 fills a CUfileStatsLevel3_t, which embeds level 2,
which embeds level 1; CUDA 13.4 appended vector-IO counters to level 1, which
moved every later field by 112 bytes. No header macro tells the two apart, so
the native side hands over the bytes the library wrote (into a buffer larger
than either), and the layout is chosen by their number. Any other number is a
layout gdsbench does not know, and it says so instead of reading a field.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from gdsbench import _native
from gdsbench.system import gpu

# bytes cuFileGetStatsL3 writes -> the size of the level-1 struct inside it (CUDA 13.0-13.3; 13.4 on)
LEVEL1_SIZE = {5000: 512, 5112: 624}
HISTOGRAMS = 2 * 32 * 8  # level 2: read and write size histograms, 32 uint64 each
PER_GPU_SIZE, MAX_GPUS = 248, 16  # a CUfilePerGpuStats_t, and how many the level-3 struct holds
# CUfilePerGpuStats_t's counters, by byte offset (the 16-byte GPU UUID first)
PER_GPU_FIELDS = {"read_bytes": 16, "reads": 48, "p2p_reads": 56, "nvfs_reads": 64, "posix_reads": 72,
                  "write_bytes": 120, "writes": 152, "p2p_writes": 160, "nvfs_writes": 168, "posix_writes": 176}
ROUTES = (("nvfs", "through nvidia-fs"), ("p2p", "by PCI P2PDMA"), ("posix", "by POSIX calls (compatibility mode)"))
SEEN_SHARE = 0.9  # GPUDirect observed where nvidia-fs and P2PDMA together served at least this share of requests


def parse(raw: bytes) -> dict:
    """Per-GPU counts ({"0:<uuid hex>": {"reads": n, "nvfs_reads": n, ...}}, each GPU by its place and
    UUID) from what cuFileGetStatsL3 wrote, or {"error": why} where its size is not a layout gdsbench knows."""
    level1 = LEVEL1_SIZE.get(len(raw))
    if level1 is None:
        known = " or ".join(str(n) for n in LEVEL1_SIZE)
        return {"error": f"cuFileGetStatsL3 wrote {len(raw)} bytes, not a layout gdsbench knows ({known})"}
    gpus_at = level1 + HISTOGRAMS
    (count,) = struct.unpack_from("<I", raw, gpus_at)
    per_gpu = {}
    for i in range(min(count, MAX_GPUS)):
        at = gpus_at + 8 + i * PER_GPU_SIZE
        counts = {name: struct.unpack_from("<Q", raw, at + off)[0] for name, off in PER_GPU_FIELDS.items()}
        per_gpu[f"{i}:{raw[at:at + 16].hex()}"] = counts
    return {"gpus": per_gpu}


def snapshot() -> dict:
    """This process's cuFile counters now: {"gpus": {...}}, or {"error": why not} (no GPU build, a libcufile
    before 1.15, stats off). Never raises: the counters are evidence beside a run, never its cost."""
    try:
        gpu.configure_libraries()
        read = _native.cufile_stats()
        return {"error": read["error"]} if read["error"] else parse(read["bytes"])
    except Exception as e:  # noqa: BLE001 - anything unforeseen is said in the label, the run kept
        return {"error": f"{type(e).__name__}: {e}"}


@dataclass(frozen=True)
class Observation:
    """cuFile's counters before and after a run in this process, for its direction ("read" or "write")."""

    before: dict
    after: dict
    direction: str = "read"

    @property
    def unit(self) -> str:
        """What cuFile counts of this run's direction: "reads" or "writes"."""
        return "reads" if self.direction == "read" else "writes"

    def moved(self) -> dict[str, int] | None:
        """Requests by route over the run, summed over the GPUs ({"all": n, "nvfs": n, "p2p": n,
        "posix": n}), or None where the counters could not be read."""
        if "gpus" not in self.before or "gpus" not in self.after:
            return None
        keys = {"all": self.unit, **{route: f"{route}_{self.unit}" for route, _ in ROUTES}}
        return {name: sum(g[key] - self.before["gpus"].get(place, {}).get(key, 0)
                          for place, g in self.after["gpus"].items()) for name, key in keys.items()}

    @property
    def direct(self) -> bool | None:
        """True: nvidia-fs and P2PDMA served about every request; False: POSIX calls served more than
        that leaves; None: nothing to tell by (no counters, no request counted, or routes that do not
        add up to either)."""
        moved = self.moved()
        if not moved or moved["all"] <= 0:
            return None
        if moved["nvfs"] + moved["p2p"] >= SEEN_SHARE * moved["all"]:
            return True
        return False if moved["posix"] > (1 - SEEN_SHARE) * moved["all"] else None

    def evidence(self) -> str:
        """What the counters showed, in one clause."""
        moved = self.moved()
        if moved is None:
            return f"cuFile's own counters not read ({(self.after.get('error') or self.before.get('error'))})"
        if moved["all"] <= 0:
            return f"cuFile's own counters counted no {self.unit}"
        routes = ", ".join(f"{moved[route]:,} {how}" for route, how in ROUTES)
        return f"cuFile counted {moved['all']:,} {self.unit}: {routes}"


def observe(before: dict, direction: str) -> Observation:
    """The run's Observation: `before` is snapshot() taken before it started."""
    return Observation(before, snapshot(), direction)
