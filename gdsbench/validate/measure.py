"""The checks that read: which path each mode's bytes take, whether they
arrive intact, and the reference points' figures. Every read is an ordinary
gdsbench job (execution/runner.run), so validate measures as `run` does."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from gdsbench.execution.runner import run, runnable_here
from gdsbench.job.errors import IoFailure, UsageError, VerifyFailure
from gdsbench.job.modes import MODES
from gdsbench.job.result import Result
from gdsbench.job.spec import JobSpec
from gdsbench.job.units import format_count, format_duration, format_size
from gdsbench.system import gpu, nvfs
from gdsbench.system.gpu import NO_GPU
from gdsbench.system.targets import Target
from gdsbench.validate.checks import FAIL, INFO, PASS, WARN, Check, skip
from gdsbench.validate.profile import Point

PATH_READ_NS = 300_000_000  # long enough for every mode to have read; the path, not the speed, is checked


def why_not_runnable(mode: str, path: str) -> str | None:
    """Why a mode cannot run here (one line), or None where it can."""
    if MODES[mode].gpu and not gpu.pci_gpus():
        return NO_GPU
    try:
        runnable_here(JobSpec(path=path, mode=mode))
    except UsageError as e:
        return str(e)
    if MODES[mode].path_from == "cufile-platform":
        error = gpu.status()["cuda"]["cufile_error"]
        if error:
            return f"--mode {mode} needs cuFile: {error}"
    return None


def runnable_modes(path: str) -> dict[str, str | None]:
    """Every mode, with why it cannot run here (None where it can)."""
    return {name: why_not_runnable(name, path) for name in MODES}


def metrics(result: Result) -> dict[str, float]:
    return {"gbps": result.bandwidth / 1e9, "iops": result.iops, "p50_us": result.percentile(50) / 1e3,
            "p99_us": result.percentile(99) / 1e3}


# ---- the path each mode's bytes take ----


def path_check(mode: str, target: Target, why_not: str | None, require_gds: bool, asking: dict | None = None) -> Check:
    """Read a moment in `mode` and say which path the bytes took (asking: a URL's --timeout and
    --retries, as JobSpec fields)."""
    name = f"path.{mode}"
    if why_not:
        return skip(name, why_not)
    spec = JobSpec(path=target.path, mode=mode, bs=1 << 20, runtime_ns=PATH_READ_NS, **(asking or {}))
    try:
        result = run(spec, record_environment=False)
    except UsageError as e:  # cannot run this way here (O_DIRECT refused, ...): said, not failed
        return skip(name, str(e))
    except IoFailure as e:
        return read_failed(name, str(e))
    _stop_if_interrupted(result)
    evidence = f"gdsbench run --mode {mode} --bs 1M --runtime 300ms {target.path}"
    if MODES[mode].path_from == "engine":  # the engine's own reads: the path is what it is, by construction
        return Check(name, INFO, result.data_path, evidence=evidence)
    return gpudirect_verdict(name, result.data_path, require_gds, evidence)


def gpudirect_verdict(name: str, label: str, require_gds: bool, evidence: str) -> Check:
    """A read that asked for GPUDirect passes only where its label (system/gpu_path.data_path) says
    nvidia-fs's counters observed it; otherwise FAIL where the profile requires GPUDirect, else WARN."""
    threshold = f"{nvfs.OBSERVED} {'required' if require_gds else 'expected'}: nvidia-fs counted the bytes read"
    if nvfs.OBSERVED in label:
        return Check(name, PASS, label, threshold=threshold, evidence=evidence)
    if nvfs.STATS_OFF in label:
        fix = f"turn on nvidia-fs's IO stats ({nvfs.ENABLE_STATS}) so the path can be observed, and run again"
    else:
        fix = ("asked for GPUDirect, got compatibility mode (or could not see it): see platform.nvidia_fs, "
               "platform.cufile_json and platform.filesystem for the cause")
    return Check(name, FAIL if require_gds else WARN, label, threshold=threshold, evidence=evidence, fix=fix)


def read_failed(name: str, evidence: str) -> Check:
    """A check whose read failed (the device, or the server of a remote target): a FAIL, never the end of validate."""
    return Check(name, FAIL, "the read failed", evidence=evidence,
                 fix="check dmesg and the device, or the server and the network for a URL: reads fail")


# ---- integrity ----


def integrity_check(mode: str, prepared: str | None, why_not: str | None, point: Point, limit_bytes: int,
                    file_size: int, unreadable: str | None = None, asking: dict | None = None) -> Check:
    """Read up to limit_bytes of a prepared file in `mode` and check every block where it landed
    (unreadable: why PATH's first block could not be read to look for a pattern, a FAIL)."""
    name = f"integrity.{mode}"
    if why_not:
        return skip(name, why_not)
    if unreadable:
        return read_failed(name, unreadable)
    if prepared is None:
        return skip(name, "no prepared file to check against (see the note on the target)")
    length = min(limit_bytes, file_size) // point.bs * point.bs
    spec = JobSpec(path=prepared, mode=mode, bs=point.bs, qd=point.qd, threads=point.threads, size=length,
                   io_size=length, runtime_ns=0, verify=True, **(asking or {}))
    where = "GPU memory" if MODES[mode].gpu else "host memory"
    command = (f"gdsbench run --mode {mode} --verify --bs {format_size(point.bs).replace(' ', '')} "
               f"--size {length} --io-size {length} {prepared}")
    try:
        result = run(spec, record_environment=False)
    except VerifyFailure as e:
        bad = e.result
        return Check(name, FAIL, f"{bad.verify_mismatches} of {bad.verified_blocks} blocks wrong, first at offset "
                                 f"{bad.first_mismatch_offset}", threshold="every block matches", value=bad.verify_mismatches,
                     evidence=f"{command}: checked in {where}",
                     fix="the bytes read are not the bytes written: check dmesg and the drive's error log "
                         "(nvme error-log, smartctl -a); re-prepare the file only if it was changed on purpose")
    except UsageError as e:
        return skip(name, str(e), evidence=command)
    except IoFailure as e:
        return read_failed(name, f"{command}: {e}")
    _stop_if_interrupted(result)
    return Check(name, PASS, f"{result.verified_blocks} blocks ({format_size(result.bytes)}) intact, checked in {where}",
                 threshold="every block matches", value=0, evidence=command)


# ---- the reference points ----


@dataclass
class Measurement:
    point: Point
    why_not: str | None = None  # why it was not measured
    runs: list[dict] = field(default_factory=list)  # the figures of each repeat
    seconds: float = 0.0  # wall time of all its repeats
    data_path: str = ""
    error: str | None = None
    read_failed: bool = False  # error is a read that failed (the device, a server): a FAIL, not a SKIP

    def median(self, metric: str) -> float | None:
        values = [r[metric] for r in self.runs]
        return statistics.median(values) if values else None

    def spread(self, metric: str) -> float | None:
        """(max - min) / median of the repeats, or None with fewer than two."""
        values = [r[metric] for r in self.runs]
        middle = statistics.median(values) if len(values) > 1 else 0
        return (max(values) - min(values)) / middle if middle else None

    def to_dict(self) -> dict:
        from gdsbench.validate.profile import METRICS

        return {"about": self.point.about, "settings": self.point.settings(), "not_measured": self.why_not,
                "seconds": round(self.seconds, 3),
                "error": self.error, "data_path": self.data_path, "runs": self.runs,
                "median": {m: self.median(m) for m in METRICS} if self.runs else {}}


def point_spec(point: Point, path: str, runtime_ns: int, ramp_ns: int, asking: dict | None = None) -> JobSpec:
    """The job of a reference point; a write point's ends in an fsync, inside its measured time
    (asking: a URL's --timeout and --retries, as path_check's)."""
    return JobSpec(path=path, mode=point.mode, engine=point.engine, bs=point.bs, qd=point.qd, threads=point.threads,
                   pattern=point.pattern, rw=point.rw, fsync_end=point.rw != "read", runtime_ns=runtime_ns,
                   ramp_ns=ramp_ns, **(asking or {}))


def measure_once(m: Measurement, spec: JobSpec, progress=None) -> None:
    """One repeat of a point, added to m (or its error noted)."""
    began = time.monotonic()
    try:
        result = run(spec, record_environment=False, progress=progress)
    except (UsageError, IoFailure) as e:
        m.error, m.read_failed = str(e), isinstance(e, IoFailure)
        return
    finally:
        m.seconds += time.monotonic() - began
    _stop_if_interrupted(result)
    m.runs.append({k: round(v, 6) for k, v in metrics(result).items()})
    m.data_path = result.data_path


def describe_figures(m: Measurement) -> str:
    """'2.05 GB/s, 1.95 k IOPS, p99 13.6 ms; median of 3' for the table."""
    gbps, iops, p99 = m.median("gbps"), m.median("iops"), m.median("p99_us")
    return (f"{gbps:.3g} GB/s, {format_count(iops)} IOPS, p99 {format_duration(p99 * 1e3)}; "
            f"median of {len(m.runs)}")


def _stop_if_interrupted(result: Result) -> None:
    if result.interrupted:  # Ctrl-C inside a run: stop validating, keep the checks made
        raise KeyboardInterrupt
