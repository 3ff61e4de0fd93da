"""One validation, start to end: find the target, run every check in order
(platform, path, integrity, performance), and keep what was found so far
even when it is interrupted."""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from gdsbench import __version__
from gdsbench.execution.progress import Progress, progress_printer
from gdsbench.execution.scratch import SCRATCH_PATH, ensure_scratch
from gdsbench.job.errors import EXIT_INTERRUPTED, GdsbenchError, IoFailure, UsageError
from gdsbench.job.modes import MODES
from gdsbench.job.units import format_size
from gdsbench.system import gpu, provenance
from gdsbench.system.environment import host_environment
from gdsbench.system.prepare import created_by_gdsbench, prepare
from gdsbench.system.targets import Target, is_local, target_for
from gdsbench.validate import judge, measure, platform
from gdsbench.validate.checks import FAIL, GROUPS, PASS, Check, counts
from gdsbench.validate.profile import Profile, ProfileError

SCRATCH_NAME = "gdsbench-validate{host}.dat"  # the file validate prepares in a directory it is given, or beside PATH
WRITE_NAME = "gdsbench-validate{host}-write.dat"  # the file the write point writes into, beside PATH, always removed


class NotReady(GdsbenchError):
    """The environment is not ready to validate (PATH missing, nothing to read): exit 2, as gds-diag has it."""

    exit_code = 2


@dataclass
class Validation:
    """Everything one validation found: the checks, and the figures behind them."""

    profile: Profile
    quick: bool
    target: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what validate did to the filesystem, or skipped, and why
    checks: list[Check] = field(default_factory=list)
    measurements: dict[str, measure.Measurement] = field(default_factory=dict)
    started: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    seconds: float = 0.0
    interrupted: bool = False
    baseline: str | None = None
    options: dict = field(default_factory=dict)  # as given on the command line
    unwritten: list[str] = field(default_factory=list)  # reports asked for (--junit, --metrics) and not written

    def report_unwritten(self, problem: str) -> None:
        """A report of this validation could not be written (a full disk): said in its notes, and never a pass."""
        self.unwritten.append(problem)
        self.notes.append(f"{problem}: a validation whose report was not written is not a pass (exit "
                          f"{ProfileError.exit_code})")

    @property
    def measured_anything(self) -> bool:
        """Whether any read was measured or verified: a validation that read nothing proved nothing."""
        return any(m.runs for m in self.measurements.values()) or \
            any(c.group == "integrity" and c.status in (PASS, FAIL) for c in self.checks)

    @property
    def exit_code(self) -> int:
        """gds-diag's: 1 on any FAIL, else 0 (WARN allowed); 2 (not ready) when nothing could be
        measured; 130 after Ctrl-C; and 3 (validate's usage code) for a pass whose report was not written."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        if any(c.status == FAIL for c in self.checks):
            return 1
        if not self.measured_anything:
            return NotReady.exit_code
        return ProfileError.exit_code if self.unwritten else 0

    def ordered(self) -> list[Check]:
        return sorted(self.checks, key=lambda c: GROUPS.index(c.group))

    def to_dict(self) -> dict:
        return {
            "gdsbench": __version__, "options": self.options, "started": self.started,
            "seconds": round(self.seconds, 2), "host": os.uname().nodename,
            "quick": self.quick, "interrupted": self.interrupted, "exit_code": self.exit_code,
            "summary": counts(self.checks), "profile": self.profile.to_dict(), "baseline": self.baseline,
            "target": self.target, "notes": self.notes, "checks": [c.to_dict() for c in self.ordered()],
            "measurements": {name: m.to_dict() for name, m in self.measurements.items()},
            "environment": host_environment(),
            "provenance": provenance.record(provenance.RUN_TOOLS + provenance.GPU_TOOLS),
        }


class Targets:
    """What validate reads: PATH (or a file it makes in the directory PATH
    names, or the default scratch file), and the pattern file integrity reads,
    which it prepares beside PATH where PATH is not one and it may write there."""

    def __init__(self, path: str | None, size: int, notes: list[str], least: int = 0, host: str = "",
                 asking: dict | None = None):
        # host: "" alone, else "-HOST", so hosts of a fleet sharing a directory never meet in one file;
        # asking: how a URL PATH's server is asked (--timeout, --retries), the first look included
        self.asking = asking
        self.scratch_name, self.write_name = SCRATCH_NAME.format(host=host), WRITE_NAME.format(host=host)
        self.made: list[str] = []  # files this validation created, removed at the end
        self.notes = notes
        if path is None:
            ensure_scratch()
            path = SCRATCH_PATH
        elif os.path.isdir(path):
            path = self._make(os.path.join(path, self.scratch_name), size, fatal=True)
        self.target = self._inspect(path, asking)
        if self.target.size < least:  # an empty file, /proc/self/status, a few KiB: nothing could be measured
            raise NotReady(f"PATH {path}: {format_size(self.target.size)}, too small to measure: the reference points "
                           f"read at least {format_size(least)}; give a larger file, or a directory validate may "
                           "write a test file in")
        self.unreadable: str | None = None  # why PATH could not be read to look for a pattern (a server fault)
        self.prepared = self._pattern_file(self.target, size)
        self.size = size
        self._writable: str | None = None
        self.why_not_writable: str | None = None

    def writable(self) -> str | None:
        """A file of validate's own to write into, beside PATH, made on first use and removed at
        the end; None (why_not_writable says why) where it cannot be: gdsbench never writes to a
        block device, a remote object or a file it did not make."""
        if self._writable or self.why_not_writable:
            return self._writable
        folder = self.target.folder()
        if folder is None:
            self.why_not_writable = (f"PATH is {self.target.where}: gdsbench writes only into a file it makes; give a "
                                     "directory on the storage to validate writes")
            return None
        path = os.path.join(folder, self.write_name)
        before = len(self.notes)
        self._writable = self._make(path, self.size, purpose="to write into")
        if self._writable is None:
            self.why_not_writable = self.notes[before] if len(self.notes) > before else "no file could be made"
        return self._writable

    @staticmethod
    def _inspect(path: str, asking: dict | None) -> Target:
        try:
            return target_for(path, asking=asking)
        except (UsageError, IoFailure) as e:  # missing, refused, or a server that failed the first look
            raise NotReady(str(e)) from None

    def _make(self, path: str, size: int, fatal: bool = False, purpose: str = "to read") -> str | None:
        existed = os.path.exists(path)
        # one an earlier validate made and could not remove (it was killed) is ours: used, then removed
        leftover = existed and os.path.basename(path) in (self.scratch_name, self.write_name) and os.path.isfile(path) and \
            created_by_gdsbench(path)
        try:
            prepare(path, size, progress=progress_printer(f"preparing {path}"), size_flag="a test file of")
        except UsageError as e:
            if fatal:
                raise NotReady(f"PATH {os.path.dirname(path)}: cannot write a test file there ({e}); give a file "
                               "to read, or a directory validate may write in") from None
            self.notes.append(f"integrity: no pattern file, and none could be made: {e}")
            return None
        if not existed or leftover:
            self.made.append(path)
        why = "; a leftover of an earlier validate that was stopped, removed afterwards" if leftover else \
            "" if existed else "; removed afterwards"
        self.notes.append(f"prepared {path} ({format_size(size)}) {purpose}{why}")
        return path

    def _pattern_file(self, target: Target, size: int) -> str | None:
        try:
            if target.kind != "block" and target.has_pattern(0):
                return target.path
        except IoFailure as e:  # its integrity checks FAIL with it; the other checks read for themselves
            self.unreadable = f"looking for a gdsbench pattern in {target.path}: {e}"
            return None
        if not is_local(target):
            self.notes.append("integrity: PATH is a remote object without a gdsbench pattern; give one `gdsbench "
                              "prepare` wrote (`gdsbench prepare s3://BUCKET/KEY --size 1G`, or a prepared file served "
                              "over HTTP) to check integrity")
            return None
        folder = target.folder()
        if folder is None:
            self.notes.append("integrity: PATH is a block device, and gdsbench never writes to one; give a directory on "
                              "a filesystem on it to check integrity")
            return None
        return self._make(os.path.join(folder, self.scratch_name), size)

    def remove_made(self) -> None:
        for path in self.made:
            try:
                if stat.S_ISREG(os.stat(path).st_mode):
                    os.unlink(path)
            except OSError as e:
                self.notes.append(f"could not remove {path}: {e.strerror}")


def validate(path: str | None, profile: Profile, *, quick: bool = False, baseline: dict | None = None,
             baseline_source: str = "", host: str = "", asking: dict | None = None) -> Validation:
    """Run every check; Ctrl-C stops early with the checks made so far (interrupted=True). host:
    this host's name where several validate at once (their files in a shared folder are their own);
    asking: how a URL PATH's server is asked, every request alike (remote_object.asking_of's form)."""
    began = time.monotonic()
    if quick:
        profile = profile.for_quick()
    if baseline is not None:
        judge.require_comparable(baseline, profile, baseline_source)
    v = Validation(profile, quick, baseline=baseline_source or None,
                   options={"path": path, "profile": profile.source, "quick": quick, "baseline": baseline_source or None,
                            **({"asking": asking} if asking else {})})
    storage_points = [p for p in profile.points.values() if not MODES[p.mode].gpu and p.rw == "read"]
    targets = Targets(path, profile.integrity_bytes, v.notes, max((p.bs * p.threads for p in storage_points), default=0),
                      f"-{host}" if host else "", asking)
    job = asking or {}  # each read's job asks as the look did
    target = targets.target
    v.target = target.describe()
    modes = measure.runnable_modes(target.path)
    points = profile.points
    rounds = profile.repeats
    progress = Progress(1 + 2 * len(modes) + rounds * len(points), "validate", host=host)
    facts = platform.Facts(gpu.status(), target, profile.require_gds, profile.node)
    links_under_load: dict[str, dict] = {}
    try:
        progress.step("platform")
        v.checks += _timed(platform.checks, facts)
        for mode, why_not in modes.items():
            progress.step(f"path: {mode}")
            v.checks += _timed(measure.path_check, mode, target, why_not, profile.require_gds, job)
        size = target_for(targets.prepared, asking=asking).size if targets.prepared else 0
        for mode, why_not in modes.items():
            progress.step(f"integrity: {mode}")
            v.checks += _timed(measure.integrity_check, mode, targets.prepared, why_not, _point_for(mode, profile),
                               profile.integrity_bytes, size, targets.unreadable, job)
        v.measurements = {name: measure.Measurement(p, why_not=modes[p.mode]) for name, p in points.items()}
        for r in range(rounds):  # A B C A B C: drift over the run falls on every point alike
            for name, m in v.measurements.items():
                progress.step(f"performance: {name} ({r + 1}/{rounds})")
                if m.why_not or m.error:
                    continue
                where = target.path if m.point.rw == "read" else targets.writable()
                if where is None:
                    m.why_not = targets.why_not_writable
                    continue
                spec = measure.point_spec(m.point, where, profile.runtime_ns, profile.ramp_ns, job)
                sample = None
                if not spec.opens_target and facts.gpus:  # copies only: read the GPUs' links while they are busy
                    def sample(nbytes, elapsed_ns):
                        links_under_load.update(platform.sample_links(facts.gpus))
                measure.measure_once(m, spec, sample)
    except KeyboardInterrupt:
        v.interrupted = True
    finally:
        progress.close()
        targets.remove_made()
    v.checks += platform.gpu_links(facts, links_under_load)
    v.checks += judge.performance_checks(v.measurements, profile, baseline, baseline_source)
    if not v.interrupted and not v.measured_anything:
        v.notes.append("nothing was measured: every reference point and integrity read failed or was skipped "
                       "(see above), so this node is not validated (exit 2, not ready)")
    v.seconds = time.monotonic() - began
    return v


def _timed(make, *args) -> list[Check]:
    """The check(s) `make` returns, each with the time they took (JUnit's time)."""
    began = time.monotonic()
    made = make(*args)
    made = made if isinstance(made, list) else [made]
    for check in made:
        check.seconds = (time.monotonic() - began) / len(made)
    return made


def _point_for(mode: str, profile: Profile):
    """The reference point whose depth an integrity read in `mode` uses."""
    for point in profile.points.values():
        if point.mode == mode and point.engine == "auto":
            return point
    return profile.points["storage_seq"] if not MODES[mode].gpu else profile.points["bounce"]
