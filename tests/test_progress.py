"""The one progress display (gdsbench/execution/progress.py): a bar on a terminal's stderr for
sweep, validate, prepare, train and checkpoint, and nothing of it on stdout, where a table or a
--json result may go to a file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

from tests.test_checkpoint import SMALL as SMALL_MODEL
from tests.test_train import SMALL as SMALL_WORKLOAD
from tests.test_train import dataset_dir  # noqa: F401 - the fixture

SHOWS_A_SWEEP = """
from gdsbench.execution.progress import POINTS, Progress
ui = Progress(2, "sweep", POINTS)
for i in range(2):
    ui.start(f"point {i}")
    ui.finish(f"point {i} done", rate="1 GiB/s")
    print(f"row {i}", flush=True)
ui.close()
"""


def on_a_terminal(*argv: str, cwd=None) -> tuple[str, str]:
    """(stdout, what the terminal showed): argv run with stderr a terminal and stdout a pipe, as
    `gdsbench sweep ... > rows.txt` typed at a terminal. The terminal is read while the command runs:
    a pty holds only a few KiB, and a bar redrawn for longer (a loaded machine) would block the
    command on a full one until the timeout."""
    main, terminal = os.openpty()
    shown = bytearray()

    def read_terminal():
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the other end closed: all was read
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        done = subprocess.run([sys.executable, *argv], stdout=subprocess.PIPE, stderr=terminal, text=True,
                              timeout=300, cwd=cwd, env={**os.environ, "TERM": "xterm", "COLUMNS": "120"})
    finally:
        os.close(terminal)  # the reader then meets the end of what was written
        reader.join(timeout=30)
        os.close(main)
    text = bytes(shown).decode(errors="replace")
    assert done.returncode == 0, text
    return done.stdout, text


def test_a_bar_on_a_terminal_stays_off_a_redirected_stdout():
    stdout, shown = on_a_terminal("-c", SHOWS_A_SWEEP)
    assert stdout == "row 0\nrow 1\n"  # the rows, untouched by the bar
    assert "2/2" in shown and "1 GiB/s" in shown  # the bar, on the terminal


def test_checkpoint_shows_each_phase_on_the_bar(tmp_path):
    stdout, shown = on_a_terminal("-m", "gdsbench", "checkpoint", str(tmp_path / "ck"), *SMALL_MODEL,
                                  "--checkpoints", "1", "--results", str(tmp_path / "res"))
    assert "write checkpoint 1" in stdout and "━" not in stdout  # its lines as on a log
    assert "2/2" in shown and re.search(r"[KMG]iB/s", shown)  # write and read, each with its rate


def test_train_shows_each_count_on_the_bar(tmp_path, dataset_dir):  # noqa: F811 - the fixture
    stdout, shown = on_a_terminal("-m", "gdsbench", "train", dataset_dir, *SMALL_WORKLOAD, "--accelerators", "1,2",
                                  "--results", str(tmp_path))
    assert "accelerators: AU" in stdout and "━" not in stdout
    assert "2/2" in shown and "AU " in shown
