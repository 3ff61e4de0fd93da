"""Command-line flags built from the job option table (spec.JobSpec)."""

from __future__ import annotations

import argparse
from typing import Any

from ..spec import JobSpec, job_options

METAVARS = {"size": "SIZE", "duration": "TIME", "int": "N"}


def add_job_arguments(parser: argparse.ArgumentParser, *, skip: tuple[str, ...] = ("path",)) -> None:
    """One flag per job option; every default is None so only what the user
    wrote is passed on."""
    defaults = JobSpec()
    group = parser.add_argument_group("job options")
    for name, opt in job_options().items():
        if name in skip:
            continue
        default = opt.format(getattr(defaults, name))
        if opt.kind == "bool":
            group.add_argument(opt.flag, dest=name, action="store_const", const=True, default=None, help=opt.help)
            if opt.negative:
                group.add_argument(opt.negative, dest=name, action="store_const", const=False, default=None,
                                   help=f"opposite of {opt.flag} (default: {opt.flag if getattr(defaults, name) else opt.negative})")
            continue
        group.add_argument(
            opt.flag,
            dest=name,
            default=None,
            choices=opt.choices or None,
            metavar=METAVARS.get(opt.kind),
            help=f"{opt.help} (default: {default})",
        )


def job_values(args: argparse.Namespace) -> dict[str, Any]:
    """The job options the user gave, as written, by user key."""
    return {opt.key: getattr(args, name) for name, opt in job_options().items() if getattr(args, name, None) is not None}
