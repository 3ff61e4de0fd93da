"""Training workloads: the input side of a training job, as MLPerf Storage's
DLIO configures it. Three are built in (DLIO 2.0's H100 configs); a TOML file
describes one of the user's own; any field can be overridden on the command
line."""

from __future__ import annotations

import math
import os
import re
from dataclasses import MISSING, asdict, dataclass, fields, replace
from typing import Any

from gdsbench.job import tomlfile
from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size, parse_duration, parse_size

KiB, MiB = 1 << 10, 1 << 20
FORMATS = ("npz", "tfrecord")


@dataclass(frozen=True)
class Workload:
    name: str
    format: str  # npz: a sample is a whole file; tfrecord: samples packed in files, read in transfer-size chunks
    files: int
    samples_per_file: int
    record_bytes: int  # mean sample size, as DLIO's record_length
    record_stdev: int  # DLIO's record_length_stdev
    batch: int  # samples per step, per accelerator
    read_threads: int  # reader threads per accelerator (DLIO's read_threads: data-loader workers)
    prefetch: int  # DLIO's prefetch_size: batches in flight = read_threads x ceil(prefetch / read_threads)
    transfer_size: int  # each sample is read in chunks of this size
    compute_s: float  # emulated compute per step (sleep), H100
    compute_stdev_s: float = 0.0  # DLIO's computation_time_stdev: compute drawn from a normal distribution
    au_threshold: float = 0.90  # the least accelerator utilisation that passes
    seed: int = 123  # shuffle and sample sizes (DLIO's default seed)
    about: str = ""

    @property
    def samples(self) -> int:
        return self.files * self.samples_per_file

    @property
    def batches_in_flight(self) -> int:
        """Batches PyTorch's DataLoader holds ahead of the accelerator: num_workers x prefetch_factor,
        as DLIO sets it (torch_data_loader.py): ceil(prefetch / read_threads), and 2 where prefetch is 0."""
        factor = math.ceil(self.prefetch / self.read_threads) if self.prefetch > 0 else 2
        return self.read_threads * max(1, factor)

    @property
    def prefetch_batches(self) -> int:
        """Batches tf.data's prefetch holds ready (DLIO's tf_reader.py: prefetch(buffer_size=prefetch_size))."""
        return self.prefetch

    @property
    def demand_bytes_per_s(self) -> float:
        """Bytes one accelerator consumes at 100% utilisation."""
        return self.batch * self.record_bytes / self.compute_s

    def check(self) -> Workload:
        """UsageError naming the field's flag unless every field is in its bounds (finite, and small
        enough for the arrays and sleeps it makes)."""
        if not NAME.fullmatch(self.name):
            raise UsageError(f"workload name {self.name!r}: its files are named after it, so use letters, digits, '.', "
                             "'_' and '-' only, starting with a letter or digit")
        for name, (low, high) in BOUNDS.items():
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high):
                shown = format_size(value) if name in PARSERS and isinstance(value, int) else value
                limit = (f"between {format_size(low)} and {format_size(high)}" if name in PARSERS
                         else f"between {low:,} and {high:,}" if isinstance(high, int)
                         else f"between {low:g} and {high:g}{' s' if name in DURATIONS else ''}")
                raise UsageError(f"{flag(name)} {shown}: must be {limit}")
        if self.samples > MAX_SAMPLES:
            raise UsageError(f"--files {self.files} x --samples-per-file {self.samples_per_file}: {self.samples:,} samples, "
                             f"more than {MAX_SAMPLES:,} (the index of every sample is held in memory); use fewer files")
        if self.format not in FORMATS:
            raise UsageError(f"--format {self.format}: choose {' or '.join(FORMATS)}")
        if self.compute_s <= 0:
            raise UsageError(f"--compute-time {self.compute_s:g}: must be more than 0 (AU is compute time over wall time)")
        if self.transfer_size % 4096:
            raise UsageError(f"--transfer-size {self.transfer_size}: must be a multiple of 4 KiB (O_DIRECT and the pattern)")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# DLIO 2.0 configs/workload/*_h100.yaml; transfer sizes: whole-file reads in 1 MiB chunks for
# npz, TFRecordDataset's 256 KiB buffer for tfrecord.
BUILT_IN = {w.name: w for w in (
    Workload("unet3d", "npz", files=168, samples_per_file=1, record_bytes=146_600_628, record_stdev=68_341_808, batch=7,
             read_threads=4, prefetch=2, transfer_size=MiB, compute_s=0.323, au_threshold=0.90,
             about="3D U-Net, KiTS19 images: one large sample per file"),
    Workload("resnet50", "tfrecord", files=1024, samples_per_file=1251, record_bytes=114_660, record_stdev=0, batch=400,
             read_threads=8, prefetch=2, transfer_size=256 * KiB, compute_s=0.224, au_threshold=0.90,
             about="ResNet-50, ImageNet: many small samples packed in TFRecord files"),
    Workload("cosmoflow", "tfrecord", files=524_288, samples_per_file=1, record_bytes=2_828_486, record_stdev=71_311,
             batch=1, read_threads=4, prefetch=2, transfer_size=256 * KiB, compute_s=0.0035, au_threshold=0.70,
             about="CosmoFlow: one 2.8 MB sample per file, a very short step"),
)}

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
MAX_SAMPLES = 20_000_000
HOUR = 3600.0
BOUNDS = {  # field -> (low, high), inclusive
    "files": (1, 10_000_000), "samples_per_file": (1, 10_000_000), "record_bytes": (1, 64 << 30),
    "record_stdev": (0, 64 << 30), "batch": (1, MAX_SAMPLES), "read_threads": (1, 1024), "prefetch": (0, 1 << 16),
    "transfer_size": (4096, 1 << 30), "compute_s": (0.0, HOUR), "compute_stdev_s": (0.0, HOUR),
    "au_threshold": (1e-9, 1.0), "seed": (0, 2**64 - 1),
}

# What each field is given as, on the command line and in a workload file
PARSERS = {"record_bytes": parse_size, "record_stdev": parse_size, "transfer_size": parse_size}
DURATIONS = ("compute_s", "compute_stdev_s")
FLAGS = {"compute_s": "--compute-time", "compute_stdev_s": "--compute-stdev", "au_threshold": "--au"}


def flag(field: str) -> str:
    return FLAGS.get(field, "--" + field.replace("_", "-"))


def parse_field(name: str, value: Any, where: str) -> Any:
    """A field's value from text or TOML (sizes as '8M', durations as '112ms' or seconds)."""
    kind = {f.name: f.type for f in fields(Workload)}[name]
    try:
        if name in PARSERS:
            return PARSERS[name](value, where)
        if name in DURATIONS:
            return parse_duration(value, where) / 1e9
        if kind == "int":
            if isinstance(value, bool) or not str(value).lstrip("-").isdigit():
                raise UsageError(f"{where} {value!r}: not a whole number")
            return int(value)
        if kind == "float":
            number = float(value)
            if not math.isfinite(number):
                raise UsageError(f"{where} {value!r}: not a finite number")
            return number
        return str(value)
    except (TypeError, ValueError):
        raise UsageError(f"{where} {value!r}: not a number") from None


def load(name_or_file: str) -> Workload:
    """A built-in workload by name, or one described in a TOML file (errors name the line)."""
    if name_or_file in BUILT_IN:
        return BUILT_IN[name_or_file]
    if not os.path.exists(name_or_file):
        raise UsageError(f"--workload {name_or_file}: not a built-in workload ({', '.join(BUILT_IN)}) "
                         "and no such file")
    data, text = tomlfile.read(name_or_file, "--workload")
    base = BUILT_IN.get(str(data.get("base", "")))
    if "base" in data and base is None:
        raise UsageError(f"{name_or_file} line {tomlfile.line_of(text, 'base')}: base {data['base']!r}: choose one of "
                         f"{', '.join(BUILT_IN)}")
    known = {f.name for f in fields(Workload)}
    values: dict[str, Any] = {"name": os.path.splitext(os.path.basename(name_or_file))[0]}
    for key, value in data.items():
        if key == "base":
            continue
        where = f"{name_or_file} line {tomlfile.line_of(text, key)}: {key}"
        if key not in known:
            raise UsageError(f"{where}: unknown field; known: {', '.join(sorted(known))}")
        values[key] = parse_field(key, value, where)
    if base is None:
        missing = [f.name for f in fields(Workload) if f.name not in values and f.default is MISSING]
        if missing:
            raise UsageError(f"{name_or_file}: missing {', '.join(missing)} (or give base = \"unet3d\" to start from "
                             "a built-in workload)")
        return Workload(**values).check()
    return replace(base, **values).check()


def with_overrides(workload: Workload, overrides: dict[str, Any]) -> Workload:
    """The workload with command-line values (already parsed) in place of its own. A new
    record_bytes without a record_stdev scales the workload's spread with it, so that
    unet3d at --record-bytes 4M keeps its shape rather than its 65 MiB spread."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    if "record_bytes" in changes and "record_stdev" not in changes and workload.record_bytes:
        changes["record_stdev"] = round(workload.record_stdev * changes["record_bytes"] / workload.record_bytes)
    return replace(workload, **changes).check() if changes else workload.check()
