from __future__ import annotations

import argparse
import json
import sys

from gdsbench.checkpoint import JOB_OPTIONS
from gdsbench.commands.options import (
    add_job_arguments,
    add_remote_arguments,
    add_run_name_arguments,
    count_arg,
    say_translation,
    write_job_in,
)
from gdsbench.commands.pages import Saved, measured
from gdsbench.job.errors import UsageError


def scale_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: must be more than 0 and at most 1")
    return value


def read_job(spec, read_bs: str | None, read_qd: str | None, verify: bool):
    """How each file is read back: the write job, with --read-bs and --read-qd where given, checked
    as --bs and --qd are, with the blocks checked where they will be (MLPerf Storage v3.0's
    StreamingCheckpointing writes in 32 MiB transfers and reads in 128 MiB ones, four at once).
    None where neither is given."""
    from gdsbench import _native
    from gdsbench.checkpoint.moves import as_read_flags
    from gdsbench.job.spec import spec_from_values
    from gdsbench.job.units import format_size

    given = {k: v for k, v in (("bs", read_bs), ("qd", read_qd)) if v is not None}
    if not given:
        return None
    try:
        checked = spec_from_values(given, spec.replace(rw="read", verify=False)).validate()
    except UsageError as e:
        raise as_read_flags(e) from None
    if verify and checked.bs % _native.PATTERN_BLOCK:  # in checkpoint's words: it has no --verify or --offset
        raise UsageError(f"--read-bs {format_size(checked.bs)}: every block read back is checked in 4 KiB pattern "
                         "blocks, so --read-bs must be a multiple of 4K (or add --no-verify)")
    return checked.replace(rw=spec.rw, verify=spec.verify)


def yaml_dp(path: str, yaml, started: int | None) -> tuple[int, str]:
    """A YAML model's data-parallel count where its parallelism.data does not say it, and where it came
    from: DLIO's rule, the ranks started (--ranks, or mpirun's) over TP x PP; else, run alone, MLPerf's
    count for the model of the same dimensions. UsageError where none says it."""
    model = yaml.model
    if started:
        if started % (model.tp * model.pp):
            raise UsageError(f"--model {path}: {started} ranks started, not a multiple of TP x PP ({model.tp} x "
                             f"{model.pp}), as DLIO needs")
        return started // (model.tp * model.pp), f"{started} ranks started over TP x PP"
    if yaml.twin:
        return yaml.twin.dp, f"the dimensions of {yaml.twin.name}: MLPerf's {yaml.twin.ranks} ranks"
    raise UsageError(f"--model {path}: no data-parallel count (no model.parallelism.data, and not an MLPerf model's "
                     "dimensions; DLIO counts the ranks it is started with): give --dp N (ranks = TP x PP x N), "
                     "--ranks N, or start the ranks with mpirun")


class CheckpointCommand:
    name = "checkpoint"
    help = ("MLPerf Storage's checkpoint workload (v2.0, v3.0): every rank writes its share of N checkpoints of a model, "
            "each file fsync'd, then reads them back, checked; reported as MLPerf reports it")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from gdsbench.checkpoint.models import BUILT_IN

        parser.add_argument("path", metavar="DIR", help="where the checkpoints go: a directory, or s3://BUCKET/PREFIX/ "
                                                        "(global_epoch1_stepK/ folders; only folders gdsbench wrote are "
                                                        "ever replaced)")
        parser.add_argument("--model", required=True, metavar="NAME|FILE.toml|FILE.yaml",
                            help=f"{', '.join(BUILT_IN)}, a TOML file with a [model] table, or a DLIO checkpoint "
                                 "workload YAML (mlcommons/storage's llama3_8b.yaml: its model, checkpoint count, "
                                 "fsync and mode)")
        parser.add_argument("--checkpoints", type=count_arg(1, 1000), default=None, metavar="N",
                            help="checkpoints written, then each read back once (default: 10, MLPerf's, or the "
                                 "YAML's)")
        parser.add_argument("--scale", type=scale_arg, default=1.0, metavar="F",
                            help="every tensor's bytes times F, for a smaller machine (said on every row; default: 1)")
        group = parser.add_argument_group("the model's shape (as DLIO's model fields; each changes what is written)")
        for flag, what in (("layers", "transformer layers"), ("vocab", "vocabulary size"),
                           ("dp", "data-parallel ranks (ranks = TP x PP x DP)")):
            group.add_argument(f"--{flag}", type=count_arg(1, 10**7), default=None, metavar="N", help=what)
        parser.add_argument("--ranks-per-node", type=count_arg(1, 10**6), default=None, metavar="N",
                            help="reads shift by this many ranks (DLIO's checkpoint_recovery_rank_shift; default: every "
                                 "rank is on one node, so a rank reads its own files)")
        parser.add_argument("--ranks", type=count_arg(1, 10**6), default=None, metavar="N",
                            help="MLPerf's subset mode: only ranks 0..N-1 of the model's TP x PP x DP write and read "
                                 "their share, as one host of the full job (default: all; under mpirun: its ranks)")
        parser.add_argument("--no-verify", action="store_true",
                            help="do not check the blocks read back (checking is inside each rank's read time, as "
                                 "torch.load's CRC checks are)")
        parser.add_argument("--no-fsync", action="store_true",
                            help="do not fsync each file (as DLIO 2.0's code does, whatever its config says)")
        group = add_job_arguments(parser, only=JOB_OPTIONS, title="how each file is written and read")
        group.add_argument("--read-bs", metavar="SIZE", default=None,
                           help="read each file back in transfers of this size (default: --bs)")
        group.add_argument("--read-qd", metavar="N", default=None,
                           help="read each file back with this many transfers in flight (default: --qd)")
        add_remote_arguments(parser)
        parser.add_argument("--dry-run", action="store_true", help="print the files each rank would write, and stop")
        add_run_name_arguments(parser, "checkpoint-MODEL")
        parser.add_argument("--json", action="store_true", help="print every row as JSON instead of the table")

    def run(self, args: argparse.Namespace) -> int:
        import os

        from gdsbench.checkpoint import dlio_yaml as checkpoint_yaml
        from gdsbench.checkpoint import models, session
        from gdsbench.execution import mpi
        from gdsbench.job.units import format_size
        from gdsbench.reporting import checkpoint_report
        from gdsbench.train.dlio_yaml import is_yaml

        spec = write_job_in(args, "checkpoint", "checkpoints go to", "probe.pt", objects=True)
        overrides = {k: getattr(args, k) for k in ("layers", "vocab", "dp") if getattr(args, k) is not None}
        comm = mpi.world()
        started = args.ranks or (comm.Get_size() if comm is not None else None)  # None: the model's own count
        yaml = checkpoint_yaml.translate(args.model) if is_yaml(args.model) else None
        if yaml:
            if "dp" not in overrides and not yaml.model.dp:  # parallelism.data says it where given
                overrides["dp"], why = yaml_dp(args.model, yaml, None if yaml.subset else started)
                yaml.mapped.append(f"{why} -> --dp {overrides['dp']}")
            model = models.shaped(yaml.model, overrides)
            if yaml.subset and started is None:
                raise UsageError(f"--model {args.model}: checkpoint.mode subset: the ranks started are a share of the "
                                 f"model's {model.ranks}; give --ranks N (or start N with mpirun)")
        else:
            model = models.load(args.model, overrides)
        checkpoints = args.checkpoints or (yaml.checkpoints if yaml else 10)
        fsync = not args.no_fsync and (yaml.fsync if yaml else True)
        ranks = started or model.ranks
        if ranks > model.ranks:
            raise UsageError(f"--ranks {ranks}: more than the model's {model.ranks} (TP {model.tp} x PP {model.pp} x DP "
                             f"{model.dp}); raise --dp, or use fewer ranks")
        if comm is not None and comm.Get_size() != ranks:
            raise UsageError(f"--ranks {ranks}: and mpirun started {comm.Get_size()}; start {ranks} (or leave --ranks "
                             "out: the ranks mpirun starts)")
        directory = args.path.rstrip("/") if spec.path.startswith("s3://") else os.path.abspath(args.path)
        if yaml:  # said once the run's settings hold: an error stays one line
            given = {"--checkpoints": args.checkpoints, "--no-fsync": args.no_fsync or None,
                     **{f"--{k}": getattr(args, k) for k in ("layers", "vocab", "dp")}}
            say_translation(args.model, yaml.mapped, yaml.notes, kind="DLIO checkpoint workload YAML",
                            instead={flag: f"the command line's {flag}" for flag, v in given.items() if v is not None})
        run = session.CheckpointRun(model, directory, checkpoints, spec, args.scale,
                                    fsync=fsync, ranks_per_node=args.ranks_per_node or 0,
                                    subset=ranks if ranks < model.ranks else 0, verify=not args.no_verify,
                                    read_spec=read_job(spec, args.read_bs, args.read_qd, not args.no_verify))
        info = run.info()
        if args.dry_run:
            if mpi.is_root() and args.json:
                json.dump({**info, "files": [[{"name": f.name, "bytes": f.size} for f in run.files(r)]
                                             for r in range(run.ranks)]}, sys.stdout, indent=1, default=float)
                print()
            elif mpi.is_root():
                for r in range(run.ranks):
                    print(f"rank {r}: " + ", ".join(f"{f.name} ({format_size(f.size)})" for f in run.files(r)))
                print(f"{format_size(info['checkpoint_bytes'])} per checkpoint, {checkpoints} checkpoints")
            return 0
        session.check_memory(run, mpi.local_index(comm)[1] if comm is not None else run.ranks)
        with session.placed(run) as lock:
            outcome = session.Outcome()
            if getattr(lock, "taken_over", None):
                outcome.notes.append(f"took over the lock of an earlier run ({lock.taken_over})")

            def started(store) -> None:
                lock.say(store.path)
                if not args.json:
                    print(checkpoint_report.header({**info, "name": store.path}), flush=True)

            show = None if args.json or not mpi.is_root() else lambda row: print(checkpoint_report.row_line(row),
                                                                                 flush=True)
            saved = Saved(args.results, args.name or f"checkpoint-{model.name}", info, started)
            return measured(saved, lambda store: session.checkpoint(run, store, show, outcome), what="checkpoints",
                            as_json=args.json, rows=lambda: outcome.rows,
                            answer=lambda: checkpoint_report.verdict(outcome.rows), notes=lambda: outcome.notes,
                            final=lambda: {"notes": outcome.notes})
