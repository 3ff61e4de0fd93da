"""How far a long task has got, on stderr, one display for every command: a
rich bar where stderr is a terminal, plain lines where it is a log.

A task counts steps (validate's checks; a sweep's points, train's accelerator counts and
checkpoint's phases, each with its figure beside the bar) or bytes (a file or
dataset being written, whose log says nothing until the command's own line).
"""

from __future__ import annotations

import sys

# What a bar shows, by what it counts: validate's checks (time so far), a sweep's points (live
# bandwidth, time left; kept on screen), bytes written (amount, speed, time left).
STEPS, POINTS, BYTES = "steps", "points", "bytes"


def _bar(counts: str, description: str, total: int, done: int):
    import rich.progress as rich
    from rich.console import Console

    counted = (rich.TextColumn("{task.description}"), rich.BarColumn(), rich.MofNCompleteColumn())
    if counts == BYTES:
        columns = ("[progress.description]{task.description}", rich.BarColumn(), rich.DownloadColumn(binary_units=True),
                   rich.TransferSpeedColumn(), rich.TimeRemainingColumn())
    elif counts == POINTS:
        columns = (*counted, rich.TextColumn("{task.fields[rate]}"), rich.TimeRemainingColumn())
    else:
        columns = (*counted, rich.TimeElapsedColumn())
    # On stderr, never stdout (rich's default), where a --json result or a table sent to a file goes; the
    # command's own lines printed while it shows go above it on a terminal, and to their file untouched.
    bar = rich.Progress(*columns, transient=counts != POINTS, console=Console(stderr=True),
                        redirect_stdout=sys.stdout.isatty())
    task = bar.add_task(description, total=total, completed=done, rate="")
    bar.start()
    return bar, task


class Progress:
    """A task of `total` steps, `done` of them before this process began (a resumed sweep's). On a
    terminal a bar; else each step's line, `[n/total] what`. host: this host's name where several
    hosts share one stderr (a fleet): always lines, each naming it."""

    def __init__(self, total: int, description: str, counts: str = STEPS, done: int = 0, host: str = ""):
        self.total, self.done = total, done
        self.prefix = f"{host}: " if host else ""
        self.bar, self.task = _bar(counts, description, total, done) if sys.stderr.isatty() and not host else (None, None)

    def start(self, label: str) -> None:
        """A step begins: the bar names it."""
        if self.bar is not None:
            self.bar.update(self.task, description=label, completed=self.done, rate="")

    def rate(self, text: str) -> None:
        """The step's live figure, beside the bar."""
        if self.bar is not None:
            self.bar.update(self.task, rate=text)

    def finish(self, line: str | None = None, rate: str = "") -> None:
        """A step ends: counted; the bar shows `rate`, a log gets `line`."""
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, rate=rate)
        elif line is not None:
            print(f"{self.prefix}[{self.done}/{self.total}] {line}", file=sys.stderr, flush=True)

    def step(self, label: str) -> None:
        """The next step begins, the ones before it done (a log gets its line as it begins)."""
        self.start(label)
        self.done += 1
        if self.bar is None:
            print(f"{self.prefix}[{self.done}/{self.total}] {label}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def progress_printer(label: str):
    """A callback (bytes done, of total) for writing a file or dataset: a bar on a terminal, started
    at the first call and gone at the last; None (nothing said) on a log."""
    if not sys.stderr.isatty():
        return None
    shown: Progress | None = None

    def update(done: int, total: int) -> None:
        nonlocal shown
        if shown is None:
            shown = Progress(total, label, BYTES)
        shown.bar.update(shown.task, completed=done)
        if done >= total:
            shown.close()

    return update
