"""What was measured, in words, for the top of a page and the subtitle of
its charts: a chart copied into a slide must still say what it shows."""

from __future__ import annotations

import pandas as pd

from gdsbench.job.spec import BY_KEY, caching
from gdsbench.job.units import format_duration, format_size
from gdsbench.system.provenance import label


def _values(df: pd.DataFrame, column: str, fmt=str) -> str:
    if column not in df.columns:
        return "-"
    values = sorted({v for v in df[column].dropna()}, key=lambda v: (str(type(v)), v))
    return ", ".join(fmt(v) for v in values) or "-"


def command(info: dict) -> str:
    """A command line that plans the same sweep (its grid and fixed options as written)."""
    sweep = info.get("sweep", {})
    fixed = dict(sweep.get("fixed", {}))
    words = ["gdsbench sweep"]
    if fixed.get("path"):
        words.append(str(fixed.pop("path")))
    for key, values in sweep.get("grid", {}).items():
        words.append(f"{BY_KEY[key].flag if key in BY_KEY else '--' + key} {','.join(map(str, values))}")
    for key, value in fixed.items():
        flag = BY_KEY[key].flag if key in BY_KEY else "--" + key
        words.append(flag if value is True else f"{flag} {value}")
    if sweep.get("repeat", 1) != 1:
        words.append(f"--repeat {sweep['repeat']}")
    words.append(f"--name {info.get('name', 'sweep')}")
    return " ".join(words)


def _software(info: dict) -> str:
    """Which gdsbench made the run, and the libraries beside it; a run saved before provenance
    was recorded has its git_revision alone."""
    made = info.get("provenance", {})
    if made.get("gdsbench"):
        tools = ", ".join(f"{v}" for v in made.get("tools", {}).values() if v)
        return label(made["gdsbench"]) + (f"; {tools}" if tools else "") + f", {info.get('created', '')}"
    return (f"gdsbench {info.get('gdsbench', '?')}"
            + (f" (git {info['git_revision'][:12]})" if info.get("git_revision") else "") + f", {info.get('created', '')}")


def what_was_measured(df: pd.DataFrame, info: dict) -> list[tuple[str, str]]:
    """(what, value) rows: the target and its storage, the job, the host, the software."""
    env = info.get("environment", {})
    host = env.get("host", {})
    targets = env.get("targets", {})
    storage = "; ".join(
        f"{path}: " + ", ".join(str(t.get(k)) for k in ("fs_type", "block_device", "model", "protocol", "http_version",
                                                        "server", "server_ip", "cache") if t.get(k))
        for path, t in targets.items()) or "no target (null engine)"
    ram = host.get("ram_bytes")
    job = [(what, _values(df, column, fmt)) for what, column, fmt in (
        ("mode", "mode", str), ("engine", "engine", str), ("pattern", "pattern", str),
        ("block sizes", "bs_bytes", format_size), ("queue depths", "qd", str), ("threads", "threads", str),
        ("processes", "procs", str))]
    return [
        ("target", storage),
        ("job", ", ".join(f"{what} {value}" for what, value in job if value != "-")),
        ("timing", f"{_values(df, 'runtime_ns', format_duration)} measured after a "
                   f"{_values(df, 'ramp_ns', format_duration)} ramp, {info.get('sweep', {}).get('repeat', 1)} "
                   "repeat(s) of each point"),
        ("data path", _values(df, "data_path")),
        ("host", f"{host.get('hostname', '?')}: {host.get('cpu_model', '?')}, {host.get('cpus', '?')} CPUs, "
                 f"{format_size(ram) if ram else '?'} RAM, kernel {host.get('kernel', '?')}"),
        ("software", _software(info)),
        ("command", command(info)),
    ]


def subtitle(df: pd.DataFrame, name: str) -> str:
    """One line under a chart's title: the tier, the pattern, how the bytes travelled."""
    engine = _values(df, "engine")
    uncached = df["uncached"] if "uncached" in df.columns else pd.Series(False, index=df.index)  # (older runs: none)
    direct = ", ".join(sorted({caching(bool(d), bool(u)) for d, u in zip(df["direct"], uncached) if pd.notna(d)})) \
        if "direct" in df.columns else ""
    mode = _values(df, "mode")
    return f"{name} · {_values(df, 'pattern')} reads · {engine}, {direct}" + (f" · mode {mode}" if mode != "-" else "")
