"""A saved run's page: the one its kind declares (gdsbench/results/kinds.py),
built by `gdsbench report` and at the end of the command that made the run;
and that end itself, the same for train and checkpoint (measured())."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from gdsbench.execution import mpi
from gdsbench.job.errors import EXIT_INTERRUPTED
from gdsbench.results.kinds import RunKind, kind_of

if TYPE_CHECKING:  # the store (pandas, pyarrow) is imported where a run is saved: a spawned worker
    from gdsbench.results.store import RunStore  # imports this module too, and saves nothing


@dataclasses.dataclass
class Saved:
    """Where a command's run is saved (--results, --name), what its run.json starts with, and what is
    said once its folder is made (a header naming it)."""
    results: str
    name: str
    info: dict
    started: Callable[[RunStore], None] = lambda store: None


def page_builder(kind: RunKind):
    """The build(run_dir, out_dir=None, ...) -> reporting.html.Report of the page module a kind of run
    declares."""
    return importlib.import_module(kind.page_module).build


def build_page(store: RunStore):
    """The page of the run in `store`, by the page module its kind declares (a reporting.html.Report)."""
    return page_builder(kind_of(store.info()))(store.path)


def show_page(store, to_stderr: bool) -> None:
    """Build the page of the run in `store` and say where the run and its page are (on stderr where
    stdout carries JSON). A page that cannot be written is a warning: the run is saved whatever
    the page does."""
    try:
        page = build_page(store).html_path
        print(f"run: {store.path}\nreport: {page}", file=sys.stderr if to_stderr else sys.stdout)
    except Exception as e:  # noqa: BLE001 - the run is saved whatever the page does
        print(f"gdsbench: warning: the report page could not be written: {e}", file=sys.stderr)


def measured(saved: Saved, measure: Callable[[RunStore | None], None], *, what: str, as_json: bool,
             rows: Callable[[], list[dict]], answer: Callable[[], str], notes: Callable[[], list[str]] = list,
             final: Callable[[], dict] = dict) -> int:
    """A command's run, whatever its kind, from its folder to its page: the folder made (rank 0's;
    the other ranks have none) and saved.started(store) said; measure(store) under the one lifecycle
    (results/store.py's writing()); then, on rank 0, the notes it gathered, its rows as JSON or its
    answer in a line, and its page. The command's exit code: interrupted, or 0 (an error goes on up,
    the run marked failed)."""
    store = None
    from gdsbench.results.store import RunStore, writing

    if mpi.is_root():
        store = RunStore.create(saved.results, saved.name, saved.info)
        saved.started(store)
    with writing(store, final=final) as held:
        measure(store)
    if held.status == "interrupted":
        print(f"gdsbench: interrupted; the {what} finished so far are saved", file=sys.stderr)
    if not mpi.is_root():
        return 0
    for note in notes():
        print(f"gdsbench: note: {note}", file=sys.stderr)
    made = rows()
    if as_json:
        json.dump(made, sys.stdout, indent=1, default=float)
        print()
    elif line := answer():
        print(line)
    if store is not None and made:
        show_page(store, as_json)
    return EXIT_INTERRUPTED if held.status == "interrupted" else 0
