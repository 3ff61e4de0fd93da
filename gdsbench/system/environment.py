"""The machine a result was measured on: host, kernel, CPU, memory, library
versions. (The storage beneath a target is described by target.describe.)"""

from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata
from pathlib import Path

from gdsbench import __version__


def meminfo(key: str) -> int | None:
    """A /proc/meminfo field in bytes, e.g. meminfo('MemAvailable')."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0]) * 1024
    except OSError:
        pass
    return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _os_name() -> str | None:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def distribution_version(*names: str) -> str | None:
    """"NAME VERSION" of the first of these installed Python distributions, or None."""
    return next((f"{name} {version}" for name in names if (version := _version(name))), None)


def host_environment() -> dict:
    clocksource = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "os": _os_name(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "ram_bytes": meminfo("MemTotal"),
        "clocksource": clocksource.read_text().strip() if clocksource.exists() else None,
        "python": sys.version.split()[0],
        "gdsbench": __version__,
        "numpy": _version("numpy"),
        "pandas": _version("pandas"),
    }
