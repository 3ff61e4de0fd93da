from __future__ import annotations

import argparse
import json
import sys

from gdsbench.commands.options import (
    add_job_arguments,
    add_remote_arguments,
    add_run_name_arguments,
    count_arg,
    job_values,
    seconds_arg,
)
from gdsbench.commands.pages import Saved, measured
from gdsbench.commands.workload_flags import add_workload_arguments, workload_from_args
from gdsbench.train import READER_OPTIONS


def add_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="DIR", help="the dataset: a directory `gdsbench prepare --workload` wrote, or any "
                                                   "directory of files (each file one sample, as DLIO's npz)")
    add_workload_arguments(parser)
    add_job_arguments(parser, only=READER_OPTIONS, title="how samples are read (--qd: chunks in flight per reader)")
    add_remote_arguments(parser)
    parser.add_argument("--allow-cached", action="store_true",
                        help="--buffered with a dataset under 5x this host's memory (its pages are dropped "
                             "before each train run and each predict probe)")


def open_inputs(args: argparse.Namespace):
    """The workload, the dataset, the readers' job and the notes said of them, from the command line:
    what a DLIO YAML's keys were not emulated (said as it was translated; --json's output has them
    too). What the dataset itself gives to say is session.dataset_notes'."""
    from gdsbench.job.spec import spec_from_values
    from gdsbench.system.targets.remote_object import asking_of
    from gdsbench.train.dataset import open_dataset
    from gdsbench.train.session import reader_spec

    workload = workload_from_args(args)
    notes = list(getattr(args, "translation_notes", []))  # said by workload_from_args
    values = job_values(args)
    asking = asking_of(spec_from_values({k: v for k, v in values.items() if k != "path"}))  # the listing's too
    dataset = open_dataset(args.path, workload.format, asking, workload.read_columns)
    spec = reader_spec(workload, dataset, values)
    return workload, dataset, spec, notes


def note(notes: list[str], text: str) -> None:
    """Say a note (rank 0) and keep it, as said, for the JSON."""
    _say(f"note: {text}")
    notes.append(text)


MAX_COUNT = 4096  # accelerators in one emulation (train_scale measured the barrier to 1,024)


def parse_counts(text: str, flag: str = "--accelerators") -> list[int]:
    from gdsbench.job.errors import UsageError

    try:
        counts = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text}: give a number, or a comma list such as 1,2,4,8") from None
    if not counts or min(counts) < 1 or max(counts) > MAX_COUNT:
        raise UsageError(f"{flag} {text}: each count must be between 1 and {MAX_COUNT}")
    return counts


class TrainCommand:
    name = "train"
    help = "emulate training input: N accelerators read batches, compute (sleep) and wait for each other; AU as DLIO"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_dataset_arguments(parser)
        parser.add_argument("--accelerators", default=None, metavar="N[,...]",
                            help="emulated accelerators (processes; under mpirun, the ranks); a comma list walks the AU "
                                 "curve (default: 1, or the number of MPI ranks)")
        parser.add_argument("--epochs", type=count_arg(1, 100_000), default=None, metavar="E",
                            help="epochs (default: a DLIO YAML's train.epochs, else 1)")
        parser.add_argument("--steps", type=count_arg(0), default=0, metavar="S",
                            help="at most S steps per epoch (default: DLIO's, files x samples / batch / accelerators)")
        parser.add_argument("--repeat", type=count_arg(1, 1000), default=1, metavar="K",
                            help="emulate each count K times (default: 1)")
        parser.add_argument("--warm", action="store_true", help="keep the dataset's pages in the page cache")
        parser.add_argument("--predict", action="store_true",
                            help="also predict (gdsbench predict) and show the predicted AU beside each emulated one")
        parser.add_argument("--probe-seconds", type=seconds_arg("--probe-seconds"), default=3.0, metavar="S",
                            help="with --predict: each probe's length (default: 3)")
        add_run_name_arguments(parser, "train-WORKLOAD")
        parser.add_argument("--json", action="store_true", help="print every row as JSON instead of the table")

    def run(self, args: argparse.Namespace) -> int:
        from gdsbench.execution import mpi
        from gdsbench.reporting import train_report
        from gdsbench.train import predict, session

        comm = mpi.world()
        counts = parse_counts(args.accelerators) if args.accelerators else [comm.Get_size() if comm else 1]
        workload, dataset, spec, notes = open_inputs(args)
        run = session.TrainRun(workload, dataset, spec, counts, args.epochs or 1, args.steps, args.repeat, args.warm,
                               notes=notes)
        session.check_counts(run)  # before the run folder: a count that cannot run leaves nothing behind
        for line in session.cache_and_dataset_notes(run, args.allow_cached):  # kept in run.notes
            _say(f"note: {line}")
        if args.predict:
            leads, hosts = mpi.host_leaders()  # each host's first rank probes, all hosts at once
            if leads:
                run.prediction = predict.predict(workload, dataset, spec, steps=args.steps, also=counts,
                                                 probe_seconds=args.probe_seconds, progress=_say, hosts=hosts)
                run.prediction.notes = list(run.notes)
            if mpi.is_root():  # beside the JSON (whose rows have predicted_au_percent, its flags and caveats)
                print(train_report.prediction_text(run.prediction), file=sys.stderr if args.json else sys.stdout)
        saved = Saved(args.results, args.name or f"train-{workload.name}", run.info())
        show = mpi.is_root() and not args.json
        if show:
            saved.started = lambda store: print(train_report.header(run))
        on_point = (lambda row: print(train_report.point_line(row, workload), flush=True)) if show else None
        answer = lambda: train_report.verdict(run.rows, workload.name, workload.au_threshold)  # noqa: E731
        return measured(saved, lambda store: session.train(run, store, on_point), what="counts", as_json=args.json,
                        rows=lambda: session.json_rows(run), answer=answer)  # each row with the run's notes


def _say(text: str) -> None:
    """A note, said once: by rank 0 under mpirun (every rank would find the same)."""
    from gdsbench.execution import mpi

    if mpi.is_root():
        print(f"gdsbench: {text}", file=sys.stderr, flush=True)


class PredictCommand:
    name = "predict"
    help = "predict, from a short probe and a model of the pipeline, the most accelerators a dataset's storage keeps busy"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_dataset_arguments(parser)
        parser.add_argument("--steps", type=count_arg(0), default=0, metavar="S",
                            help="at most S steps per epoch, as in train")
        parser.add_argument("--also", default=None, metavar="N[,...]", help="also predict AU at these counts")
        parser.add_argument("--probe-seconds", type=seconds_arg("--probe-seconds"), default=3.0, metavar="S",
                            help="each probe's length (default: 3)")
        parser.add_argument("--json", action="store_true", help="print the prediction and every figure it used as JSON")

    def run(self, args: argparse.Namespace) -> int:
        from gdsbench.execution import mpi
        from gdsbench.reporting import train_report
        from gdsbench.train import predict, session
        from gdsbench.train.dataset import check_cache

        also = parse_counts(args.also, "--also") if args.also else None
        workload, dataset, spec, notes = open_inputs(args)
        for line in session.dataset_notes(dataset, workload, check_cache(dataset, spec, args.allow_cached)):
            note(notes, line)  # as train says them
        leads, hosts = mpi.host_leaders()  # under mpirun each host's first rank probes, all hosts at once
        if not leads:
            return 0
        result = predict.predict(workload, dataset, spec, steps=args.steps, also=also, probe_seconds=args.probe_seconds,
                                 progress=None if args.json else _say, hosts=hosts)
        result.notes = notes
        if not mpi.is_root():  # the same answer on every host: rank 0 says it
            return 0
        if args.json:
            json.dump(result.to_dict(), sys.stdout, indent=1, default=float)
            print()
        else:
            print(train_report.prediction_text(result))
        return 0
