"""DLIO's summary.json for a train run, so MLPerf Storage's tooling reads a
gdsbench run as it reads DLIO's.

Keys, types and meanings are DLIO 2.0's (utils/statscounter.py, StatsCounter's
summary): `metric.train_au_percentage` is each epoch's AU averaged over the
accelerators; `train_throughput_samples_per_second` each epoch's samples/s
summed over them; `train_io_mean_MB_per_second` the mean of those times the
nominal record length over 2^20 (DLIO's "MB"); `start`/`end` local time as
DLIO stamps them; per-host lists (CPUs, memory, caching) one entry per host,
as each host's accelerators found it. What gdsbench adds sits under
"gdsbench", a namespace of its own.
"""

from __future__ import annotations

import json
import os
import platform
import socket
from datetime import datetime

import numpy as np

from gdsbench import __version__
from gdsbench.results.schema import SCHEMA_VERSION
from gdsbench.system import output_files, provenance

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%f"  # DLIO's LOG_TS_FORMAT
GIB = 1024.0**3


def proc_table(path: str) -> dict[str, str]:
    """A /proc file of "key : value" lines as DLIO's statscounter reads it (lines_to_dict): each line
    with exactly one colon, the last of a repeated key winning; its "processor" lines left out."""
    out: dict[str, str] = {}
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except OSError:
        return out
    for line in lines:
        parts = line.split(":")
        if len(parts) == 2 and parts[0].strip() != "processor":
            out[parts[0].strip()] = parts[1].strip()
    return out


def summary(run, row: dict) -> dict:
    """DLIO's summary.json for one emulated count (a row of `gdsbench train`)."""
    workload, dataset = run.workload, run.dataset
    n, hosts = int(row["accelerators"]), row["host_names"]
    au = [float(x) for x in row["au_percent_per_epoch"]]
    throughput = [float(x) for x in row["samples_per_s_per_epoch"]]
    # DLIO: each host's share of the dataset, nominal record length (npernode x samples / size x record_length)
    per_host = (n // len(hosts)) * workload.samples_per_file * len(dataset.paths) // n * workload.record_bytes / GIB
    memory = [b / GIB for b in row["host_memory_bytes"]]
    return {
        "start": _dlio_time(row["started_at"]),
        "num_accelerators": n,
        "num_hosts": len(hosts),
        "hostname": socket.gethostname(),
        "metric": {
            "train_au_percentage": au,
            "train_au_mean_percentage": float(np.mean(au)),
            "train_au_meet_expectation": "success" if np.mean(au) >= 100 * workload.au_threshold else "fail",
            "train_au_stdev_percentage": float(np.std(au)),
            "train_throughput_samples_per_second": throughput,
            "train_throughput_mean_samples_per_second": float(np.mean(throughput)),
            "train_throughput_stdev_samples_per_second": float(np.std(throughput)),
            "train_io_mean_MB_per_second": float(np.mean(throughput)) * workload.record_bytes / 1024.0 / 1024.0,
            "train_io_stdev_MB_per_second": float(np.std(throughput)) * workload.record_bytes / 1024.0 / 1024.0,
        },
        "num_files_train": len(dataset.paths),
        "num_files_eval": 0,  # evaluation is not emulated (DLIO's default: none)
        "num_samples_per_file": workload.samples_per_file,
        "host_cpu_count": [int(c) for c in row["host_cpus"]],
        "host_processor_name": platform.processor(),
        "potential_caching": [0 if m <= per_host else 1 for m in memory],  # DLIO: 1 where the data fits in memory
        "host_cpuinfo": proc_table("/proc/cpuinfo"),
        "host_meminfo": proc_table("/proc/meminfo"),
        "host_memory_GB": memory,
        "data_size_per_host_GB": per_host,
        "epochs": len(au),
        "end": _dlio_time(row["ended_at"]),
        "gdsbench": {  # beyond DLIO's keys
            "schema_version": SCHEMA_VERSION, "version": __version__, "provenance": provenance.record(),
            "workload": workload.name, "dataset": dataset.directory,
            "point_key": row["point_key"], "repeat": row["repeat"], "data_path": row.get("data_path"),
            "read_mib_per_s": row.get("read_mib_per_s"), "bytes_read": row.get("bytes_read"),
            "straggler_share": row.get("straggler_share"), "cached_fraction": row.get("cached_fraction"),
            "hosts": hosts,
        },
    }


def _dlio_time(iso: str) -> str:
    return datetime.fromisoformat(iso).strftime(TIME_FORMAT)


def write(run_dir: str, run, row: dict, single: bool) -> str:
    """Write the row's summary.json under RUN/dlio/<point>-repeat<R>/ (and at RUN/summary.json where
    the run emulated one count once, where MLPerf's tooling looks); returns the first path."""
    data = summary(run, row)
    folder = os.path.join(run_dir, "dlio", f"{row['point_key']}-repeat{row['repeat']}")
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, "summary.json")] + ([os.path.join(run_dir, "summary.json")] if single else [])
    def dump(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=4)

    for path in paths:
        output_files.write_whole(path, dump)
    return paths[0]
