"""The flags of a training workload (train, predict, prepare --workload),
from the workload's own table (gdsbench/train/workloads.py)."""

from __future__ import annotations

import argparse

from gdsbench.commands.options import METAVARS, say_translation
from gdsbench.job.errors import UsageError


def workload_flags():
    """(field, option) of every workload field users set with a flag, from the workload's own table."""
    from gdsbench.train.workloads import ON_COMMAND_LINE, OPTIONS

    return [(name, OPTIONS[name]) for name in ON_COMMAND_LINE]


def add_workload_arguments(parser: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> None:
    """--workload and a flag per workload field, to change a built-in or file workload."""
    from gdsbench.train.workloads import BUILT_IN

    group = parser.add_argument_group("workload (any field overrides the workload's own)")
    group.add_argument("--workload", required=True, metavar="NAME|FILE.toml|FILE.yaml",
                       help=f"a built-in workload ({', '.join(BUILT_IN)}), a TOML file describing one, or a DLIO "
                            "workload YAML (its keys mapped, and what is not emulated named)")
    for field, opt in workload_flags():
        if field not in skip:
            group.add_argument(opt.flag, dest=field, metavar=METAVARS[opt.kind], default=None, help=opt.help)


def workload_from_args(args: argparse.Namespace, prepare: bool = False):
    """The workload named by --workload, with every field given on the command line in place of its own.
    A DLIO YAML says what it mapped and what is not emulated (rank 0, once), and gives train the epochs
    it names where --epochs is not given."""
    from gdsbench.train import dlio_yaml, workloads

    if dlio_yaml.is_yaml(args.workload):
        translated = dlio_yaml.translate(args.workload, prepare=prepare)
        given = [(field, opt.flag) for field, opt in workload_flags() if getattr(args, field, None) is not None]
        given += [("--epochs", "--epochs")] if getattr(args, "epochs", None) else []
        say_translation(args.workload, translated.mapped, translated.warnings, kind="DLIO workload YAML",
                        instead={field: f"the command line's {flag}" for field, flag in given})  # mapped to fields
        args.translation_notes = [f"{args.workload}: {note}" for note in translated.warnings]  # as said, for --json
        if getattr(args, "epochs", 0) is None:
            args.epochs = translated.run.get("epochs")
        base = translated.workload
    else:
        base = workloads.load(args.workload)
    overrides = {}
    for field, opt in workload_flags():
        value = getattr(args, field, None)
        if value is not None:
            overrides[field] = workloads.parse_field(field, value, opt.flag)
    if getattr(args, "seed", None) is not None:
        overrides["seed"] = args.seed
    try:
        return workloads.with_overrides(base, overrides)
    except UsageError as e:
        if dlio_yaml.is_yaml(args.workload):  # a YAML's value out of bounds: say which file it came from
            raise UsageError(f"--workload {args.workload}: {e}") from None
        raise
