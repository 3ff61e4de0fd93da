"""A saved run's page, built at the end of the command that made it."""

from __future__ import annotations

import sys


def show_page(build, run_dir: str, to_stderr: bool) -> None:
    """Build run_dir's page with `build` and say where the run and its page are (on stderr where
    stdout carries JSON). A page that cannot be written is a warning: the run is saved whatever
    the page does."""
    try:
        page = build(run_dir)
        print(f"run: {run_dir}\nreport: {page}", file=sys.stderr if to_stderr else sys.stdout)
    except Exception as e:  # noqa: BLE001 - the run is saved whatever the page does
        print(f"gdsbench: warning: the report page could not be written: {e}", file=sys.stderr)
