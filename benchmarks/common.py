"""Shared by the benchmark scripts: where tables go, and how they are written."""

from __future__ import annotations

import datetime
import json
import os
import platform
import signal
import statistics
import sys

from gdsbench.system import provenance

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "benchmarks")
# The checkout as the script started: the gdsbench commands it runs read the sources as they are when
# each starts, so a commit or an edit during a run means not all of it ran the code named at its end.
STARTED = provenance.gdsbench()


def median(values):
    return statistics.median(values) if values else float("nan")


def rotated(items, repeat: int) -> list:
    """The order of one repeat: the items rotated by the repeat's number, so none always runs first."""
    k = repeat % len(items)
    return list(items[k:]) + list(items[:k])


def markdown_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_outputs(name: str, title: str, table: str, notes: list[str], raw: dict,
                  directory: str = RESULTS, tools=(), commands: dict[str, list[str]] | None = None) -> tuple[str, str]:
    """Write <name>.md (a table a person reads) and <name>.json (every measured value), each naming
    the gdsbench commit that made them and the version of every other tool in the comparison
    (`tools`: names provenance.TOOLS knows; `commands`: how to ask one run from elsewhere)."""
    os.makedirs(directory, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = "python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    made = provenance.record(("python", *tools), commands)
    if made["gdsbench"] != STARTED:
        made["gdsbench"] = {**STARTED, "changed_during_run": made["gdsbench"]}
    versions = ", ".join(f"{tool}: {version or 'not found'}" for tool, version in made["tools"].items())
    header = [f"# {title}", "", f"Measured {stamp} on {platform.node()} ({platform.release()}, "
              f"{os.cpu_count()} CPUs). Command: `{command}`", "",
              f"Made by {provenance.label(made['gdsbench'])}; {versions}.", ""]
    md_path = os.path.join(directory, f"{name}.md")
    with open(md_path, "w") as f:
        f.write("\n".join(header + [table, ""] + [f"- {n}" for n in notes]) + "\n")
    json_path = os.path.join(directory, f"{name}.json")
    with open(json_path, "w") as f:
        json.dump({"measured": stamp, "command": command, "host": platform.node(), "provenance": made, **raw}, f,
                  indent=1, default=str)
    return md_path, json_path


def kill_session(pid: int) -> None:
    """SIGKILL every process of the session a child was started in (start_new_session); one already
    gone (it ended as the time limit came) is nothing to kill."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def drop_caches() -> None:
    """Drop the whole page cache (root), as MLPerf Storage's runs do before each."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
