"""Command-line flags built from the job option table (spec.JobSpec); the
workload's flags are in workload_flags.py, docs/options.md in options_doc.py."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from gdsbench.job.errors import UsageError
from gdsbench.job.spec import BY_KEY, OPTIONS, JobSpec

METAVARS = {"size": "SIZE", "duration": "TIME", "int": "N", "seconds": "TIME", "number": "NUMBER"}
NEGATIVE = "__negative"  # dest suffix of a bool option's negative flag (--buffered)


def add_target_argument(parser: argparse.ArgumentParser) -> None:
    """The optional PATH of run and sweep: without it, the scratch file."""
    from gdsbench.execution.scratch import SCRATCH_PATH

    parser.add_argument("path", metavar="PATH", nargs="?", default=None,
                        help=f"{BY_KEY['path'].help} (default: a scratch file, {SCRATCH_PATH}, created if needed)")


S3_ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL_S3"  # what the AWS tools, boto3 and gdsbench's curl engine read first


def add_remote_arguments(parser: argparse.ArgumentParser) -> None:
    """What s3:// targets need beside the AWS environment, for the commands that read or write them."""
    parser.add_argument("--s3-endpoint", metavar="URL", default=None,
                        help="the S3 server for s3:// targets, e.g. http://127.0.0.1:9000, addressed path-style (as "
                             "aws --endpoint-url; default: $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS)")


def add_asking_arguments(parser: argparse.ArgumentParser, scope: str, default_retries: int) -> None:
    """--timeout and --retries of a command that asks a server outside a job (prepare, validate,
    info), as run's curl options ask it; scope: the PATHs they are for."""
    parser.add_argument("--timeout", metavar="TIME", default=None,
                        help=f"{scope} only: how long a request may wait for the server before the command fails "
                             "naming it (default: 30s; 0: no limit)")
    parser.add_argument("--retries", metavar="N", default=None,
                        help=f"{scope} only: try a request again this many times after a timeout, a dropped "
                             f"connection, HTTP 429 or 5xx (default: {default_retries})")


def asking_from_args(args: argparse.Namespace, remote: bool, scope: str, defaults: dict[str, int]) -> dict | None:
    """How a remote PATH's server is asked (remote_object.asking_of's form): --timeout and
    --retries as given, parsed as run parses them, defaults for those not given; None where PATH
    is not remote (remote False), which refuses them."""
    from gdsbench.job.spec import BY_NAME

    given = {name: BY_NAME[name].parse(value) for name, value in (("timeout_ns", args.timeout),
                                                                   ("retries", args.retries)) if value is not None}
    if not remote:
        if given:
            flag = "--timeout" if "timeout_ns" in given else "--retries"
            raise UsageError(f"{flag}: only for {scope} (how its server is asked); drop it for a local file")
        return None
    return {**defaults, **given}


@contextlib.contextmanager
def s3_endpoint(args: argparse.Namespace):
    """--s3-endpoint as the environment variable every S3 client here reads, for this command
    (and the processes it starts); as it was before, after."""
    value = getattr(args, "s3_endpoint", None)
    if value is None:
        yield
        return
    if not value.startswith(("http://", "https://")) or len(value.split("://", 1)[1].strip("/")) == 0:
        raise UsageError(f"--s3-endpoint {value}: give the server's URL, e.g. http://127.0.0.1:9000")
    before = os.environ.get(S3_ENDPOINT_VARIABLE)
    os.environ[S3_ENDPOINT_VARIABLE] = value.rstrip("/")
    try:
        yield
    finally:
        if before is None:
            del os.environ[S3_ENDPOINT_VARIABLE]
        else:
            os.environ[S3_ENDPOINT_VARIABLE] = before


def add_job_arguments(parser: argparse.ArgumentParser, *, lists: bool = False, only: tuple[str, ...] = (),
                      title: str = "job options") -> argparse._ArgumentGroup:
    """One flag per job option (PATH aside; only those named, if `only`), in a group of its own,
    returned (a command adds its own flags beside them). Every default is None so only what the
    user wrote is passed on. With lists=True, sweepable options take comma lists (--bs 4K,64K) and
    boolean ones an optional list (--direct true,false)."""
    defaults = JobSpec()
    group = parser.add_argument_group(title + (" (comma lists make sweep dimensions)" if lists else ""))
    for opt in OPTIONS:
        name = opt.name
        if name == "path" or (only and name not in only):
            continue
        default = opt.format(getattr(defaults, name))
        listable = lists and opt.sweep
        if opt.kind == "bool":
            if listable:
                group.add_argument(opt.flag, dest=name, nargs="?", const="true", default=None, metavar="true,false",
                                   help=opt.help)
            else:
                group.add_argument(opt.flag, dest=name, action="store_const", const=True, default=None, help=opt.help)
            if opt.negative:
                default_value = getattr(defaults, name)
                on = "by mode" if default_value is None else opt.flag if default_value else opt.negative
                # its own dest: --direct --buffered together is refused, not settled by whichever came last
                group.add_argument(opt.negative, dest=f"{name}{NEGATIVE}", action="store_const", const=False,
                                   default=None, help=f"opposite of {opt.flag} (default: {on})")
            continue
        metavar = METAVARS.get(opt.kind)
        group.add_argument(
            opt.flag,
            *opt.aliases,
            dest=name,
            default=None,
            choices=None if listable else (opt.choices or None),
            metavar=(f"{metavar or 'V'}[,...]" if listable else metavar),
            help=f"{opt.help} (default: {default}"
            + (f"; one of {', '.join(opt.choices)}" if listable and opt.choices else "") + ")",
        )
    return group


def job_values(args: argparse.Namespace) -> dict[str, Any]:
    """The job options the user gave, as written, by user key."""
    values = {}
    for opt in OPTIONS:
        value, negated = getattr(args, opt.name, None), getattr(args, f"{opt.name}{NEGATIVE}", None)
        if value is not None and negated is not None:
            raise UsageError(f"{opt.flag} and {opt.negative}: they contradict each other; give one")
        if negated is not None:
            value = negated
        if value is not None:
            values[opt.key] = value
    return values


def sweep_values(args: argparse.Namespace) -> tuple[dict[str, list], dict[str, Any]]:
    """(grid, fixed): comma lists of sweepable options become dimensions."""
    grid, fixed = {}, {}
    for key, value in job_values(args).items():
        if BY_KEY[key].sweep and isinstance(value, str) and "," in value:
            grid[key] = [v.strip() for v in value.split(",")]
        else:
            fixed[key] = value
    return grid, fixed


def write_job_in(args: argparse.Namespace, command: str, goes: str, probe: str, objects: bool = False) -> JobSpec:
    """The write job of a command that makes its own files in DIR (checkpoint, kvcache): DIR a local
    or mounted directory (or, where the command writes `objects`, an s3:// prefix), the job options
    given resolved as run resolves them (runnable_here), O_DIRECT where the mode asks it (never for
    objects), an engine that opens files. `goes`: what goes to DIR, in a sentence ("checkpoints go
    to"); `probe`: a file name in DIR the job is checked against."""
    from gdsbench.execution.runner import runnable_here
    from gdsbench.job.spec import spec_from_values
    from gdsbench.system.targets import protocol_of

    values = dict(job_values(args), rw="write")
    protocol = protocol_of(args.path)
    to_s3 = objects and protocol == "s3"
    if protocol is not None and not to_s3:
        where = "a local or mounted directory, or an s3:// prefix" if objects else "a local or mounted directory"
        raise UsageError(f"DIR {args.path}: {goes} {where}; {protocol} objects are not written by {command} yet")
    if to_s3:
        if values.get("direct"):
            raise UsageError("--direct: an S3 object is not in this host's page cache, so there is no O_DIRECT to "
                             "ask; leave --direct out")
        values = {"bs": S3_PART_SIZE, **values}  # (O_DIRECT: the curl engine has none, so none is asked)
    base = JobSpec(path=f"{args.path.rstrip('/')}/{probe}" if to_s3 else os.path.join(os.path.abspath(args.path), probe))
    spec = runnable_here(spec_from_values(values, base))
    if not spec.opens_target:
        raise UsageError(f"--engine {spec.engine}: opens no file and moves no bytes, so {command} would time no "
                         "storage; use psync or io_uring (or leave --engine out)")
    return spec.replace(direct=spec.uses_o_direct)


S3_PART_SIZE = "8M"  # --bs for objects where none is given: s3torchconnector's part size


def count_arg(low: int, high: int = 10**9):
    """An argparse type: a whole number from low to high (argparse's line names the flag)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value}: must be between {low} and {high}")
        return value
    return parse


def size_arg(flag: str):
    """An argparse type: a size with units ("0", "2G", "512M"), 0 allowed."""
    from gdsbench.job.units import parse_size

    def parse(text: str) -> int:
        try:
            return parse_size(text, flag)
        except UsageError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(f"{flag} ")) from None
    return parse


def seconds_arg(flag: str, high_s: float = 3600.0):
    """An argparse type: a duration more than 0 and at most high_s ("3", "3s", "500ms"), in
    seconds; nan, inf and the rest are refused in one line naming the flag."""
    from gdsbench.job.units import parse_duration

    def parse(text: str) -> float:
        try:
            seconds = parse_duration(text, flag) / 1e9
        except UsageError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(f"{flag} ")) from None
        if not 0 < seconds <= high_s:
            raise argparse.ArgumentTypeError(f"{text}: must be more than 0 and at most {high_s:g} s")
        return seconds
    return parse


def add_results_argument(parser: argparse.ArgumentParser) -> None:
    """--results DIR: where runs are saved (and where report and compare look for them)."""
    parser.add_argument("--results", default="results", metavar="DIR", help="where runs are saved (default: results)")


def add_run_name_arguments(parser: argparse.ArgumentParser, default_name: str) -> None:
    """--name and --results of a command that saves a run."""
    parser.add_argument("--name", default=None, help=f"run name (default: {default_name})")
    add_results_argument(parser)


def add_metrics_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """--metrics FILE.prom (gdsbench/reporting/prom.py): a name the textfile collector reads, and a
    file gdsbench may write, checked as parsed."""
    def prom_file(text: str) -> str:
        from gdsbench.reporting import prom

        if not text.endswith(".prom"):
            raise argparse.ArgumentTypeError(f"{text}: node_exporter's textfile collector reads only *.prom files; "
                                             "name it so")
        return output_file(text, prom.check)

    parser.add_argument("--metrics", type=prom_file, metavar="FILE.prom",
                        help=f"also write {what} as gauges for node_exporter's textfile collector")


def output_file(path: str, check) -> str:
    """An argparse type's end for a report file (--metrics, --junit): check(path, error) before anything
    runs, so a measurement is never lost to where it cannot go. Under mpirun rank 0 alone checks (and
    writes), so ranks do not race for the probe file."""
    from gdsbench.execution import mpi

    if mpi.is_root():
        check(path, argparse.ArgumentTypeError)
    return path


def say_translation(source: str, mapped: list[str], notes: list[str], kind: str = "",
                    instead: dict[str, str] | None = None) -> None:
    """Once (rank 0 under mpirun): what each option of another tool's file became here, in one line,
    then a line per option not emulated (an fio job file, a DLIO workload YAML). instead: for a flag
    the command line gave, what replaced the file's value ("the command line's --qd")."""
    from gdsbench.execution import mpi

    if not mpi.is_root():
        return
    instead = instead or {}

    def said(line: str) -> str:  # "iodepth=4 -> --qd 4", and what replaced it
        flag = line.split(" -> ")[1].split()[0] if " -> " in line else ""
        return f"{line} ({instead[flag]} instead)" if flag in instead else line

    print(f"gdsbench: {source}{f' ({kind})' if kind else ''}: " + "; ".join(map(said, mapped)), file=sys.stderr)
    for note in notes:
        print(f"gdsbench: note: {source}: {note}", file=sys.stderr)
