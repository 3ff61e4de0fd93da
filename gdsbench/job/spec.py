"""The job spec: every option declared once.

Each field of JobSpec carries its option (job/declared_option.py: kind, CLI
flag, help, bounds), and the CLI, sweep files, results columns and
docs/options.md all read this one table (as fio's fio_options[] serves its
command line and job files). The job's own options are declared here; each
engine declares its own (a native engine in its file under native/engines/,
the kvikio engine in job/modes.py), and the table gathers them after the
job's, as fio gathers its engines' FIO_OPT_C_ENGINE options. Values are
stored in base units: bytes and nanoseconds. Options marked native map one
for one onto the native core's Job struct (native/job.hpp); an engine's
options reach it in Job.engine_options.

An option's own bounds are checked when its value is parsed; rules between
options are all in JobSpec.validate().
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gdsbench import _native
from gdsbench.job import units
from gdsbench.job.declared_option import Option, option, parse_gpus
from gdsbench.job.errors import IncompatibleOptions, UsageError
from gdsbench.job.modes import MODES, PYTHON_ENGINES, mode_help

KiB, MiB, GiB = 1024, 1024**2, 1024**3
SECOND = 1_000_000_000

# Every engine: native/engines/registry.cpp lists the native ones, job/modes.py the Python-driven one.
# `opens`: the kinds of target each reads, a tuple ("local file", "url", "nfs file", "smb file" or "nothing"), as
# native/engine.hpp's Opens.
ENGINE_INFO: dict[str, dict] = {**{e["name"]: {**e, "opens": (e["opens"],)} for e in _native.engines()},
                                **PYTHON_ENGINES}
ENGINES = ("auto", *ENGINE_INFO)


def caching(direct: bool, uncached: bool) -> str:
    """How a job's reads and writes meet the page cache, in a word (a run's record keeps both flags)."""
    return "O_DIRECT" if direct else "uncached" if uncached else "buffered"


def opens_target(engine: str) -> bool:
    """Whether the engine opens the job's target, by what it declares (native/engine.hpp's
    Capabilities): the null engine opens none. auto always picks one that does."""
    return engine == "auto" or ENGINE_INFO[engine]["opens"] != ("nothing",)
PATTERNS = ("seq", "rand")
RW = ("read", "write", "randread", "randwrite")  # --rw, as fio spells it
LAYOUTS = ("shared", "shared-all", "per-proc")
PINNING = ("none", "cores", "numa")
MAX_PROCS = 1024
DEFAULT_RUNTIME_NS = 5 * SECOND  # when neither --runtime nor --io-size is given
MAX_OFFSET = 2**63 - 1  # off_t
MAX_SEED = 2**64 - 1
DAY = 86_400 * SECOND

# Refused by run (JobSpec) and by train, whose --warm is its own flag
WARM_UNCACHED = "--warm with --uncached: uncached reads keep no pages to warm; drop one"


@dataclass(frozen=True)
class _JobOptions:
    """The job's own options and every rule between options; JobSpec (below) adds the engines'."""

    path: str = option("", "path", "PATH", "file, block device or URL to read or write (block devices and URLs are only "
                       "read)", sweep=False)
    mode: str = option("cpu", "choice", "--mode", mode_help(), choices=tuple(MODES))
    engine: str = option(
        "auto", "choice", "--engine",
        "I/O engine; auto: the mode's first engine here that opens the target (a file: io_uring where the kernel "
        "allows it, else psync; nfs:// and smb:// URLs: nfs and smb; another URL: curl; gds: cufile; kvikio: "
        "kvikio)", choices=ENGINES,
    )
    bs: int = option(MiB, "size", "--bs", "block size of each read or write", low=1, high=_native.MAX_BS)
    qd: int = option(1, "int", "--qd", "requests in flight per thread (io_uring, curl, null, cufile_batch, cufile_async; "
                     "psync and cufile are always 1); each engine has its own maximum", low=1)
    threads: int = option(1, "int", "--threads", "worker threads, each with its own descriptor and slice of the region",
                          low=1, high=_native.MAX_THREADS)
    rw: str = option("read", "choice", "--rw", "read or write, as fio's rw= spells it (randread and randwrite set --pattern "
                     "rand); writes go only to a file `gdsbench prepare` made", choices=RW, native=False)
    pattern: str = option("seq", "choice", "--pattern", "seq, or rand: every block once per pass, seeded order", choices=PATTERNS)
    offset: int = option(0, "size", "--offset", "start of the region to read or write", sweep=False, low=0, high=MAX_OFFSET)
    size: int = option(0, "size", "--size", "length of the region to read or write (0: to the end of the target)", sweep=False,
                       low=0, high=MAX_OFFSET)
    runtime_ns: int | None = option(
        None, "duration", "--runtime", "measure for this long, looping over the region (default 5s, or no time limit "
        "with --io-size; 0: no time limit)", low=0, high=366 * DAY,
    )
    io_size: int = option(0, "size", "--io-size", "stop after this many bytes read or written (0: no byte limit)", low=0,
                          high=MAX_OFFSET)
    ramp_ns: int = option(0, "duration", "--ramp", "run this long first, outside the statistics", low=0, high=DAY)
    direct: bool | None = option(
        None, "bool", "--direct", "O_DIRECT: bypass the page cache (--buffered: through it); default by mode: "
        "O_DIRECT except cached-bounce", negative="--buffered",
    )
    uncached: bool = option(
        False, "bool", "--uncached", "buffered I/O whose pages are not kept (RWF_DONTCACHE, Linux 6.14+): a read's pages "
        "are dropped once copied, a write's writeback starts at once and its pages are dropped once written back; "
        "pages cached already stay (fio's uncached=1; psync and io_uring, on a filesystem that does it: not tmpfs)",
    )
    fadvise_hint: bool = option(
        False, "bool", "--fadvise-hint", "before buffered I/O, advise the kernel of the access pattern as fio's "
        "fadvise_hint=1 (its default) does: POSIX_FADV_SEQUENTIAL for seq (readahead's window doubled), "
        "POSIX_FADV_RANDOM for rand (no readahead); with O_DIRECT nothing to advise, as in fio",
    )
    warm: bool = option(False, "bool", "--warm", "keep the target's pages in the page cache instead of dropping them first",
                        native=False)
    verify: bool = option(False, "bool", "--verify", "check every block read against the pattern `gdsbench prepare` wrote")
    seed: int = option(1, "int", "--seed", "seed of the random order (rand)", sweep=False, low=0, high=MAX_SEED)
    interval_ns: int = option(100_000_000, "duration", "--interval", "resolution of the throughput timeline", sweep=False,
                              low=1_000_000, high=3600 * SECOND)
    procs: int = option(
        1, "int", "--procs", "worker processes, each with --threads threads, started together (under mpirun: one per rank)",
        native=False, low=1, high=MAX_PROCS,
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
    fsync_every: int = option(0, "int", "--fsync-every", "writes: fsync after every N writes of each thread (fio's fsync=N; "
                              "0: none)", low=0, high=MAX_OFFSET)
    fsync_end: bool = option(False, "bool", "--fsync-end", "writes: fsync when a thread's writes are done, inside the "
                             "measured time (fio's end_fsync)")
    round_reads: int = option(
        0, "int", "--round-reads", "also time every N reads completed in the measured window (per process) as one "
        "round, natively, without pausing between rounds: fixed-work samples, as the pytest plugin uses them (0: none)",
        sweep=False, low=0, high=MAX_OFFSET,
    )
    pin: str = option("none", "choice", "--pin", "pin each process to CPUs: cores (its own share of them) or numa (its GPU's "
                      "node, else the storage's)", choices=PINNING, native=False, sweep=False)
    gpu: tuple[int, ...] = option((0,), "gpus", "--gpu", "GPU index, or several (0,1): processes, else threads, take "
                                  "them round-robin", sweep=False, aliases=("--gpus",))
    gpu_backend: str = option(
        "cuda", "str", "--gpu-backend", "cuda; or sim: a CPU stand-in that tests the staging pipeline "
        "and is never a GPU measurement (sim:fail-copy=N,copy-delay-us=M inject faults and delays)", sweep=False,
    )
    gpu_memory: str = option(
        "cudamalloc", "choice", "--gpu-memory", "how GPU buffers are allocated (bounce, cached-bounce, gds): cudamalloc, "
        "or vmm: CUDA's virtual memory management (cuMemCreate + cuMemMap), as PyTorch's expandable segments allocate",
        choices=("cudamalloc", "vmm"),
    )

    def __post_init__(self) -> None:
        if not isinstance(self.gpu, tuple):  # JobSpec(gpu="0,1") from Python: the same parse as the CLI's
            object.__setattr__(self, "gpu", parse_gpus(self.gpu))
        if self.rw in ("randread", "randwrite"):  # fio's random directions: the random order
            object.__setattr__(self, "pattern", "rand")

    @property
    def direction(self) -> str:
        """Which way bytes go: "read" (into memory) or "write" (to the target), from --rw."""
        return "write" if self.rw in ("write", "randwrite") else "read"

    @property
    def simulated(self) -> bool:
        """Whether GPU memory is the CPU stand-in (gpu/sim_device.cpp), never a real GPU."""
        return self.gpu_backend == "sim" or self.gpu_backend.startswith("sim:")

    @property
    def mode_declaration(self):
        """The declaration of this job's mode (job/modes.py)."""
        return MODES[self.mode]

    @property
    def checks_direct(self) -> bool:
        """Whether gdsbench checks O_DIRECT alignment for it: O_DIRECT, in a mode that does not
        open files its own way (kvikio chooses its own flags)."""
        return self.uses_o_direct and not self.mode_declaration.own_open_flags

    @property
    def opens_target(self) -> bool:
        """Whether its engine reads the target at all (the null engine does not)."""
        return opens_target(self.engine)

    @property
    def on_gpu(self) -> bool:
        """Reads land in GPU memory (real or simulated)."""
        return self.mode_declaration.gpu

    @property
    def real_gpu(self) -> bool:
        """Reads land in a real GPU's memory."""
        return self.mode_declaration.gpu and not self.simulated

    @property
    def uses_o_direct(self) -> bool:
        """O_DIRECT as it will run: the flag, or the mode's default where its engine does O_DIRECT."""
        if self.direct is not None:
            return self.direct
        if self.uncached:  # buffered by definition
            return False
        return self.mode_declaration.direct and (self.engine == "auto" or ENGINE_INFO[self.engine]["supports_direct"])

    def validate(self) -> JobSpec:
        """Check what can be checked without touching the target; return self.
        Each option's own bounds, then every rule between options: the one place they are."""
        for opt in OPTIONS:
            value = getattr(self, opt.name)
            if opt.kind == "choice" and value not in opt.choices:
                raise UsageError(f"{opt.flag} {value}: unknown; choose one of {', '.join(opt.choices)}")
            opt.check(value)
        mode = self.mode_declaration
        if self.gpu_backend != "cuda" and not self.simulated:
            raise UsageError(f"--gpu-backend {self.gpu_backend}: choose cuda (or sim, a CPU stand-in for tests)")
        _native.check_gpu_backend(self.gpu_backend)  # a typo in sim's test hooks, found before anything runs
        if self.simulated and mode.gpu and not mode.simulated:
            raise IncompatibleOptions(f"--gpu-backend sim stands in for GPU memory in bounce and gds modes only, not "
                                      f"--mode {self.mode}")
        if self.gpu_memory != "cudamalloc" and not (mode.gpu and mode.native_loop):
            own = [m.name for m in MODES.values() if m.gpu and m.native_loop]
            raise IncompatibleOptions(f"--gpu-memory {self.gpu_memory}: --mode {self.mode} has no GPU buffers of "
                                      f"gdsbench's own; use it with --mode {', '.join(own)}")
        if self.engine != "auto" and self.engine not in mode.engines:
            raise IncompatibleOptions(
                f"--engine {self.engine} with --mode {self.mode}: this mode reads with {', '.join(mode.engines)}"
            )
        if not mode.cache_choice and self.direct is not None and self.direct != mode.direct:
            how = "reads with O_DIRECT" if mode.direct else "reads through the page cache"
            other = "page-cache reads" if mode.direct else "O_DIRECT"
            raise IncompatibleOptions(f"--mode {self.mode} {how}; for {other} use --mode {mode.other_cache_mode}")
        if self.uncached and not mode.cache_choice and mode.direct:
            raise IncompatibleOptions(f"--uncached: --mode {self.mode} reads with O_DIRECT; for buffered reads use "
                                      f"--mode {mode.other_cache_mode}")
        if not mode.worker_threads and self.threads > 1:
            raise IncompatibleOptions(f"--threads {self.threads}: --mode {self.mode} reads with its own pool; "
                                      "use --kvikio-threads")
        if not mode.native_loop and self.stonewall:
            raise IncompatibleOptions(f"--stonewall with --mode {self.mode}: it runs one loop, there are no workers "
                                      "to stonewall")
        if not mode.many_processes and self.procs > 1:
            raise IncompatibleOptions(f"--procs {self.procs}: --mode {self.mode} runs in one process; "
                                      "use --kvikio-threads")
        engine = ENGINE_INFO[mode.engines[0] if self.engine == "auto" else self.engine]  # auto: what it picks first
        if self.qd > engine["max_depth"]:
            if engine["max_depth"] == 1:
                here = not engine["unavailable"]  # where this one runs, only those that run beside it
                deeper = [e for e in mode.engines if ENGINE_INFO[e]["max_depth"] >= self.qd
                          and ENGINE_INFO[e]["opens"] == engine["opens"] and not (here and ENGINE_INFO[e]["unavailable"])]
                use = f"use --engine {' or '.join(deeper)} for deeper queues, or more --threads" if deeper else \
                    "use more --threads"
                raise IncompatibleOptions(f"--qd {self.qd}: the {engine['name']} engine is synchronous (queue depth 1); "
                                          + use)
            raise IncompatibleOptions(f"--qd {self.qd}: the {engine['name']} engine takes a queue depth from 1 to "
                                      f"{engine['max_depth']}")
        if self.engine != "auto" and self.direction not in ENGINE_INFO[self.engine]["directions"]:
            raise IncompatibleOptions(f"--rw {self.rw}: the {self.engine} engine does not {self.direction}; it does "
                                      f"{' and '.join(ENGINE_INFO[self.engine]['directions'])}")
        self._check_engine_options(mode)
        if self.direct and not engine["supports_direct"]:
            raise IncompatibleOptions(f"--direct: the {engine['name']} engine does not do O_DIRECT; use --buffered")
        if self.uncached and self.direct:
            raise IncompatibleOptions("--uncached with --direct: uncached I/O is buffered I/O whose pages are not kept; "
                                      "drop one")
        if self.engine != "auto":
            self.refuse_buffered_flags(self.engine)
        if self.uncached and self.warm:
            raise IncompatibleOptions(WARM_UNCACHED)
        if self.runtime_ns == 0 and not self.io_size:
            raise UsageError("--runtime 0 means no time limit: give --io-size too, or a positive --runtime such as 10s")
        if self.io_size and self.io_size < self.bs * self.threads:
            raise IncompatibleOptions(
                f"--io-size {units.format_size(self.io_size)}: less than one --bs block per thread "
                f"({units.format_size(self.bs * self.threads)}); raise it or lower --bs/--threads"
            )
        if self.verify and not self.opens_target:
            raise IncompatibleOptions(f"--verify: the {self.engine} engine reads nothing to verify; use psync or io_uring")
        if self.warm and self.uses_o_direct:
            raise IncompatibleOptions("--warm with --direct: O_DIRECT bypasses the page cache; add --buffered to read from it")
        if self.direction == "read":
            for opt in ("fsync_every", "fsync_end"):
                if getattr(self, opt):
                    raise IncompatibleOptions(f"{BY_NAME[opt].flag}: only with --rw write or randwrite")
        elif self.bs % _native.PATTERN_BLOCK or self.offset % _native.PATTERN_BLOCK:
            culprit = f"--bs {units.format_size(self.bs)}" if self.bs % _native.PATTERN_BLOCK else \
                f"--offset {units.format_size(self.offset)}"  # named first: checkpoint's user gave no --rw
            raise IncompatibleOptions(f"{culprit}: writes carry 4 KiB pattern blocks, so --bs and --offset must be "
                                      "multiples of 4K")
        elif self.warm:
            raise IncompatibleOptions(f"--warm with --rw {self.rw}: a warm cache is a read's; drop --warm")
        elif self.layout == "shared-all" and self.procs > 1:
            raise IncompatibleOptions(f"--layout shared-all with --rw {self.rw}: every process would write the same "
                                      "blocks; use --layout shared (each its own part) or per-proc")
        if (self.fsync_every or self.fsync_end) and not self.opens_target:
            raise IncompatibleOptions(f"--fsync-end/--fsync-every with the {self.engine} engine: it writes nothing to "
                                      "sync; use psync or io_uring")
        if self.verify and (self.bs % _native.PATTERN_BLOCK or self.offset % _native.PATTERN_BLOCK):
            raise IncompatibleOptions("--verify checks 4 KiB pattern blocks: --bs and --offset must be multiples of 4K")
        return self

    def _check_engine_options(self, mode) -> None:
        """An engine's option is taken only by that engine, and some may not exceed --qd."""
        foreign = self.foreign_option(mode.engines if self.engine == "auto" else (self.engine,))
        if foreign:
            modes = [m.name for m in MODES.values() if foreign.engine in m.engines]
            fix = f"--engine {foreign.engine}" if self.mode in modes else f"--mode {modes[0]}"
            who = f"--engine {self.engine}" if self.engine != "auto" else f"--mode {self.mode}"
            raise IncompatibleOptions(f"{foreign.flag} is an option of the {foreign.engine} engine, which {who} does "
                                      f"not read with; use {fix}")
        for opt in OPTIONS:
            value = getattr(self, opt.name)
            if opt.at_most_depth and value != _DEFAULTS[opt.name] and value > self.qd:
                raise IncompatibleOptions(f"{opt.flag} {opt.format(value)}: must be between {opt.format(opt.low)} and "
                                          f"--qd ({self.qd})")

    def foreign_option(self, engines: tuple[str, ...]) -> Option | None:
        """The first option of an engine not in `engines` that this job sets (None: none): the mode's
        engines while --engine is auto; the one the target got once it is resolved (runner), where
        another's option would be ignored."""
        return next((o for o in OPTIONS if o.engine is not None and o.engine not in engines
                     and getattr(self, o.name) != _DEFAULTS[o.name]), None)

    def refuse_buffered_flags(self, engine: str) -> None:
        """IncompatibleOptions where --uncached or --fadvise-hint meets an engine that does not give it to a
        local file's descriptor of its own (validate, and the runner once auto has picked one)."""
        asked = [flag for flag, on in (("--uncached", self.uncached), ("--fadvise-hint", self.fadvise_hint)) if on]
        if asked and not ENGINE_INFO[engine].get("buffered_flags", False):
            doing = [e for e in self.mode_declaration.engines if ENGINE_INFO[e].get("buffered_flags")]
            fix = f"use --engine {' or '.join(doing)} on a local file" if doing else \
                f"--mode {self.mode} reads with none that does; use --mode cpu or cached-bounce"
            raise IncompatibleOptions(f"{asked[0]}: the {engine} engine does not give it to the kernel; {fix}")

    def replace(self, **changes: Any) -> JobSpec:
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """One line a person can read: 'bounce io_uring 1 MiB seq QD8 x2 threads O_DIRECT'."""
        parts = ([self.mode] if self.on_gpu else []) + [self.engine, units.format_size(self.bs), self.pattern,
                                                         *(["write"] if self.direction == "write" else []), f"QD{self.qd}"]
        if self.threads > 1:
            parts.append(f"x{self.threads} threads")
        if self.opens_target:
            parts.append(caching(self.uses_o_direct, self.uncached))
            if self.fadvise_hint and not self.uses_o_direct:  # (O_DIRECT has no readahead to advise: ignored, as fio)
                parts.append("fadvise " + ("random" if self.pattern == "rand" else "sequential"))
        if self.warm:
            parts.append("warm cache")
        if self.fsync_every:
            parts.append(f"fsync every {self.fsync_every}")
        if self.fsync_end:
            parts.append("fsync at end")
        return " ".join(parts)


_KINDS = {"int": int, "bool": bool, "size": int, "duration": int, "choice": str}


def _engine_flag(declared: dict) -> str:
    """An engine option's flag: its name with dashes, a duration's without its _ns (timeout_ns: --timeout)."""
    name = declared["name"].removesuffix("_ns") if declared["kind"] == "duration" else declared["name"]
    return "--" + name.replace("_", "-")


def _engine_option_fields() -> list[tuple[str, type, Any]]:
    """Every engine's own options as JobSpec fields, each with the engine's declaration."""
    out = []
    for engine in ENGINE_INFO.values():
        for o in engine.get("options", ()):
            default = bool(o["default"]) if o["kind"] == "bool" else o["default"]
            bounds = {"choices": tuple(o["choices"])} if o["kind"] == "choice" else {} if o["kind"] == "bool" else \
                {"low": o["low"], "high": o["high"]}
            out.append((o["name"], _KINDS[o["kind"]],
                        option(default, o["kind"], _engine_flag(o), o["help"], native=False,
                               engine=engine["name"], at_most_depth=o.get("at_most_depth", False), **bounds)))
    return out


# JobSpec: the job's options, then each engine's own.
JobSpec = dataclasses.make_dataclass("JobSpec", _engine_option_fields(), bases=(_JobOptions,), frozen=True,
                                     namespace={"__module__": __name__, "__doc__": _JobOptions.__doc__})

# The option table and its lookups, built once: by field name, by the key users write, by results column.
OPTIONS: tuple[Option, ...] = tuple(dataclasses.replace(f.metadata["option"], name=f.name)
                                    for f in dataclasses.fields(JobSpec))
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(JobSpec)}
BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


def spec_columns(spec: JobSpec) -> dict[str, Any]:
    """The spec as results columns (base units, unit-suffixed names)."""
    return {o.column: o.to_column(getattr(spec, o.name)) for o in OPTIONS}


def spec_from_columns(row: dict[str, Any]) -> JobSpec:
    """Inverse of spec_columns, for specs read back from results."""
    values = {}
    for o in OPTIONS:
        value = row[o.column]
        if value != value:  # NaN: pandas' way of writing None in a numeric column
            value = None
        if value is not None and o.kind in ("size", "duration", "int"):
            value = int(value)
        elif o.kind == "bool" and value is not None:
            value = bool(value)
        elif o.kind == "gpus":
            value = parse_gpus(value)
        values[o.name] = value
    return JobSpec(**values)


def spec_from_values(values: dict[str, Any], base: JobSpec | None = None) -> JobSpec:
    """Build a spec from user-written values keyed as users write them
    ({"bs": "4K", "runtime": "10s"}): strings with units, or numbers in base units."""
    unknown = sorted(set(values) - set(BY_KEY))
    if unknown:
        raise UsageError(f"unknown option(s): {', '.join(unknown)}; known: {', '.join(BY_KEY)}")
    return with_parsed({k: BY_KEY[k].parse(v) for k, v in values.items()}, base)


def with_parsed(values: dict[str, Any], base: JobSpec | None = None) -> JobSpec:
    """A spec from values already in base units, keyed as users write them."""
    rw = values.get("rw", "")
    if values.get("pattern") == "seq" and rw.startswith("rand"):  # fio's randread is the random order, always
        raise IncompatibleOptions(f"--pattern seq with --rw {rw}: {rw} is the random order; for a sequential pass "
                                  f"use --rw {rw.removeprefix('rand')}")
    return (base or JobSpec()).replace(**{BY_KEY[k].name: v for k, v in values.items()})
