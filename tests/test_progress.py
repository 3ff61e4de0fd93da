"""The one progress display (gdsbench/execution/progress.py): a bar on a terminal's stderr, and
nothing of it on stdout, where a table or --json result may go to a file."""

from __future__ import annotations

import os
import subprocess
import sys

SHOWS_A_SWEEP = """
from gdsbench.execution.progress import POINTS, Progress
ui = Progress(2, "sweep", POINTS)
for i in range(2):
    ui.start(f"point {i}")
    ui.finish(f"point {i} done", rate="1 GiB/s")
    print(f"row {i}", flush=True)
ui.close()
"""


def test_a_bar_on_a_terminal_stays_off_a_redirected_stdout():
    main, terminal = os.openpty()  # stderr a terminal, stdout a pipe: `gdsbench sweep ... > rows.txt`
    try:
        done = subprocess.run([sys.executable, "-c", SHOWS_A_SWEEP], stdout=subprocess.PIPE, stderr=terminal,
                              text=True, timeout=60, env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the terminal's other end closed: all was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(main)
    assert done.returncode == 0, shown.decode(errors="replace")
    assert done.stdout == "row 0\nrow 1\n"  # the rows, untouched by the bar
    assert b"2/2" in shown and b"1 GiB/s" in shown  # the bar, on the terminal
