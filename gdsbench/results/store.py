"""A run on disk: `<results>/<run-id>/`, self-describing and append-only.

    run.json        what was asked (the sweep), by which gdsbench, on what
                    machine and target, and how far it got (status)
    points.jsonl    one line per completed point and repeat, appended and
                    fsync'd as each completes: the record of truth
    points.parquet  the same rows as a table (histograms and timelines as lists),
    points.csv      and without the list columns; both rewritten atomically
                    (temporary file, then rename) after every point

A kill at any moment loses at most the point in flight: a torn last line of
points.jsonl is ignored on reading, and the tables are never half-written.
Only points.jsonl is fsync'd: where the tables fall behind it (a power cut, a
kill between the append and the rewrite) opening the run rebuilds them, and
removes temporary files a killed writer left. A line that is not valid JSON
anywhere else is skipped with a warning naming it; the lines after it count.

One process at a time writes a run: it holds an exclusive lock (flock on
`lock`) while it measures (writing(), the lifecycle every kind of run shares),
and a second is refused naming the holder. A run
whose status says "running" while nobody holds the lock was killed: opening
it says "interrupted".
"""

from __future__ import annotations

import datetime
import fcntl
import glob
import json
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from gdsbench import __version__
from gdsbench.job.errors import UsageError, VerifyFailure
from gdsbench.job.result import Result, histogram_to_dict
from gdsbench.job.spec import spec_columns
from gdsbench.results.kinds import RunKind, kind_of
from gdsbench.results.schema import SCHEMA_VERSION
from gdsbench.system import provenance

RUN_FILE = "run.json"
POINTS_JSONL = "points.jsonl"
POINTS_PARQUET = "points.parquet"
POINTS_CSV = "points.csv"
LOCK_FILE = "lock"
CREATING = ".creating-run-"  # a run folder being made, before its rename into place
FINAL_STATUSES = ("complete", "failed", "interrupted")

def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # NaN is no figure


def damage(row: dict[str, Any], kind: RunKind) -> str | None:
    """What is wrong with a record of a `kind` run ("lat_p99_ns: 'oops', not a number"), or None."""
    for name in kind.numbers + kind.optional + kind.lists:
        value = row.get(name)
        if name in kind.lists:
            ok = isinstance(value, list)
        else:
            ok = _is_number(value) or (value is None and name in kind.optional)
        if not ok:
            return f"{name}: " + ("missing" if name not in row else f"{json.dumps(value)[:20]}, not a "
                                  + ("list" if name in kind.lists else "number"))
    return None



def _write_atomic(path: str, write, *, durable: bool = True) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        write(tmp)
        if durable:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"{path}: cannot write: {e.strerror}; the points saved before this stay in "
                         f"{os.path.join(os.path.dirname(path), POINTS_JSONL)}") from None


def _unreadable(path: str, e: OSError) -> UsageError:
    return UsageError(f"{path}: cannot read it ({e.strerror}); give your user read permission "
                      f"(chmod u+r {path}), or run as the user who made the run")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def record(result: Result, point: int, point_key: str, repeat: int) -> dict[str, Any]:
    """One row of points.jsonl: the spec as run, the figures, the histogram
    (sparse, enough to merge exactly) and the timeline."""
    sparse = histogram_to_dict(result.latency)  # the one sparse form; its columns keep the names results have
    return {
        "point": point,
        "point_key": point_key,
        "repeat": repeat,
        **spec_columns(result.spec),
        **result.summary(),
        "hist_index": sparse["index"],
        "hist_count": sparse["count"],
        "hist_m2": sparse["m2"],
        "timeline_bytes": result.timeline_bytes,
        "warnings": "; ".join(result.warnings),
    }


class RunStore:
    def __init__(self, path: str):
        self.path = path
        self.run_id = os.path.basename(os.path.normpath(path))
        self._table: pa.Table | None = None  # the rows so far, as Arrow, grown a row at a time
        self._lock_fd: int | None = None
        self.problems: list[str] = []  # lines of points.jsonl that were skipped, and why
        self.notes: list[str] = []  # what opening it found and said (a run left "running" by a kill)

    # ---- creating and opening ----

    @classmethod
    def create(cls, results_dir: str, name: str, info: dict[str, Any]) -> RunStore:
        """A new run directory `<results_dir>/<date-time>-<name>`; writes run.json."""
        if not name or "/" in name or name.startswith("."):
            raise UsageError(f"--name {name!r}: a run name is one path component, e.g. nvme-tier")
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        # Made in a hidden folder and renamed into place with its run.json: a kill at any moment
        # leaves a run with a run.json, or a hidden folder that the next create removes.
        making = os.path.join(results_dir, f"{CREATING}{os.getpid()}")
        try:
            os.makedirs(results_dir, exist_ok=True)
            _remove_abandoned(results_dir)
            os.mkdir(making)
        except OSError as e:
            raise UsageError(f"--results {results_dir}: cannot create a run directory there: {e.strerror}") from None
        record = {"schema_version": SCHEMA_VERSION,
                  "name": name, "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "gdsbench": __version__, "provenance": provenance.record(provenance.RUN_TOOLS), "host": socket.gethostname(),
                  "status": "running", **info}
        try:
            for n in range(100):
                run_id = f"{stamp}-{name}" + (f"-{n}" if n else "")
                cls(making).write_info({"run_id": run_id, **record})
                try:
                    os.rename(making, os.path.join(results_dir, run_id))  # fails where that run exists
                    return cls(os.path.join(results_dir, run_id))
                except OSError:
                    continue
            raise UsageError(f"--results {results_dir}: cannot create a new run directory")
        finally:
            if os.path.isdir(making):
                shutil.rmtree(making, ignore_errors=True)

    @classmethod
    def open(cls, run_dir: str) -> RunStore:
        """An existing run, repaired where a killed writer left it inconsistent."""
        if not os.path.isfile(os.path.join(run_dir, RUN_FILE)):
            raise UsageError(f"run {run_dir}: no {RUN_FILE} there; give a run directory or a run id under --results")
        store = cls(run_dir)
        store.info()  # a corrupt run.json is one clear error, here
        if store.holder() is None:  # nobody writes it now: tidy what a killed writer left
            store._remove_stale_temporaries()
            if store.info().get("status") not in FINAL_STATUSES:
                store.update_info(status="interrupted")
                store.notes.append(f"run {store.run_id} was interrupted: it says it was running, but no process "
                                   "writes it now (it was killed); its points saved so far are kept")
            store.rebuild_tables_if_behind()
        return store

    # ---- the writer's lock ----

    def holder(self) -> int | None:
        """The pid of a live process holding this run's lock, else None."""
        path = os.path.join(self.path, LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = os.read(fd, 32).decode(errors="replace").strip()
                return int(text) if text.isdigit() else -1
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def lock(self) -> None:
        """Take this run for writing, for as long as this process lives or until unlock()."""
        path = os.path.join(self.path, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise UsageError(f"run {self.run_id}: another gdsbench (pid {text or '?'}) is writing it; wait for it to "
                             "finish, or stop it, before resuming") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the description releases the flock
            self._lock_fd = None

    def _remove_stale_temporaries(self) -> None:
        for tmp in glob.glob(os.path.join(self.path, "*.tmp-*")):
            pid = tmp.rsplit("-", 1)[-1]
            if pid.isdigit() and not _pid_alive(int(pid)):
                os.unlink(tmp)

    # ---- run.json ----

    def info(self) -> dict[str, Any]:
        path = os.path.join(self.path, RUN_FILE)
        try:
            with open(path) as f:
                info = json.load(f)
        except OSError as e:
            raise _unreadable(path, e) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"{path}: not a gdsbench run description ({e}); the points, if any, are in "
                             f"{os.path.join(self.path, POINTS_JSONL)}") from None
        if not isinstance(info, dict):
            raise UsageError(f"{path}: not a gdsbench run description (a JSON object was expected)")
        return info

    def write_info(self, info: dict[str, Any]) -> None:
        def write(tmp: str) -> None:
            with open(tmp, "w") as f:
                json.dump(info, f, indent=1, default=str)

        _write_atomic(os.path.join(self.path, RUN_FILE), write)

    def update_info(self, **changes: Any) -> None:
        self.write_info({**self.info(), **changes})

    # ---- points ----

    def records(self) -> list[dict[str, Any]]:
        """Every completed point and repeat, in the order they completed. A torn
        last line (a run killed mid-write) is the point that was in flight and is
        left out; any other line that is not a record is skipped, and named in
        self.problems."""
        path = os.path.join(self.path, POINTS_JSONL)
        self.problems = []
        if not os.path.exists(path):
            return []
        kind = kind_of(self.info())
        rows = []
        try:
            with open(path, "rb") as f:
                for number, raw in enumerate(f, start=1):
                    if not raw.endswith(b"\n"):
                        break
                    try:
                        row = json.loads(raw)
                        if not isinstance(row, dict) or "point_key" not in row:
                            raise ValueError("not a point record")
                        wrong = damage(row, kind)
                        if wrong:
                            raise ValueError(wrong)
                    except (ValueError, UnicodeDecodeError) as e:
                        self.problems.append(f"{path} line {number}: skipped, not a point record ({str(e)[:60]})")
                        continue
                    rows.append(row)
        except OSError as e:
            raise _unreadable(path, e) from None
        return rows

    def completed(self) -> set[tuple[str, int]]:
        return {(r["point_key"], r["repeat"]) for r in self.records()}

    def append(self, row: dict[str, Any]) -> None:
        """Durably add one row, then rewrite the tables with it. Each row names the gdsbench that
        measured it (a run resumed by another build says so row by row): the row given gains
        made_by, so what a command prints of it says so too."""
        row.setdefault("made_by", provenance.label())
        path = os.path.join(self.path, POINTS_JSONL)
        self._drop_torn_tail(path)
        if self._table is None:  # first append of this process: start from what is on disk
            self._table = pa.Table.from_pylist(self.records()) if os.path.exists(path) else None
        try:
            with open(path, "a") as f:
                f.write(json.dumps(row, default=float) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            self._drop_torn_tail(path)
            raise UsageError(f"{path}: cannot save the point: {e.strerror}; the points saved before it are kept "
                             f"there (resume with `gdsbench sweep --resume {self.run_id}` once there is room)") from None
        new = pa.Table.from_pylist([row])
        self._table = new if self._table is None or self._table.num_rows == 0 else pa.concat_tables(
            [self._table, new], promote_options="default")
        self.write_tables(self._table)

    @staticmethod
    def _drop_torn_tail(path: str) -> None:
        """Cut a partial last line (left by a kill mid-write) before appending after it."""
        if not os.path.exists(path):
            return
        with open(path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)

    def rebuild_tables_if_behind(self) -> None:
        """Rewrite points.parquet and points.csv from points.jsonl where they hold another number of rows."""
        rows = self.records()
        parquet = os.path.join(self.path, POINTS_PARQUET)
        try:
            behind = pq.ParquetFile(parquet).metadata.num_rows != len(rows) if os.path.exists(parquet) else bool(rows)
        except (OSError, pa.ArrowException):
            behind = True
        if behind and rows:
            self.write_tables(pa.Table.from_pylist(rows))

    def write_tables(self, table: pa.Table) -> None:
        _write_atomic(os.path.join(self.path, POINTS_PARQUET), lambda tmp: pq.write_table(table, tmp), durable=False)
        # CSV has no lists: the histograms, timelines and per-step series stay in the Parquet file
        flat = table.drop_columns([f.name for f in table.schema if pa.types.is_list(f.type)
                                   or pa.types.is_large_list(f.type)])
        _write_atomic(os.path.join(self.path, POINTS_CSV), lambda tmp: pa_csv.write_csv(flat, tmp), durable=False)


@dataclass
class Held:
    """How a run held by writing() ended: its final status, set on leaving the block (the work
    inside sets interrupted where it stopped early without Ctrl-C: a point cut short)."""
    status: str = "failed"
    interrupted: bool = False


@contextmanager
def writing(store: RunStore | None, final: Callable[[], dict[str, Any]] = dict) -> Iterator[Held]:
    """The one lifecycle of a run being measured, whatever its kind: locked (a second writer is
    refused, naming this one, and the run is left as it was), status "running"; then on leaving,
    whatever happens, its final status saved with final()'s fields, and unlocked. The final status
    is complete; interrupted (by Ctrl-C, which ends the block quietly, or held.interrupted); or
    failed (any other error, which goes on up). Under MPI the ranks but 0 have no store: the
    block runs, and Ctrl-C ends it quietly there too."""
    held = Held()
    if store is not None:
        store.lock()
    try:
        if store is not None:
            store.update_info(status="running")
        yield held
        held.status = "interrupted" if held.interrupted else "complete"
    except KeyboardInterrupt:
        held.status = "interrupted"
    finally:
        if store is not None:
            try:
                store.update_info(status=held.status, **final())
            finally:
                store.unlock()


def keep_row(row: dict[str, Any], rows: list, store: RunStore | None, on_row=None) -> None:
    """A finished row of a train or checkpoint run: kept, saved in the run folder, shown; then, if
    its --verify found bad blocks, VerifyFailure (the figures are saved and shown first, not lost)."""
    row.setdefault("schema_version", SCHEMA_VERSION)
    rows.append(row)
    if store is not None:
        store.append(row)
    if on_row:
        on_row(row)
    if row["verify_mismatches"]:
        raise VerifyFailure(f"--verify: {row['verify_mismatches']} blocks read did not match the pattern "
                            f"(the first in {row['first_mismatch']})")


def _remove_abandoned(results_dir: str) -> None:
    """Hidden folders of run creations whose process is gone (killed before the rename)."""
    for folder in glob.glob(os.path.join(results_dir, CREATING + "*")):
        pid = folder.rsplit("-", 1)[-1]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def resolve_run(run: str, results_dir: str = "results") -> str:
    """A run directory from a path or a run id under results_dir."""
    candidates = list(dict.fromkeys((run, os.path.join(results_dir, run))))  # once each: an absolute RUN is both
    for candidate in candidates:
        if os.path.isfile(os.path.join(candidate, RUN_FILE)):
            return candidate
    for candidate in candidates:
        if os.path.isfile(os.path.join(candidate, POINTS_JSONL)):
            raise UsageError(f"run {run}: no {RUN_FILE} in {candidate}, though its points are there "
                             f"({POINTS_JSONL}); a report needs both: restore {RUN_FILE} from a copy of the run")
    raise UsageError(f"run {run}: not found (looked for {RUN_FILE} in {' and '.join(candidates)}); give a run "
                     "directory, or a run id under --results")


def load(run_dir: str) -> pd.DataFrame:
    """The run's points as a tidy DataFrame: one row per point and repeat.

    Columns carry their unit in the name (bs_bytes, lat_p99_ns, cpu_user_s,
    bandwidth_bytes_per_s); hist_index/hist_count hold the latency histogram's
    non-empty buckets, so percentiles of merged points are exact
    (gdsbench.results.analysis.merged_histogram). The run's run.json is in df.attrs["run"].
    """
    store = RunStore.open(run_dir)
    df = pd.DataFrame(store.records())
    df.attrs["run"] = store.info()
    df.attrs["problems"] = store.problems  # lines of points.jsonl skipped, with why
    df.attrs["notes"] = store.notes
    df.attrs["run_dir"] = run_dir
    return df
