"""--mode kvikio: reads through kvikio's own API (CuFile.pread and its thread
pool), as RAPIDS users run them, into cupy arrays on the GPU.

kvikio is a Python-facing library, so this mode is driven from Python, not
the native worker loop: up to --qd preads are in flight, each split by kvikio
into --kvikio-task-size tasks on --kvikio-threads threads. Each read's latency
is timed in Python from the call to the moment its future returns (futures
are collected oldest first), or to pread() returning when kvikio did the read
inside it (reads under its gds_threshold), and results say so. The data path is what
kvikio's own statistics saw (kvikio >= 26.10: bytes per backend), since kvikio
can fall back to POSIX for one file whatever its global setting says.

The mode's parts: settings.py (kvikio's global settings for a run), loop.py
(the benchmark loop), reader.py (train's sample reader) and path.py (how
kvikio really read, in words).
"""

from gdsbench.execution.kvikio_mode.loop import TIMING_NOTE, run
from gdsbench.execution.kvikio_mode.path import backend_shares, compat_description, sample_data_path
from gdsbench.execution.kvikio_mode.reader import SampleReader

__all__ = ["TIMING_NOTE", "SampleReader", "backend_shares", "compat_description", "run", "sample_data_path"]
