"""The Prometheus text format node_exporter's textfile collector reads
(`validate --metrics FILE.prom`, `run --metrics FILE.prom`), for fleets whose
nodes are scraped: one gauge per check state and per figure, labelled with
the check, mode, block size and device, written whole and renamed into place
(the collector must never read half a file).
"""

from __future__ import annotations

import time

from gdsbench.system import output_files, provenance

STATES = ("PASS", "INFO", "WARN", "FAIL", "SKIP")


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """Gauges grouped by name, each with its HELP and TYPE once, in the order first given."""

    def __init__(self) -> None:
        self.families: dict[str, tuple[str, list[str]]] = {}

    def gauge(self, name: str, help_text: str, value: float, **labels) -> None:
        shown = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items() if v is not None)
        self.families.setdefault(name, (help_text, []))[1].append(
            f"{name}{{{shown}}} {float(value)!r}" if shown else f"{name} {float(value)!r}")

    def text(self) -> str:
        out = []
        for name, (help_text, samples) in self.families.items():
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *samples]
        return "\n".join(out) + "\n"


def _build_info(m: Metrics) -> None:
    """Which gdsbench wrote the file, as Prometheus's *_build_info convention has it."""
    made = provenance.gdsbench()
    m.gauge("gdsbench_build_info", "the gdsbench that wrote these metrics: version, commit, and whether its sources "
            "differed from that commit", 1, version=made["version"], commit=made.get("commit") or "not a checkout",
            dirty=str(bool(made.get("dirty"))).lower())


def validate_metrics(v) -> Metrics:
    """A validation: each check's state (1 for the state it is in, 0 for the others), its measured
    value where it has one, each reference point's medians, the exit code, when it ran."""
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
        labels = dict(point=name, mode=meas.point.mode, block_size=str(meas.point.bs), rw=meas.point.rw, device=device)
        m.gauge("gdsbench_validate_bandwidth_bytes_per_second", "median bandwidth of a validate reference point",
                meas.median("gbps") * 1e9, **labels)
        m.gauge("gdsbench_validate_iops", "median operations per second of a validate reference point",
                meas.median("iops"), **labels)
        for p in ("p50", "p99"):
            m.gauge(f"gdsbench_validate_latency_{p}_seconds", f"median {p} latency of a validate reference point",
                    meas.median(f"{p}_us") / 1e6, **labels)
    m.gauge("gdsbench_validate_exit_code", "validate's exit code (0 pass, 1 a FAIL, 2 not ready, 130 interrupted)",
            v.exit_code, device=device)
    m.gauge("gdsbench_validate_timestamp_seconds", "when this validation was written, Unix time", time.time(),
            device=device)
    return m


def run_metrics(result) -> Metrics:
    """One run's figures, labelled with what ran."""
    spec = result.spec
    target = (result.environment or {}).get("target") or {}
    labels = dict(mode=spec.mode, engine=spec.engine, rw=spec.rw, block_size=str(spec.bs), queue_depth=str(spec.qd),
                  threads=str(spec.threads), device=target.get("block_device") or spec.path)
    m = Metrics()
    _build_info(m)
    m.gauge("gdsbench_run_bandwidth_bytes_per_second", "bandwidth of a gdsbench run", result.bandwidth, **labels)
    m.gauge("gdsbench_run_iops", "operations per second of a gdsbench run", result.iops, **labels)
    for p in (50, 99, 99.9):
        key = str(p).replace(".", "_")
        m.gauge(f"gdsbench_run_latency_p{key}_seconds", f"p{p} latency of a gdsbench run", result.percentile(p) / 1e9,
                **labels)
    m.gauge("gdsbench_run_cpu_seconds_per_gigabyte", "CPU seconds the process spent per GB moved",
            result.cpu_s_per_gb or 0.0, **labels)
    m.gauge("gdsbench_run_verify_mismatches", "blocks --verify found wrong (0 where not verified)",
            result.verify_mismatches, **labels)
    m.gauge("gdsbench_run_timestamp_seconds", "when this run's metrics were written, Unix time", time.time(), **labels)
    return m


def written_by_gdsbench(path: str) -> bool:
    """Whether the file is metrics gdsbench wrote (every family it writes is gdsbench_*)."""
    return output_files.starts_with(path, "# HELP gdsbench_")


def check(path: str, error=None) -> None:
    """Before anything runs: --metrics can be written at path, and replaces nothing but gdsbench's own."""
    output_files.check("--metrics", path, written_by_gdsbench, "metrics", "gdsbench.prom", *([error] if error else []))


def write(metrics: Metrics, path: str) -> None:
    """Whole, then renamed into place: the textfile collector reads only *.prom, never the temporary."""
    def text(tmp: str) -> None:
        with open(tmp, "w") as f:
            f.write(metrics.text())
    output_files.write_whole(path, text)
