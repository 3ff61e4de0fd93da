"""The job spec: every option declared once, here.

Each field of JobSpec carries its option metadata (kind, CLI flag, help), and
the CLI, sweep grids and results all read this one table (as fio's
fio_options[] serves its command line and job files). Values are stored in
base units: bytes and nanoseconds. Fields marked native=True map one for one
onto the native core's Job struct (native/job.hpp).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from . import units
from .errors import IncompatibleOptions, UsageError

KiB, MiB, GiB = 1024, 1024**2, 1024**3
SECOND = 1_000_000_000

ENGINES = ("auto", "null", "psync", "io_uring", "cufile", "kvikio")
MODES = ("cpu", "bounce", "cached-bounce", "gds", "kvikio")
# Engines each mode can read with; `auto` picks the first available.
MODE_ENGINES = {
    "cpu": ("io_uring", "psync", "null"),
    "bounce": ("io_uring", "psync", "null"),
    "cached-bounce": ("io_uring", "psync", "null"),
    "gds": ("cufile",),
    "kvikio": ("kvikio",),
}
PATTERNS = ("seq", "rand")
MAX_THREADS = 1024  # per process; beyond this, threads only contend
MAX_PROCS = 1024
LAYOUTS = ("shared", "shared-all", "per-proc")
PINNING = ("none", "cpu", "numa")
MAX_BS = GiB
DEFAULT_RUNTIME_NS = 5 * SECOND


@dataclass(frozen=True)
class Option:
    kind: str  # "path", "size", "duration", "int", "choice" or "bool"
    flag: str  # CLI flag, e.g. "--bs"
    help: str
    choices: tuple[str, ...] = ()
    negative: str | None = None  # flag that sets a bool False, e.g. "--buffered"
    aliases: tuple[str, ...] = ()  # other flags for the same option
    native: bool = True  # passed to the native Job
    sweep: bool = True  # may be a sweep dimension

    @property
    def key(self) -> str:
        """The name users write in sweep files and APIs: the flag without dashes ("io_size", "runtime")."""
        return self.flag.lstrip("-").replace("-", "_").lower()

    def parse(self, text: Any) -> Any:
        """Convert one value as written by a user (CLI, sweep file) to its base unit."""
        if text is None:
            return None
        if self.kind == "size":
            return units.parse_size(text, self.flag)
        if self.kind == "duration":
            return units.parse_duration(text, self.flag)
        if self.kind == "int":
            try:
                return int(text)
            except (TypeError, ValueError):
                raise UsageError(f"{self.flag} {text!r}: not a whole number") from None
        if self.kind == "choice":
            if text not in self.choices:
                raise UsageError(f"{self.flag} {text}: unknown; choose one of {', '.join(self.choices)}")
            return text
        if self.kind == "bool":
            if isinstance(text, bool):
                return text
            lowered = str(text).lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise UsageError(f"{self.flag} {text!r}: write true or false")
        return str(text)

    def format(self, value: Any) -> str:
        """A value in the unit a person would write it in."""
        if value is None:
            return "-"
        if self.kind == "size":
            return units.format_size(value)
        if self.kind == "duration":
            return units.format_duration(value)
        if self.kind == "int":
            return str(int(value))
        return str(value)


def option(default: Any, kind: str, flag: str, help: str, **kw: Any) -> Any:
    return field(default=default, metadata={"option": Option(kind, flag, help, **kw)})


@dataclass(frozen=True)
class JobSpec:
    path: str = option("", "path", "PATH", "file or block device to read (block devices are only read)", sweep=False)
    mode: str = option(
        "cpu", "choice", "--mode",
        "where the bytes go: cpu (host memory), bounce (O_DIRECT into pinned memory, then copied to the GPU), "
        "cached-bounce (page-cache reads, then copied), gds (cuFile into GPU memory), kvikio (kvikio's own reads)",
        choices=MODES,
    )
    engine: str = option(
        "auto", "choice", "--engine",
        "I/O engine; auto: io_uring where the kernel allows it, else psync (gds: cufile; kvikio: kvikio)", choices=ENGINES,
    )
    bs: int = option(MiB, "size", "--bs", "block size of each read")
    qd: int = option(1, "int", "--qd", "reads in flight per thread (io_uring; psync is always 1)")
    submit_batch: int = option(
        1, "int", "--submit-batch", "reads queued before each submission to the kernel (io_uring; fio's iodepth_batch_submit)"
    )
    threads: int = option(1, "int", "--threads", "worker threads, each with its own descriptor and slice of the region")
    pattern: str = option("seq", "choice", "--pattern", "seq, or rand: every block once per pass, seeded order", choices=PATTERNS)
    offset: int = option(0, "size", "--offset", "start of the region to read", sweep=False)
    size: int = option(0, "size", "--size", "length of the region to read (0: to the end of the target)", sweep=False)
    runtime_ns: int | None = option(
        None, "duration", "--runtime", "measure for this long, looping over the region (default 5s, none with --io-size)"
    )
    io_size: int = option(0, "size", "--io-size", "stop after reading this many bytes (0: no byte limit)")
    ramp_ns: int = option(0, "duration", "--ramp", "run this long first, outside the statistics")
    direct: bool | None = option(
        None, "bool", "--direct", "O_DIRECT: bypass the page cache (--buffered: through it); default by mode: "
        "O_DIRECT except cached-bounce", negative="--buffered",
    )
    warm: bool = option(False, "bool", "--warm", "keep the target's pages in the page cache instead of dropping them first", native=False)
    verify: bool = option(False, "bool", "--verify", "check every block read against the pattern `gdsbench prepare` wrote")
    seed: int = option(1, "int", "--seed", "seed of the random order (rand)", sweep=False)
    interval_ns: int = option(100_000_000, "duration", "--interval", "resolution of the throughput timeline", sweep=False)
    procs: int = option(
        1, "int", "--procs", "worker processes, each with --threads threads, started together (under mpirun: one per rank)",
        native=False,
    )
    layout: str = option(
        "shared", "choice", "--layout", "with several processes: shared (one file, each its own part of the region), "
        "shared-all (one file, all read the whole region) or per-proc (one file each: PATH.0, PATH.1, ...)",
        choices=LAYOUTS, native=False,
    )
    reorder: bool = option(
        False, "bool", "--reorder", "read the part of another host (or process), as IOR's -C, to defeat client caches",
        native=False,
    )
    stonewall: bool = option(
        False, "bool", "--stonewall", "when the first worker finishes its work, note what every worker had done: "
        "both the stonewalled and the full figures are reported",
    )
    pin: str = option("none", "choice", "--pin", "pin each process to CPUs: cpu (its own cores) or numa (its GPU's "
                      "node, else the storage's)", choices=PINNING, native=False, sweep=False)
    gpu: str = option("0", "str", "--gpu", "GPU index, or several (0,1): processes, else threads, take them round-robin",
                      sweep=False, aliases=("--gpus",))
    gpu_backend: str = option(
        "cuda", "str", "--gpu-backend", "cuda; or sim: a CPU stand-in that tests the staging pipeline "
        "and is never a GPU measurement (sim:fail-copy=N,copy-delay-us=M inject faults and delays)", sweep=False,
    )
    gds_register: bool = option(False, "bool", "--gds-register", "register the GPU buffers with cuFile (gds)")
    kvikio_threads: int = option(0, "int", "--kvikio-threads", "kvikio's thread pool size (kvikio; 0: kvikio's default)", native=False)
    kvikio_task_size: int = option(
        0, "size", "--kvikio-task-size", "size of the tasks kvikio splits a read into (kvikio; 0: kvikio's default)", native=False
    )

    @property
    def simulated(self) -> bool:
        """Whether GPU memory is the CPU stand-in (gpu/sim_device.cpp), never a real GPU."""
        return self.gpu_backend == "sim" or self.gpu_backend.startswith("sim:")

    @property
    def is_direct(self) -> bool:
        """O_DIRECT as it will run: the flag, or by mode (all but cached-bounce)."""
        return self.direct if self.direct is not None else self.mode != "cached-bounce"

    def validate(self) -> JobSpec:
        """Check what can be checked without touching the target; return self."""
        if self.mode not in MODES:
            raise UsageError(f"--mode {self.mode}: unknown; choose one of {', '.join(MODES)}")
        if self.gpu_backend != "cuda" and not self.simulated:
            raise UsageError(f"--gpu-backend {self.gpu_backend}: choose cuda (or sim, a CPU stand-in for tests)")
        if not all(part.isdigit() for part in self.gpu.split(",")):
            raise UsageError(f"--gpu {self.gpu}: give GPU indexes such as 0 or 0,1")
        if self.engine != "auto" and self.engine in ENGINES and self.engine not in MODE_ENGINES[self.mode]:
            raise IncompatibleOptions(
                f"--engine {self.engine} with --mode {self.mode}: this mode reads with {', '.join(MODE_ENGINES[self.mode])}"
            )
        if self.mode in ("bounce", "gds") and self.direct is False:
            raise IncompatibleOptions(f"--mode {self.mode} reads with O_DIRECT; for page-cache reads use --mode cached-bounce")
        if self.mode == "cached-bounce" and self.direct:
            raise IncompatibleOptions("--mode cached-bounce reads through the page cache; for O_DIRECT use --mode bounce")
        if self.mode == "gds" and self.qd > 1:
            raise IncompatibleOptions(
                f"--qd {self.qd}: cuFile's synchronous reads have no queue depth; use --threads, or --mode kvikio"
            )
        if self.mode == "kvikio" and self.threads > 1:
            raise IncompatibleOptions(f"--threads {self.threads}: kvikio reads with its own pool; use --kvikio-threads")
        if self.kvikio_threads < 0 or self.kvikio_task_size < 0:
            raise UsageError("--kvikio-threads and --kvikio-task-size cannot be negative")
        if self.engine not in ENGINES:
            raise UsageError(f"--engine {self.engine}: unknown engine; choose one of {', '.join(ENGINES)}")
        if self.pattern not in PATTERNS:
            raise UsageError(f"--pattern {self.pattern}: choose seq or rand")
        if not 1 <= self.bs <= MAX_BS:
            raise UsageError(f"--bs {self.bs}: a block must be between 1 byte and 1 GiB; try 4K or 1M")
        if self.qd < 1:
            raise UsageError(f"--qd {self.qd}: queue depth must be at least 1")
        if self.submit_batch < 1:
            raise UsageError(f"--submit-batch {self.submit_batch}: must be at least 1")
        if self.submit_batch > self.qd:
            raise IncompatibleOptions(f"--submit-batch {self.submit_batch}: must be between 1 and --qd ({self.qd})")
        if self.engine == "psync" and self.qd > 1:
            raise IncompatibleOptions(
                f"--qd {self.qd}: the psync engine is synchronous (queue depth 1); "
                "use --engine io_uring for deeper queues, or more --threads"
            )
        if not 1 <= self.procs <= MAX_PROCS:
            raise UsageError(f"--procs {self.procs}: must be between 1 and {MAX_PROCS}")
        if self.mode == "kvikio" and self.stonewall:
            raise IncompatibleOptions("--stonewall with --mode kvikio: kvikio runs one loop, there are no workers to stonewall")
        if self.mode == "kvikio" and self.procs > 1:
            raise IncompatibleOptions(f"--procs {self.procs}: --mode kvikio runs in one process; use --kvikio-threads")
        if not 1 <= self.threads <= MAX_THREADS:
            raise UsageError(f"--threads {self.threads}: must be between 1 and {MAX_THREADS}; use --procs to go wider")
        if self.offset < 0 or self.size < 0 or self.io_size < 0:
            raise UsageError("--offset, --size and --io-size cannot be negative")
        if self.runtime_ns is not None and self.runtime_ns <= 0:
            raise UsageError("--runtime must be positive, e.g. 10s; leave it out to stop on --io-size alone")
        if self.ramp_ns < 0:
            raise UsageError("--ramp cannot be negative")
        if self.interval_ns < 1_000_000:
            raise UsageError("--interval must be at least 1ms")
        if self.io_size and self.io_size < self.bs * self.threads:
            raise IncompatibleOptions(
                f"--io-size {units.format_size(self.io_size)}: less than one --bs block per thread "
                f"({units.format_size(self.bs * self.threads)}); raise it or lower --bs/--threads"
            )
        if self.warm and self.is_direct:
            raise IncompatibleOptions("--warm with --direct: O_DIRECT bypasses the page cache; add --buffered to read from it")
        if self.verify and (self.bs % 4096 or self.offset % 4096):
            raise IncompatibleOptions("--verify checks 4 KiB pattern blocks: --bs and --offset must be multiples of 4K")
        return self

    def replace(self, **changes: Any) -> JobSpec:
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """One line a person can read: 'bounce io_uring 1 MiB seq QD8 x2 threads O_DIRECT'."""
        parts = ([] if self.mode == "cpu" else [self.mode]) + [
            self.engine, units.format_size(self.bs), self.pattern, f"QD{self.qd}"]
        if self.threads > 1:
            parts.append(f"x{self.threads} threads")
        if self.engine != "null":
            parts.append("O_DIRECT" if self.is_direct else "buffered")
        if self.warm:
            parts.append("warm cache")
        return " ".join(parts)


def column_name(name: str, opt: Option) -> str:
    """Results column for a spec field, its unit in the name: bs -> bs_bytes, runtime_ns stays."""
    return f"{name}_bytes" if opt.kind == "size" and not name.endswith("_bytes") else name


def spec_columns(spec: JobSpec) -> dict[str, Any]:
    """The spec as results columns (base units, unit-suffixed names)."""
    return {column_name(name, opt): getattr(spec, name) for name, opt in job_options().items()}


def spec_from_columns(row: dict[str, Any]) -> JobSpec:
    """Inverse of spec_columns, for specs read back from results."""
    values = {}
    for name, opt in job_options().items():
        value = row[column_name(name, opt)]
        if value != value:  # NaN: pandas' way of writing None in a numeric column
            value = None
        if value is not None and opt.kind in ("size", "duration", "int"):
            value = int(value)
        elif opt.kind == "bool":
            value = bool(value)
        values[name] = value
    return JobSpec(**values)


def job_options() -> dict[str, Option]:
    """Field name -> Option, in declaration order."""
    return {f.name: f.metadata["option"] for f in dataclasses.fields(JobSpec)}


def options_by_key() -> dict[str, tuple[str, Option]]:
    """User key ("runtime") -> (field name ("runtime_ns"), Option)."""
    return {opt.key: (name, opt) for name, opt in job_options().items()}


def spec_from_values(values: dict[str, Any], base: JobSpec | None = None) -> JobSpec:
    """Build a spec from user-written values keyed as users write them
    ({"bs": "4K", "runtime": "10s"}): strings with units, or numbers in base units."""
    by_key = options_by_key()
    unknown = sorted(set(values) - set(by_key))
    if unknown:
        raise UsageError(f"unknown option(s): {', '.join(unknown)}; known: {', '.join(by_key)}")
    return with_parsed({k: by_key[k][1].parse(v) for k, v in values.items()}, base)


def with_parsed(values: dict[str, Any], base: JobSpec | None = None) -> JobSpec:
    """A spec from values already in base units, keyed as users write them."""
    by_key = options_by_key()
    return (base or JobSpec()).replace(**{by_key[k][0]: v for k, v in values.items()})
