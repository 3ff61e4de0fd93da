from __future__ import annotations

import argparse

from gdsbench.commands.options import METAVARS, add_asking_arguments, add_remote_arguments, asking_from_args, count_arg
from gdsbench.commands.workload_flags import workload_flags, workload_from_args
from gdsbench.execution.progress import progress_printer
from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size, parse_size
from gdsbench.system import object_store
from gdsbench.system.prepare import prepare
from gdsbench.system.targets import protocol_of
from gdsbench.train.dataset import SHAPE
from gdsbench.train.workloads import BUILT_IN


def writer_for(path: str, asking: dict | None = None):
    """What writes a pattern file or object at path: prepare() for a local file, an upload for
    s3:// (asking: its --timeout and --retries, options.asking_from_args), a new file through the
    engine that writes it for a server's (FTP, WebDAV, NFS, SMB)."""
    import functools

    from gdsbench.execution.served_prepare import prepare_served

    protocol = protocol_of(path)
    if protocol == "s3":
        return functools.partial(object_store.put_pattern, s3=object_store.client(asking))
    if protocol:
        return functools.partial(prepare_served, asking=asking)
    return prepare


def refuse_any_not_ours(paths: list[str], size: int, force: bool, asking: dict | None = None) -> set[str]:
    """Every file or object of several, looked at before the first is written: one gdsbench may
    not replace is refused with nothing written (not after writing the ones before it). Returns
    the files on a server found whole and kept (each was read whole to know it: not read again)."""
    from gdsbench.execution.served_prepare import kept
    from gdsbench.system.prepare import check_may_write

    if protocol_of(paths[0]) == "s3":
        s3 = object_store.client(asking)
        for path in paths:
            object_store.check_may_write(s3, path)
    elif protocol_of(paths[0]):  # a file on a server: new, or gdsbench's of this size
        return {path for path in paths if kept(path, size, force, asking)}
    else:
        for path in paths:
            check_may_write(path)
    return set()


class PrepareCommand:
    name = "prepare"
    help = ("write a test file whose every 4 KiB block carries its offset and a checksum; or, with --workload, a "
            "training dataset in the workload's shape")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="PATH", help="file to create (never an existing file gdsbench did not "
                                                         "create); with --workload, the dataset's directory")
        parser.add_argument("--size", help="file size, e.g. 4GiB (a multiple of 4K)")
        add_remote_arguments(parser)
        add_asking_arguments(parser, "an s3:// PATH", object_store.WRITING["retries"])
        parser.add_argument("--seed", type=count_arg(0, 2**64 - 1), default=None,
                            help="seed of the payload (default: 1), or with --workload of the sample sizes (default: 123)")
        parser.add_argument("--force", action="store_true", help="rewrite even if an identical gdsbench file exists")
        parser.add_argument("--files", type=count_arg(1, 10_000_000), default=None, metavar="N",
                            help="write N files PATH.0 ... PATH.N-1, one per process (for --layout per-proc); with "
                                 "--workload, the files in the dataset")
        group = parser.add_argument_group("a training dataset")
        group.add_argument("--workload", default=None, metavar="NAME|FILE.toml",
                           help=f"write the file set of a workload ({', '.join(BUILT_IN)}, or a TOML file) into the "
                                "directory PATH, with a manifest")
        group.add_argument("--dry-run", action="store_true",
                           help="with --workload: say what would be written (files, samples, total) and write nothing")
        for field, opt in workload_flags():  # all accepted, so train's flags can be repeated here
            if field != "files":  # --files is above
                shape = "" if field in SHAPE else " (not part of the dataset; accepted so train's flags can be reused)"
                group.add_argument(opt.flag, dest=field, metavar=METAVARS[opt.kind], default=None, help=opt.help + shape)

    def run(self, args: argparse.Namespace) -> int:
        asking = asking_from_args(args, protocol_of(args.path) == "s3", "an s3:// PATH", object_store.WRITING)
        if args.workload is not None:
            return self.dataset(args, asking)
        if args.dry_run:
            raise UsageError("--dry-run: only with --workload (a single file's size is what --size says)")
        if args.size is None:
            raise UsageError("--size: give the file's size, e.g. --size 1G (or --workload NAME to write a dataset)")
        size = parse_size(args.size, "--size")
        args.seed = 1 if args.seed is None else args.seed
        paths = [args.path] if args.files is None else [f"{args.path}.{i}" for i in range(args.files)]
        write = writer_for(args.path, asking)
        kept = refuse_any_not_ours(paths, size, args.force, asking) if len(paths) > 1 else set()
        for path in paths:
            if path in kept:
                print(f"kept existing {path} ({format_size(size)})")
                continue
            done = write(path, size, seed=args.seed, force=args.force, progress=progress_printer(f"writing {path}"))
            print(f"{'kept existing' if done.reused else 'wrote'} {path} ({format_size(done.size)})")
        return 0

    def dataset(self, args: argparse.Namespace, asking: dict | None) -> int:
        from gdsbench.train.dataset import plan_dataset, prepare_dataset

        if args.size is not None:
            raise UsageError("--size with --workload: a dataset's sizes come from the workload; use --record-bytes")
        if args.force:
            raise UsageError("--force with --workload: a dataset keeps the files already complete; give a new directory "
                             "to write it all again")
        workload = workload_from_args(args, prepare=True)
        plan = plan_dataset(workload, args.path, asking)
        if args.dry_run:
            print("would write " + plan.describe(), flush=True)
            return 0
        d = prepare_dataset(plan, progress=progress_printer(f"writing the {workload.name} dataset"),
                            started=lambda: print("writing " + plan.describe(), flush=True))  # not before an error
        info = d.describe()
        print(f"{args.path}: {info['files']} files, {info['samples']} samples of {format_size(info['mean_sample_bytes'])} "
              f"(sd {format_size(info['stdev_sample_bytes'])}), {format_size(info['bytes'])} in all")
        return 0
