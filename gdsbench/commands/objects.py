from __future__ import annotations

import argparse

from gdsbench.commands.options import (
    add_asking_arguments,
    add_remote_arguments,
    add_run_name_arguments,
    asking_from_args,
    count_arg,
    seconds_arg,
    size_arg,
)
from gdsbench.commands.pages import Saved, measured
from gdsbench.job.errors import UsageError

MAX_OBJECT = 64 << 20  # larger objects are data, not object operations: run PATH --rw write/read
BUFFERS_AT_MOST = 4 << 30  # of GET buffers in flight, over every thread of a process


def ops_arg(text: str) -> tuple[str, ...]:
    """--ops: a comma list of put, head, get, list, delete, run in that order (a set's life)."""
    from gdsbench.objects.session import OPS

    asked = [o.strip().lower() for o in text.split(",") if o.strip()]
    unknown = [o for o in asked if o not in OPS]
    if unknown or not asked:
        raise argparse.ArgumentTypeError(f"{','.join(unknown) or repr(text)}: choose from {', '.join(OPS)}")
    return tuple(o for o in OPS if o in asked)


def object_size_arg(text: str) -> int:
    """--size: a size with units, a whole number of pattern blocks, at most MAX_OBJECT."""
    value = size_arg("--size")(text)
    if value <= 0 or value % 4096 or value > MAX_OBJECT:
        raise argparse.ArgumentTypeError(f"{text}: a whole number of 4 KiB blocks (gdsbench's pattern), at most 64M")
    return value


class ObjectsCommand:
    name = "objects"
    help = ("object operations as warp measures them: PUT, HEAD, GET, LIST and DELETE of many small S3 objects "
            "gdsbench makes, each a rate with latency percentiles")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="s3://BUCKET/PREFIX/", help="where gdsbench makes its objects (obj-0000000 "
                                                                       "... and gdsbench-objects.json)")
        parser.add_argument("--ops", type=ops_arg, default=ops_arg("put,head,get,list,delete"), metavar="OP,OP",
                            help="of put, head, get, list, delete, run in that order (default: all; without put, "
                                 "the set an earlier run put is used; delete removes it)")
        parser.add_argument("--objects", type=count_arg(1, 10**8), default=1000, metavar="N",
                            help="objects in the set (default: 1000)")
        parser.add_argument("--size", type=object_size_arg, default=object_size_arg("300K"), metavar="SIZE",
                            help="each object's size (default: 300K, about an image of MLPerf Storage v3.0's object "
                                 "detection dataset)")
        parser.add_argument("--qd", type=count_arg(1, 1024), default=8, metavar="N",
                            help="requests in flight per thread (default: 8)")
        parser.add_argument("--threads", type=count_arg(1, 256), default=1, metavar="N",
                            help="threads, each with --qd in flight on its own connections (default: 1)")
        parser.add_argument("--lists", type=count_arg(1, 10**6), default=16, metavar="N",
                            help="whole listings of the prefix the list op makes, over every thread (default: 16)")
        parser.add_argument("--duration", type=seconds_arg("--duration", 86400.0), default=0.0, metavar="TIME",
                            help="head, get and list ask the set (the listings) again from the first until TIME is up, "
                                 "as warp's --duration (e.g. 30s, 5m); put and delete still go over the set once "
                                 "(default: each object once)")
        parser.add_argument("--batch", type=count_arg(1, 1000), default=1, metavar="N",
                            help="delete N objects a request (S3's DeleteObjects, as warp's delete --batch; at most "
                                 "1000, S3's limit; default: 1, a DELETE an object)")
        add_asking_arguments(parser, "the S3 server", 3)
        add_remote_arguments(parser)
        add_run_name_arguments(parser, "objects")
        parser.add_argument("--json", action="store_true", help="print every row as JSON instead of the table")

    def run(self, args: argparse.Namespace) -> int:
        from gdsbench.execution import mpi
        from gdsbench.objects import session
        from gdsbench.reporting import objects_report
        from gdsbench.results.store import keep_row
        from gdsbench.system import object_store

        prefix = session.check_prefix(args.path)
        if args.batch > 1 and "delete" not in args.ops:
            raise UsageError(f"--batch {args.batch}: deletes in batches, and --ops has no delete; add it, or leave "
                             "--batch out")
        if args.qd * args.threads * args.size > BUFFERS_AT_MOST:  # a GET lands in a buffer of its own
            raise UsageError(f"--qd {args.qd} x --threads {args.threads} x --size {args.size >> 10}K: more than "
                             f"{BUFFERS_AT_MOST >> 30} GiB of buffers for the GETs in flight; lower one of them")
        asking = asking_from_args(args, True, "the S3 server", object_store.WRITING)
        run = session.ObjectsRun(prefix, args.ops, args.objects, args.size, args.qd, args.threads, args.lists, asking,
                                 duration=args.duration, batch=args.batch)
        object_store.share_credentials()
        s3 = object_store.client(asking)
        notes: list[str] = []
        rows: list[dict] = []
        if mpi.is_root():
            if "put" in run.ops:
                note = session.make_room(s3, run)
                notes += [note] if note else []
            else:
                run = session.the_set(s3, run)
        run = mpi.broadcast(run)
        show = None if args.json or not mpi.is_root() else lambda row: print(objects_report.row_line(row), flush=True)

        def every_op(store) -> None:
            for op in run.ops:
                row = session.run_op(run, op)
                if row is None:  # an MPI rank other than 0
                    continue
                keep_row(row, rows, store, show)
                if op == "put":
                    session.put_manifest(s3, run, complete=True)
                if op == "delete":
                    object_store.delete_objects(s3, [run.prefix + session.MANIFEST])

        saved = Saved(args.results, args.name or "objects", run.info())
        if not args.json:
            saved.started = lambda store: print(session.describe(run), flush=True)
        return measured(saved, every_op, what="operations", as_json=args.json, rows=lambda: rows,
                        answer=lambda: objects_report.verdict(rows), notes=lambda: notes)
