"""--fio-job: an fio job file's options as run's and sweep's flags (the file is read by
gdsbench/job/fio_job.py; what each option became is said once, as for a DLIO workload YAML)."""

from __future__ import annotations

import argparse

from gdsbench.commands.options import say_translation
from gdsbench.job.errors import UsageError


def add_fio_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fio-job", metavar="FILE", help="take the job's options from an fio job file (each option "
                        "said as the flag it became; flags given here win)")
    parser.add_argument("--fio-section", metavar="NAME", help="with --fio-job: which job of the file (where it has "
                                                              "several)")


def _flags_in(argv: list[str]) -> set[str]:
    """The job options' flags (their own names, not aliases) that argv gives."""
    from gdsbench.job.spec import OPTIONS

    names = {t.split("=")[0] for t in argv if t.startswith("--")}
    return {o.flag for o in OPTIONS if names & {o.flag, *o.aliases, *([o.negative] if o.negative else [])}}


def with_fio_job(args: argparse.Namespace, command: str) -> argparse.Namespace:
    """The arguments as given, or, with --fio-job, again with the job file's options read first as the
    flags they mean, so the command line's own (read after them) win; which option became which is
    said once (gdsbench/job/fio_job.py)."""
    from gdsbench.job import fio_job
    from gdsbench.job.spec import OPTIONS

    if not args.fio_job:
        if args.fio_section:
            raise UsageError("--fio-section: only with --fio-job FILE")
        return args
    job = fio_job.translate(args.fio_job, args.fio_section)
    own = args.argv[args.argv.index(command) + 1:]
    given = _flags_in(own) | ({"PATH"} if args.path is not None else set())
    instead = {flag: f"the command line's {flag}" for flag in given}
    flags = job.flags
    if "--size" in given and "--io-size" in job.flags and "--io-size" not in given:  # fio's size is both: it follows
        flags = [*job.flags, "--io-size", str(args.size)]
        instead["--io-size"] = "the command line's --size"
    say_translation(args.fio_job, job.mapped, job.notes, instead=instead)
    # switches first: sweep's take an optional value (a list to sweep), and one last would take the
    # command line's PATH after it for its value
    switches = {f for o in OPTIONS if o.kind == "bool" for f in (o.flag, o.negative) if f}
    flags = [f for f in flags if f in switches] + [f for f in flags if f not in switches]
    path = [job.path] if job.path and args.path is None else []
    again = args.command_parser.parse_args([*path, *flags, *own])
    again.fio_job = again.fio_section = None
    again.argv = args.argv
    return again
