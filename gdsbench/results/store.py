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
(Only points.jsonl is fsync'd: after a power cut the tables may be a point
behind it, and are rebuilt from it by the next append.)
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from gdsbench import __version__
from gdsbench.job.errors import UsageError
from gdsbench.job.result import Result
from gdsbench.job.spec import spec_columns

RUN_FILE = "run.json"
POINTS_JSONL = "points.jsonl"
POINTS_PARQUET = "points.parquet"
POINTS_CSV = "points.csv"
LIST_COLUMNS = ("hist_index", "hist_count", "timeline_bytes")


def git_revision() -> str | None:
    """The checkout's commit, when gdsbench runs from one."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def _write_atomic(path: str, write, *, durable: bool = True) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    write(tmp)
    if durable:
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    os.replace(tmp, path)


def record(result: Result, point: int, point_key: str, repeat: int) -> dict[str, Any]:
    """One row of points.jsonl: the spec as run, the figures, the histogram
    (sparse, enough to merge exactly) and the timeline."""
    counts = result.latency.counts
    nonzero = counts.nonzero()[0]
    return {
        "point": point,
        "point_key": point_key,
        "repeat": repeat,
        **spec_columns(result.spec),
        **result.summary(),
        "hist_index": nonzero.tolist(),
        "hist_count": counts[nonzero].tolist(),
        "hist_m2": result.latency.m2,
        "timeline_bytes": result.timeline_bytes,
        "warnings": "; ".join(result.warnings),
    }


class RunStore:
    def __init__(self, path: str):
        self.path = path
        self.run_id = os.path.basename(os.path.normpath(path))
        self._table: pa.Table | None = None  # the rows so far, as Arrow, grown a row at a time

    # ---- creating and opening ----

    @classmethod
    def create(cls, results_dir: str, name: str, info: dict[str, Any]) -> RunStore:
        """A new run directory `<results_dir>/<date-time>-<name>`; writes run.json."""
        if not name or "/" in name or name.startswith("."):
            raise UsageError(f"--name {name!r}: a run name is one path component, e.g. nvme-tier")
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        try:
            os.makedirs(results_dir, exist_ok=True)
            for n in range(100):
                run_id = f"{stamp}-{name}" + (f"-{n}" if n else "")
                try:
                    os.mkdir(os.path.join(results_dir, run_id))
                    break
                except FileExistsError:
                    continue
            else:
                raise UsageError(f"--results {results_dir}: cannot create a new run directory")
        except OSError as e:
            raise UsageError(f"--results {results_dir}: cannot create a run directory there: {e.strerror}") from None
        store = cls(os.path.join(results_dir, run_id))
        store.write_info(
            {
                "run_id": run_id,
                "name": name,
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "gdsbench": __version__,
                "git_revision": git_revision(),
                "host": socket.gethostname(),
                "status": "running",
                **info,
            }
        )
        return store

    @classmethod
    def open(cls, run_dir: str) -> RunStore:
        if not os.path.isfile(os.path.join(run_dir, RUN_FILE)):
            raise UsageError(f"run {run_dir}: no {RUN_FILE} there; give a run directory or a run id under --results")
        return cls(run_dir)

    # ---- run.json ----

    def info(self) -> dict[str, Any]:
        with open(os.path.join(self.path, RUN_FILE)) as f:
            return json.load(f)

    def write_info(self, info: dict[str, Any]) -> None:
        def write(tmp: str) -> None:
            with open(tmp, "w") as f:
                json.dump(info, f, indent=1, default=str)

        _write_atomic(os.path.join(self.path, RUN_FILE), write)

    def update_info(self, **changes: Any) -> None:
        self.write_info({**self.info(), **changes})

    # ---- points ----

    def records(self) -> list[dict[str, Any]]:
        """Every completed point and repeat, in the order they completed."""
        path = os.path.join(self.path, POINTS_JSONL)
        if not os.path.exists(path):
            return []
        rows = []
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # a torn last line from a killed run: that point was in flight
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break
        return rows

    def completed(self) -> set[tuple[str, int]]:
        return {(r["point_key"], r["repeat"]) for r in self.records()}

    def append(self, row: dict[str, Any]) -> None:
        """Durably add one row, then rewrite the tables with it."""
        path = os.path.join(self.path, POINTS_JSONL)
        self._drop_torn_tail(path)
        if self._table is None:  # first append of this process: start from what is on disk
            self._table = pa.Table.from_pylist(self.records()) if os.path.exists(path) else None
        with open(path, "a") as f:
            f.write(json.dumps(row, default=float) + "\n")
            f.flush()
            os.fsync(f.fileno())
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

    def write_tables(self, table: pa.Table) -> None:
        _write_atomic(os.path.join(self.path, POINTS_PARQUET), lambda tmp: pq.write_table(table, tmp), durable=False)
        flat = table.drop_columns([c for c in LIST_COLUMNS if c in table.column_names])
        _write_atomic(os.path.join(self.path, POINTS_CSV), lambda tmp: pa_csv.write_csv(flat, tmp), durable=False)


def resolve_run(run: str, results_dir: str = "results") -> str:
    """A run directory from a path or a run id under results_dir."""
    for candidate in (run, os.path.join(results_dir, run)):
        if os.path.isfile(os.path.join(candidate, RUN_FILE)):
            return candidate
    raise UsageError(f"run {run}: not found (looked for {RUN_FILE} in {run} and {os.path.join(results_dir, run)})")


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
    return df
