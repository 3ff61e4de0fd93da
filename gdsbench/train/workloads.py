"""Training workloads: the input side of a training job, as MLPerf Storage's
DLIO configures it. Three are built in (DLIO 2.0's H100 configs); a TOML file
describes one of the user's own; any field can be overridden on the command
line."""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

from gdsbench.job import tomlfile
from gdsbench.job.declared_option import Option
from gdsbench.job.errors import UsageError, clip, quoted
from gdsbench.train import parquet
from gdsbench.train.formats import FORMATS, Format, format_names

KiB, MiB = 1 << 10, 1 << 20


HOUR = 3600.0
MAX_SAMPLES = 20_000_000


def _field(kind: str, flag: str, text: str, low, high, *, on_command_line: bool = True, **kw):
    """A workload field declared as a job option is (gdsbench.job.declared_option.Option): its flag, help
    and bounds feed train's, predict's and prepare's flags, workload files and docs/options.md."""
    option = Option(kind, flag, text, low=low, high=high, native=False, sweep=False)
    return field(metadata={"option": option, "on_command_line": on_command_line}, **kw)


@dataclass(frozen=True)
class Workload:
    name: str
    format: str  # a name in train/formats.py: how its samples lie in files and which loader's rule reads them
    files: int = _field("int", "--files", "files in the dataset", 1, 10_000_000)
    samples_per_file: int = _field("int", "--samples-per-file", "samples in each file", 1, 10_000_000)
    record_bytes: int = _field("size", "--record-bytes", "mean sample size (DLIO's record_length)", 1, 64 << 30)
    record_stdev: int = _field("size", "--record-stdev", "standard deviation of DLIO's sample size (see docs/train.md)",
                               0, 64 << 30)
    batch: int = _field("int", "--batch", "samples per step, per accelerator", 1, MAX_SAMPLES)
    read_threads: int = _field("int", "--read-threads", "reader threads per accelerator (DLIO's read_threads)", 1, 1024)
    prefetch: int = _field("int", "--prefetch", "DLIO's prefetch_size: batches held ahead = read threads x "
                           "ceil(prefetch / read threads)", 0, 1 << 16)
    transfer_size: int = _field("size", "--transfer-size", "each sample is read in chunks of this size", 4096, 1 << 30)
    compute_s: float = _field("seconds", "--compute-time", "emulated compute per step (a sleep), H100", 0.0, HOUR)
    compute_stdev_s: float = _field("seconds", "--compute-stdev", "standard deviation of the compute time (normal "
                                    "distribution; DLIO's computation_time_stdev)", 0.0, HOUR, default=0.0)
    au_threshold: float = _field("number", "--au", "the accelerator utilisation a run must reach to pass, e.g. 0.9",
                                 1e-9, 1.0, default=0.90)
    seed: int = _field("int", "--seed", "seed of the shuffle and the sample sizes (DLIO's default: 123)", 0, 2**64 - 1,
                       on_command_line=False, default=123)  # its flag is train's and prepare's own
    row_group: int = _field("int", "--row-group", "parquet: rows in each row group prepare writes (DLIO's "
                            "dataset.parquet.row_group_size)", 1, 1 << 31, default=parquet.DLIO_ROW_GROUP)
    about: str = ""
    columns: tuple[parquet.Column, ...] = ()  # parquet: the files' typed columns (DLIO's dataset.parquet.columns)
    read_columns: tuple[str, ...] = ()  # parquet: the columns read (DLIO's storage_options.columns; empty: all)

    @property
    def samples(self) -> int:
        return self.files * self.samples_per_file

    @property
    def file_format(self) -> Format:
        """Its format's declaration (train/formats.py)."""
        return FORMATS[self.format]

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

    def check(self, names: dict[str, str] | None = None) -> Workload:
        """UsageError naming the field as the user wrote it (names: field -> a file's key; its flag
        otherwise) unless every field is in its bounds (finite, and small enough for the arrays and
        sleeps it makes)."""
        names = names or {}

        def said(field: str) -> str:
            return names.get(field, OPTIONS[field].flag)

        if not NAME.fullmatch(self.name):
            raise UsageError(f"workload name {quoted(self.name)}: its files are named after it, so use letters, digits, "
                             "'.', '_' and '-' only, starting with a letter or digit")
        for name, option in OPTIONS.items():
            value = getattr(self, name)
            if not (isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))):  # an int may pass floats
                raise UsageError(f"{said(name)} {quoted(value)}: not a finite number")
            replace(option, flag=said(name)).check(value)
        if self.format not in FORMATS:
            raise UsageError(f"--format {quoted(self.format)}: choose {format_names('or')}")
        units = self.files * math.ceil(self.samples_per_file / self.row_group) if self.file_format.row_groups \
            else self.samples  # what the index holds: row groups, or samples
        if units > MAX_SAMPLES:
            raise UsageError(f"{said('files')} {self.files} x {said('samples_per_file')} {self.samples_per_file}: "
                             f"{units:,} {'row groups' if self.file_format.row_groups else 'samples'}, more than "
                             f"{MAX_SAMPLES:,} (the index of every one is held in memory); use fewer files")
        if self.file_format.row_groups and not self.columns:
            raise UsageError(f"--format {self.format}: the workload names no columns; start from flux or dlrm "
                             "(--workload), or give a DLIO YAML with dataset.parquet.columns")
        if self.compute_s <= 0:
            raise UsageError(f"{said('compute_s')} {self.compute_s:g}: must be more than 0 (AU is compute time over "
                             "wall time)")
        if self.transfer_size % 4096:
            raise UsageError(f"{said('transfer_size')} {self.transfer_size}: must be a multiple of 4 KiB (O_DIRECT and "
                             "the pattern)")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# DLIO 2.0 configs/workload/*_h100.yaml, and retinanet, flux and dlrm from MLPerf Storage v3.0's
# *_b200.yaml; transfer sizes as their format reads (train/formats.py). flux's files hold 288 rows
# (its training YAML; its datagen YAML says 256), one row group each (DLIO's default of 1024 rows).
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
    Workload("retinanet", "jpeg", files=1_170_301, samples_per_file=1, record_bytes=322_957, record_stdev=0, batch=24,
             read_threads=8, prefetch=2, transfer_size=MiB, compute_s=0.04755, au_threshold=0.85,
             about="RetinaNet, OpenImages (MLPerf Storage v3.0, B200's step): a JPEG file per sample, many small files"),
    Workload("flux", "parquet", files=4296, samples_per_file=288, record_bytes=parquet.row_bytes(parquet.FLUX),
             record_stdev=0, batch=48, read_threads=8, prefetch=2, transfer_size=MiB, compute_s=1.35, au_threshold=0.90,
             columns=parquet.FLUX, about="FLUX.1 (MLPerf Storage v3.0, B200's step): parquet, 5 float32 columns, "
                                         "2.1 MB rows"),
    Workload("dlrm", "parquet", files=1024, samples_per_file=4_718_592, record_bytes=parquet.row_bytes(parquet.DLRM),
             record_stdev=0, batch=16384, read_threads=4, prefetch=2, transfer_size=MiB, compute_s=0.000375,
             au_threshold=0.70, row_group=6144, columns=parquet.DLRM,
             about="DLRM v2 (MLPerf Storage v3.0, B200's step): parquet, 200 one-value columns, 761-byte rows, "
                   "row groups of 6144"),
)}

# MLPerf Storage's step on each accelerator type, (batch, computation_time s), as its workload YAMLs
# give them (v2.0's a100 and h100 files; v3.0's b200 and mi355 ones): --accelerator-type picks one.
TIMINGS = {
    "unet3d": {"a100": (7, 0.636), "h100": (7, 0.323), "b200": (7, 0.162)},
    "resnet50": {"a100": (400, 0.435), "h100": (400, 0.224)},
    "cosmoflow": {"a100": (1, 0.00551), "h100": (1, 0.00350)},
    "retinanet": {"a100": (16, 0.210), "h100": (16, 0.180), "b200": (24, 0.04755), "mi355": (32, 0.0634)},
    "flux": {"b200": (48, 1.35), "mi355": (72, 2.025)},
    "dlrm": {"b200": (16384, 0.000375), "mi355": (16384, 0.0005625)},
}
ACCELERATOR_TYPES = ("a100", "h100", "b200", "mi355")


def on_accelerator(workload: Workload, kind: str) -> Workload:
    """A built-in workload with the batch and computation time MLPerf Storage gives it on `kind`."""
    timings = TIMINGS.get(workload.name, {})
    if kind not in timings:
        raise UsageError(f"--accelerator-type {kind}: MLPerf Storage gives {workload.name} no {kind} timing (it gives "
                         f"{', '.join(timings) or 'none'}); give --compute-time and --batch instead")
    batch, compute_s = timings[kind]
    return replace(workload, batch=batch, compute_s=compute_s)


def own_accelerator(name: str) -> str:
    """The accelerator type whose timing a built-in workload has as it stands ("": none of them)."""
    w = BUILT_IN[name]
    return next((kind for kind, t in TIMINGS.get(name, {}).items() if t == (w.batch, w.compute_s)), "")


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# field -> its option, named after the field; those users set with a flag of their own
OPTIONS = {f.name: dataclasses.replace(f.metadata["option"], name=f.name) for f in fields(Workload) if f.metadata}
ON_COMMAND_LINE = tuple(f.name for f in fields(Workload) if f.metadata.get("on_command_line"))


def parse_field(name: str, value: Any, where: str) -> Any:
    """A field's value from text or TOML (sizes as '8M', durations as '112ms' or seconds); its
    bounds are checked with the whole workload (Workload.check), naming its flag."""
    if name not in OPTIONS:
        return str(value)
    return dataclasses.replace(OPTIONS[name], flag=where).convert(value)


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
        raise UsageError(f"{name_or_file} line {tomlfile.line_of(text, 'base')}: base {quoted(data['base'])}: choose "
                         f"one of {', '.join(BUILT_IN)}")
    known = {f.name for f in fields(Workload)}
    values: dict[str, Any] = {"name": os.path.splitext(os.path.basename(name_or_file))[0]}
    for key, value in data.items():
        if key == "base":
            continue
        where = f"{name_or_file} line {tomlfile.line_of(text, key)}: {clip(key)}"
        if key in ("columns", "read_columns"):
            raise UsageError(f"{where}: parquet columns come from base = \"flux\" or \"dlrm\", or from a DLIO "
                             "workload YAML (dataset.parquet.columns); drop it here")
        if key not in known:
            raise UsageError(f"{where}: unknown field; known: {', '.join(sorted(known))}")
        values[key] = parse_field(key, value, where)
    if base is None:
        missing = [f.name for f in fields(Workload) if f.name not in values and f.default is MISSING]
        if missing:
            raise UsageError(f"{name_or_file}: missing {', '.join(missing)} (or give base = \"unet3d\" to start from "
                             "a built-in workload)")
        return Workload(**values).check()
    return with_overrides(base, values)  # as the flags: a new record_bytes scales the base's spread


def with_overrides(workload: Workload, overrides: dict[str, Any], names: dict[str, str] | None = None) -> Workload:
    """The workload with command-line values (already parsed) in place of its own. A new
    record_bytes without a record_stdev scales the workload's spread with it, so that
    unet3d at --record-bytes 4M keeps its shape rather than its 65 MiB spread. names: how
    errors name the fields a file set (Workload.check)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    if "record_bytes" in changes and "record_stdev" not in changes and workload.record_bytes:
        changes["record_stdev"] = round(workload.record_stdev * changes["record_bytes"] / workload.record_bytes)
    return (replace(workload, **changes) if changes else workload).check(names)
