"""A saved run's page: the one its kind declares (gdsbench/results/kinds.py),
built by `gdsbench report` and at the end of the command that made the run."""

from __future__ import annotations

import importlib
import sys

from gdsbench.results.kinds import RunKind, kind_of


def page_builder(kind: RunKind):
    """The build(run_dir, out_dir=None, ...) -> reporting.html.Report of the page module a kind of run
    declares."""
    return importlib.import_module(kind.page_module).build


def show_page(store, to_stderr: bool) -> None:
    """Build the page of the run in `store` and say where the run and its page are (on stderr where
    stdout carries JSON). A page that cannot be written is a warning: the run is saved whatever
    the page does."""
    try:
        page = page_builder(kind_of(store.info()))(store.path).html_path
        print(f"run: {store.path}\nreport: {page}", file=sys.stderr if to_stderr else sys.stdout)
    except Exception as e:  # noqa: BLE001 - the run is saved whatever the page does
        print(f"gdsbench: warning: the report page could not be written: {e}", file=sys.stderr)
