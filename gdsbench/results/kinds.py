"""The kinds of run a results folder holds, each declared once: the fields
its records carry and the module that draws its page.

Adding a kind of run is one RunKind below and one page module in
gdsbench/reporting/ with build(run_dir, out_dir=None) -> Report: `gdsbench report` and
the end of the command that made the run find the page here; the store
checks every record against the fields.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gdsbench.job.errors import UsageError


@dataclass(frozen=True)
class RunKind:
    name: str  # run.json's "kind"
    # What the pages read of every record: a record where one of these is missing or of another type (a line
    # edited by hand or by a tool) is skipped, as a line that is not JSON is, so the rest of the run still reads.
    numbers: tuple[str, ...]
    optional: tuple[str, ...]  # numbers, or null
    lists: tuple[str, ...]
    # the module under gdsbench.reporting that draws its page: build(run_dir, out_dir=None) returns a
    # reporting.html.Report, whose summary (its answer first) `gdsbench report` prints
    page: str
    # its page draws one point's timeline, which `report --point` picks: build(run_dir, out_dir, point)
    picks_point: bool = False

    @property
    def page_module(self) -> str:
        return f"gdsbench.reporting.{self.page}"


SWEEP = RunKind(
    "sweep",
    numbers=("point", "repeat", "bs_bytes", "qd", "bandwidth_bytes_per_s", "iops", "elapsed_ns", "interval_ns",
             "lat_min_ns", "lat_mean_ns", "lat_p50_ns", "lat_p90_ns", "lat_p99_ns", "lat_p99.9_ns", "lat_p99.99_ns",
             "lat_max_ns", "hist_m2"),
    optional=("cpu_s_per_gb", "cpu_user_s", "cpu_sys_s", "cached_fraction"),
    lists=("hist_index", "hist_count", "timeline_bytes"),
    page="report", picks_point=True)

KINDS = (
    SWEEP,
    RunKind("train",
            numbers=("point", "repeat", "accelerators", "au_percent", "samples_per_s", "mib_per_s", "read_mib_per_s",
                     "step_time_p50_s", "step_time_p99_s", "wait_p50_s", "wait_p99_s"),
            optional=("predicted_au_percent", "straggler_mean_s", "cached_fraction", "samples_per_s_v3", "mib_per_s_v3",
                      "au_percent_v3"),
            lists=("au_time_s", "au_time", "step_time_s_all"),
            page="train_report"),
    RunKind("checkpoint",
            numbers=("checkpoint", "bytes", "duration_s", "throughput_bytes_per_s", "rank_median_s", "rank_min_s",
                     "slowest_rank", "verified_blocks"),
            optional=("cached_fraction", "file_median_s", "file_max_s"),
            lists=("rank_seconds",),
            page="checkpoint_report"),
    RunKind("objects",  # a row per operation (put, head, get, list, delete)
            numbers=("ops", "ops_per_s", "bytes", "bytes_per_s", "lat_p50_us", "lat_p90_us", "lat_p99_us", "lat_max_us",
                     "first_byte_p50_us", "connections", "listed"),
            optional=("duration_s", "batch", "objects_per_s"),
            lists=(),
            page="objects_report"),
    RunKind("kvcache",  # a row per tier and operation; the requests' figures are in run.json's "figures"
            numbers=("ops", "bytes", "bytes_per_s", "total_p50_ms", "total_p95_ms", "total_p99_ms"),
            optional=("device_p50_ms", "device_p95_ms", "device_p99_ms"),
            lists=(),
            page="kvcache_report"),
)
BY_NAME = {k.name: k for k in KINDS}


def kind_of(info: dict) -> RunKind:
    """A run's kind, from its run.json. Sweeps before train runs existed name none; a kind this
    gdsbench does not know (a newer one's run) is drawn as a sweep, its records taken unchecked."""
    name = info.get("kind", SWEEP.name)
    return BY_NAME.get(name) or replace(SWEEP, name=name, numbers=(), optional=(), lists=())


def require_kind(info: dict, run_dir: str, kind: str, doing: str) -> None:
    """UsageError unless the run is of `kind` ("sweep", "train", "checkpoint"), for `doing`."""
    found = kind_of(info).name
    if found != kind:
        raise UsageError(f"run {run_dir}: a {found} run; {doing} takes {kind} runs (`gdsbench report {run_dir}` "
                         f"shows a {found} run's page)")
