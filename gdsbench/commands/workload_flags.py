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
    from gdsbench.train.workloads import ACCELERATOR_TYPES, BUILT_IN, own_accelerator

    group = parser.add_argument_group("workload (any field overrides the workload's own)")
    group.add_argument("--workload", required=True, metavar="NAME|FILE.toml|FILE.yaml",
                       help=f"a built-in workload ({', '.join(BUILT_IN)}), a TOML file describing one, or a DLIO "
                            "workload YAML (its keys mapped, and what is not emulated named)")
    group.add_argument("--accelerator-type", choices=ACCELERATOR_TYPES, default=None,
                       help="a built-in workload's batch and computation time on this accelerator, as MLPerf Storage's "
                            "workload files give them (default: each built-in's own: "
                            f"{', '.join(f'{name} {own_accelerator(name)}' for name in BUILT_IN)})")
    for field, opt in workload_flags():
        if field not in skip:
            group.add_argument(opt.flag, dest=field, metavar=METAVARS[opt.kind], default=None, help=opt.help)


def workload_from_args(args: argparse.Namespace, prepare: bool = False):
    """The workload named by --workload, with every field given on the command line in place of its own.
    A DLIO YAML says what it mapped and what is not emulated (rank 0, once, when the workload holds), and
    gives train the epochs it names where --epochs is not given."""
    from gdsbench.train import dlio_yaml, workloads

    given = {field: opt.flag for field, opt in workload_flags() if getattr(args, field, None) is not None}
    yaml = dlio_yaml.translate(args.workload, prepare=prepare) if dlio_yaml.is_yaml(args.workload) else None
    if yaml and not prepare and "compute_s" not in yaml.keys and "compute_s" not in given:
        raise UsageError(f"--workload {args.workload}: train.computation_time: not in the YAML, and DLIO's default, 0 s, "
                         "must be more than 0 here (AU is compute time over wall time): set it, or give --compute-time "
                         "SECONDS")
    base = yaml.workload if yaml else workloads.load(args.workload)
    kind = getattr(args, "accelerator_type", None)
    if kind and args.workload not in workloads.BUILT_IN:
        raise UsageError(f"--accelerator-type {kind}: picks a built-in workload's timing; {args.workload} names its own "
                         "(its computation_time and batch_size): leave --accelerator-type out")
    if kind:
        base = workloads.on_accelerator(base, kind)
    names = {field: key for field, key in yaml.keys.items() if field not in given} if yaml else {}  # as errors say
    overrides = {field: workloads.parse_field(field, getattr(args, field), flag) for field, flag in given.items()}
    if getattr(args, "seed", None) is not None:
        overrides["seed"] = args.seed
        names.pop("seed", None)
    try:
        workload = workloads.with_overrides(base, overrides, names)
    except UsageError as e:
        if yaml:  # a YAML's value out of bounds: say which file it came from
            raise UsageError(f"--workload {args.workload}: {e}") from None
        raise
    if yaml:  # said once the workload holds: an error stays one line
        _say_yaml(args, yaml, given)
    return workload


def _say_yaml(args: argparse.Namespace, translated, given: dict[str, str]) -> None:
    """What the YAML became, once (rank 0), with what the command line replaced; its train.epochs is
    train's number of epochs unless --epochs is given, and used by no other command (said so)."""
    mapped, notes = list(translated.mapped), list(translated.warnings)
    instead = {field: f"the command line's {flag}" for field, flag in given.items()}  # mapped to fields
    epochs = translated.run.get("epochs")
    if epochs is not None:
        line = next(m for m in mapped if m.startswith("train.epochs -> "))
        if not hasattr(args, "epochs"):  # predict, prepare: no epochs to run
            mapped.remove(line)
            notes.append(f"train.epochs: not used by {args.command} (only train runs epochs)")
        elif args.epochs is None:
            mapped[mapped.index(line)] = f"{line} (train runs {epochs} epochs; --epochs N for another number)"
            args.epochs = epochs
        else:
            instead["--epochs"] = "the command line's --epochs"
    say_translation(args.workload, mapped or ["no key gdsbench maps (DLIO's defaults throughout)"], notes,
                    kind="DLIO workload YAML", instead=instead)
    args.translation_notes = [f"{args.workload}: {note}" for note in notes]  # as said, for --json
