"""Command-line flags built from the job option table (spec.JobSpec)."""

from __future__ import annotations

import argparse
from typing import Any

from ..spec import JobSpec, job_options

METAVARS = {"size": "SIZE", "duration": "TIME", "int": "N"}


def add_target_argument(parser: argparse.ArgumentParser) -> None:
    """The optional PATH of run and sweep: without it, the scratch file."""
    from ..scratch import SCRATCH_PATH

    parser.add_argument("path", metavar="PATH", nargs="?", default=None,
                        help=f"file or block device to read (default: a scratch file, {SCRATCH_PATH}, created if needed)")


def add_job_arguments(parser: argparse.ArgumentParser, *, lists: bool = False) -> None:
    """One flag per job option (PATH aside). Every default is None so only
    what the user wrote is passed on. With lists=True, sweepable options take
    comma lists (--bs 4K,64K) and boolean ones an optional list (--direct true,false)."""
    defaults = JobSpec()
    group = parser.add_argument_group("job options" + (" (comma lists make sweep dimensions)" if lists else ""))
    for name, opt in job_options().items():
        if name == "path":
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
                on = opt.flag if getattr(defaults, name) else opt.negative
                group.add_argument(opt.negative, dest=name, action="store_const", const=False, default=None,
                                   help=f"opposite of {opt.flag} (default: {on})")
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


def job_values(args: argparse.Namespace) -> dict[str, Any]:
    """The job options the user gave, as written, by user key."""
    return {opt.key: getattr(args, name) for name, opt in job_options().items() if getattr(args, name, None) is not None}


def sweep_values(args: argparse.Namespace) -> tuple[dict[str, list], dict[str, Any]]:
    """(grid, fixed): comma lists of sweepable options become dimensions."""
    grid, fixed = {}, {}
    options = {opt.key: opt for opt in job_options().values()}
    for key, value in job_values(args).items():
        if options[key].sweep and isinstance(value, str) and "," in value:
            grid[key] = [v.strip() for v in value.split(",")]
        else:
            fixed[key] = value
    return grid, fixed
