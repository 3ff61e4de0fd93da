"""The Prometheus text format node_exporter's textfile collector reads
(`validate --metrics FILE.prom`, `run --metrics FILE.prom`), for fleets whose
nodes are scraped: a gauge per check state and per figure, latency quantiles as
one summary with a `quantile` label, names in base units as Prometheus's
naming conventions ask (`_seconds`, `_bytes_per_second`, per byte), labelled
with what ran (mode, pattern, O_DIRECT, the data path in short, whether the
GPU was simulated, block size, device), written whole and renamed into place
(the collector must never read half a file).

Every figure is a gauge of the last run, counts too (a run's verify mismatches
go up and down from one run to the next): no family is a counter, so none
ends in `_total`. The one exception in kind is latency: a summary, whose
`_count` and `_sum` are the run's reads and their summed latency.
"""

from __future__ import annotations

import time

from gdsbench.job.result import PERCENTILES
from gdsbench.system import nvfs, output_files, provenance
from gdsbench.system.gpu_path import SIMULATED

STATES = ("PASS", "INFO", "WARN", "FAIL", "SKIP")
VALIDATE_QUANTILES = (50.0, 99.0)  # the percentiles validate keeps per reference run (validate/measure.py)


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict) -> str:
    shown = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items() if v is not None)
    return f"{{{shown}}}" if shown else ""


class Metrics:
    """Families by name, each with its HELP and TYPE once, in the order first given."""

    def __init__(self) -> None:
        self.families: dict[str, tuple[str, str, list[str]]] = {}

    def _family(self, name: str, kind: str, help_text: str) -> list[str]:
        family = self.families.setdefault(name, (kind, help_text, []))
        assert family[0] == kind, f"{name} is a {family[0]}, not a {kind}"
        return family[2]

    def gauge(self, name: str, help_text: str, value: float, **labels) -> None:
        self._family(name, "gauge", help_text).append(f"{name}{_labels(labels)} {float(value)!r}")

    def summary(self, name: str, help_text: str, quantiles: dict[float, float], count: float | None = None,
                total: float | None = None, **labels) -> None:
        """quantiles: {0.99: value}; count and total (its _count and _sum) where they are known."""
        samples = self._family(name, "summary", help_text)
        samples += [f"{name}{_labels(labels | {'quantile': f'{q:g}'})} {float(v)!r}" for q, v in quantiles.items()]
        if count is not None and total is not None:
            samples += [f"{name}_sum{_labels(labels)} {float(total)!r}", f"{name}_count{_labels(labels)} {float(count)!r}"]

    def text(self) -> str:
        out = []
        for name, (kind, help_text, samples) in self.families.items():
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]
        return "\n".join(out) + "\n"


# The paths by which bytes reach host memory (a staged GPU mode's then go on to the GPU: word_bounce).
HOST_PATHS = (
    ("S3 over", "s3"),
    ("HTTP over", "http"),
    ("FTP, ", "ftp"),
    ("NFS, ", "nfs"),
    ("SMB, ", "smb"),
    ("O_DIRECT", "o_direct"),
    ("uncached page-cache", "uncached"),  # RWF_DONTCACHE: through the page cache, its pages not kept
    ("page-cache", "page_cache"),
)
# The data path in a word, for a label: what the bytes passed through, from the words of its full
# label (system/gpu_path.data_path), the most telling first. The full label is in the run's JSON.
SHORT_PATHS = (
    ("unavailable", "unknown"),
    ("standing in for", "stand_in"),  # the simulation's host engine in a GPU engine's place
    ("no reads (the harness's own floor); copies", "copies_only"),
    ("no reads (the harness's own floor)", "none"),
    ("RemoteFile", "kvikio_remote"),  # kvikio's libcurl reads of a URL, then to the GPU
    ("MIXED", "kvikio_mixed"),
    ("not observed: PCI P2PDMA", "p2pdma_unobserved"),  # nvidia-fs's counters still, and P2PDMA possible
    ("which has no nvidia-fs", "cufile_compat"),  # kvikio through a cuFile without nvidia-fs
    ("NOT GPUDirect", "kvikio_posix"),
    (nvfs.OBSERVED, "gpudirect"),
    (nvfs.INFERRED, "gpudirect_inferred"),
    ("COMPATIBILITY mode", "cufile_compat"),
    ("kvikio through cuFile", "kvikio_cufile"),
    *HOST_PATHS,
)


def short_data_path(label: str) -> str:
    """'o_direct', 'page_cache', 'gpudirect', 'cufile_compat', ... for a data-path label; a staged
    path (pinned host memory, then copied to the GPU) ends in '_bounce'; 'unknown' for none."""
    if not label:
        return "unknown"
    short = next((word for key, word in SHORT_PATHS if key in label), "other")
    if short in {word for _, word in HOST_PATHS} and "cudaMemcpyAsync" in label:
        short += "_bounce"
    return short


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _build_info(m: Metrics) -> None:
    """Which gdsbench wrote the file, as Prometheus's *_build_info convention has it."""
    made = provenance.gdsbench()
    m.gauge("gdsbench_build_info", "the gdsbench that wrote these metrics: version, commit, and whether its sources "
            "differed from that commit", 1, version=made["version"], commit=made.get("commit") or "not a checkout",
            dirty=str(bool(made.get("dirty"))).lower())


def validate_metrics(v) -> Metrics:
    """A validation: each check's state (1 for the state it is in, 0 for the others), each reference
    point's medians (labelled with its data path), the exit code, when it ran."""
    device = v.target.get("block_device") or v.target.get("path")
    m = Metrics()
    _build_info(m)
    for c in v.ordered():
        for state in STATES:
            m.gauge("gdsbench_validate_check_state", "1 for the state each validate check is in, 0 for the others",
                    1 if c.status == state else 0, check=c.name, state=state, device=device)
    for name, meas in v.measurements.items():
        if not meas.runs:
            continue
        point = meas.point
        labels = dict(point=name, mode=point.mode, pattern=point.pattern, rw=point.rw, block_size=str(point.bs),
                      data_path=short_data_path(meas.data_path), simulated=_flag(SIMULATED in meas.data_path),
                      device=device)
        m.gauge("gdsbench_validate_bandwidth_bytes_per_second", "median bandwidth of a validate reference point",
                meas.median("gbps") * 1e9, **labels)
        m.gauge("gdsbench_validate_operations_per_second", "median operations per second (IOPS) of a validate "
                "reference point", meas.median("iops"), **labels)
        m.summary("gdsbench_validate_latency_seconds", "latency quantiles of a validate reference point, each the "
                  "median over its repeats (no _sum or _count: they are not kept)",
                  {p / 100: meas.median(f"p{p:g}_us") / 1e6 for p in VALIDATE_QUANTILES}, **labels)
    m.gauge("gdsbench_validate_exit_code", "validate's exit code (0 pass, 1 a FAIL, 2 not ready, 130 interrupted)",
            v.exit_code, device=device)
    m.gauge("gdsbench_validate_timestamp_seconds", "when this validation was written, Unix time", time.time(),
            device=device)
    return m


def run_labels(result) -> dict:
    """What ran, as labels: enough that a simulated run, a sequential one and a random one, or an
    O_DIRECT one and a buffered one, never share a series."""
    spec = result.spec
    target = (result.environment or {}).get("target") or {}
    return dict(mode=spec.mode, engine=spec.engine, rw=spec.rw, pattern=spec.pattern,
                direct=_flag(spec.uses_o_direct), data_path=short_data_path(result.data_path),
                simulated=_flag(spec.on_gpu and spec.simulated), block_size=str(spec.bs), queue_depth=str(spec.qd),
                threads=str(spec.threads), device=target.get("block_device") or spec.path)


def run_metrics(result) -> Metrics:
    """One run's figures, labelled with what ran (run_labels)."""
    labels = run_labels(result)
    m = Metrics()
    _build_info(m)
    m.gauge("gdsbench_run_bandwidth_bytes_per_second", "bandwidth of a gdsbench run", result.bandwidth, **labels)
    m.gauge("gdsbench_run_operations_per_second", "operations per second (IOPS) of a gdsbench run", result.iops,
            **labels)
    lat = result.latency
    m.summary("gdsbench_run_latency_seconds", "latency of each operation of a gdsbench run (quantiles from its "
              "histogram, error under 1%)", {p / 100: result.percentile(p) / 1e9 for p in PERCENTILES},
              count=lat.count, total=lat.mean * lat.count / 1e9, **labels)
    m.gauge("gdsbench_run_cpu_seconds_per_byte", "CPU seconds the process spent per byte moved (user and system, "
            "over the measured window)", (result.cpu_s_per_gb or 0.0) / 1e9, **labels)
    m.gauge("gdsbench_run_verify_mismatched_blocks", "blocks --verify found wrong in the run (0 where not verified)",
            result.verify_mismatches, **labels)
    m.gauge("gdsbench_run_timestamp_seconds", "when this run's metrics were written, Unix time", time.time(), **labels)
    return m


def written_by_gdsbench(path: str) -> bool:
    """Whether the file is metrics gdsbench wrote (every family it writes is gdsbench_*)."""
    return output_files.starts_with(path, "# HELP gdsbench_")


def check(path: str, error: type[Exception]) -> None:
    """As --metrics is parsed (argparse names the flag): metrics can be written at path, and replace
    nothing but gdsbench's own."""
    output_files.check("", path, written_by_gdsbench, "metrics", "gdsbench.prom", error)


def write(metrics: Metrics, path: str) -> None:
    """Whole, then renamed into place: the textfile collector reads only *.prom, never the temporary."""
    def text(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(metrics.text())
    output_files.write_whole(path, text)


def unwritten(metrics: Metrics, path: str) -> str | None:
    """write(), after the figures were shown: None, or why the file could not be written (a full
    disk), in a few words naming --metrics; nothing is left beside it."""
    try:
        write(metrics, path)
    except OSError as e:
        return f"--metrics {path}: not written: {e.strerror or e}"
    return None
