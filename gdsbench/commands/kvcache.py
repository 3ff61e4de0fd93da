from __future__ import annotations

import argparse

from gdsbench.checkpoint import JOB_OPTIONS  # KV entries, like checkpoint files, are whole objects through one engine
from gdsbench.commands.options import (
    add_job_arguments,
    add_run_name_arguments,
    count_arg,
    seconds_arg,
    size_arg,
    write_job_in,
)
from gdsbench.job.errors import UsageError, renamed_flags


class KVCacheCommand:
    name = "kvcache"
    help = ("MLPerf Storage v3.0's KV-cache offload workload: LLM inference users whose KV cache spills from host "
            "memory to storage (prefill writes each request's entry, decode reads it back), the storage tier "
            "through gdsbench's engines; reported as the reference reports it")

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from gdsbench.kvcache.models import BUILT_IN
        from gdsbench.kvcache.workload import GENERATION_S_PER_TOKEN

        parser.add_argument("path", metavar="DIR", help="where the storage tier's entries go (a folder of this run's "
                                                        "own, removed at the end)")
        parser.add_argument("--model", default="llama3.1-8b", metavar="NAME",
                            help=f"whose KV cache: {', '.join(BUILT_IN)} (default: llama3.1-8b)")
        parser.add_argument("--users", type=count_arg(1, 10_000), default=8, metavar="N",
                            help="users asking requests at once, each a thread (default: 8; MLPerf's 8B run: 150)")
        parser.add_argument("--duration", type=seconds_arg("--duration", 24 * 3600.0), default=60.0, metavar="TIME",
                            help="how long users ask (default: 60s; requests still under way then are not counted)")
        parser.add_argument("--requests", type=count_arg(1, 10**6), default=None, metavar="N",
                            help="each user asks N requests, then stops; the run ends when all have (or --duration "
                                 "is over first); the figures are over the time it took (default: no limit)")
        parser.add_argument("--host-mem", type=size_arg("--host-mem"), default=0, metavar="SIZE",
                            help="the host memory tier's budget (the reference's --cpu-mem-gb; default: 0, every "
                                 "entry goes to storage)")
        parser.add_argument("--gpu-mem", type=size_arg("--gpu-mem"), default=0, metavar="SIZE",
                            help="the GPU memory tier's budget: not built yet, 0 only")
        parser.add_argument("--storage-budget", type=size_arg("--storage-budget"), default=None, metavar="SIZE",
                            help="the storage tier's budget: past it, least recently used entries are dropped "
                                 "(default: no limit)")
        parser.add_argument("--generation-mode", choices=list(GENERATION_S_PER_TOKEN), default="realistic",
                            help="time a generated token takes: none 0, fast 2 ms, realistic 30 ms (the "
                                 "reference's; default: realistic)")
        parser.add_argument("--seed", type=count_arg(0, 2**32 - 1), default=42,
                            help="what every user's draws start from (default: 42, MLPerf's)")
        parser.add_argument("--no-multi-turn", action="store_true",
                            help="every request starts a new conversation (no previous turn read back)")
        parser.add_argument("--io-threads", type=count_arg(1, 1024), default=None, metavar="N",
                            help="storage readers and writers the users share (default: users, at most 16)")
        add_job_arguments(parser, only=JOB_OPTIONS, title="how the storage tier is read and written")
        add_run_name_arguments(parser, "kvcache-MODEL")
        parser.add_argument("--json", action="store_true", help="print the run's figures as JSON")

    def run(self, args: argparse.Namespace) -> int:
        import os

        from gdsbench.commands.pages import Saved, measured
        from gdsbench.kvcache import session
        from gdsbench.kvcache.models import model_named
        from gdsbench.kvcache.tiers import UNLIMITED
        from gdsbench.kvcache.workload import users
        from gdsbench.reporting import kvcache_report
        from gdsbench.system import gpu_path

        if args.gpu_mem:
            raise UsageError("--gpu-mem: the GPU memory tier is not built yet; leave it out (entries start in host "
                             "memory, --host-mem, then storage)")
        if args.storage_budget == 0:
            raise UsageError("--storage-budget 0: the storage tier is what is measured; give it room, or leave the "
                             "flag out (no limit)")
        model = model_named(args.model)
        try:
            write_spec = write_job_in(args, "kvcache", "the storage tier is", "probe.kv")
        except UsageError as e:  # kvcache's parallelism is its users' movers, not run's threads
            raise renamed_flags(e, {"--threads": "--io-threads"}) from None
        write_spec = write_spec.replace(fsync_end=True, runtime_ns=0)
        read_spec = write_spec.replace(rw="read", fsync_end=False)
        run = session.KVRun(model, args.users, args.duration, os.path.abspath(args.path), read_spec, write_spec,
                            host_budget=args.host_mem,
                            storage_budget=UNLIMITED if args.storage_budget is None else args.storage_budget,
                            generation=args.generation_mode, seed=args.seed, multi_turn=not args.no_multi_turn,
                            io_threads=args.io_threads or min(args.users, 16), requests=args.requests or 0)
        session.entries_fit(run, max(u.context for u in users(args.users, args.seed)))
        session.check_memory(run)
        kv = session.KVSession(run)
        data_path = (f"storage tier: {gpu_path.data_path(read_spec, None)}; {gpu_path.data_path(write_spec, None)}, "
                     "each entry a file of its own, fsync'd once written")
        info = {"kind": "kvcache", "model": model.to_dict(), "users": run.users, "duration_s": run.duration_s,
                "requests_per_user": run.requests or None, "seed": run.seed, "generation_mode": run.generation,
                "budgets_bytes": {"host": run.host_budget, "storage": args.storage_budget}, "directory": run.directory,
                "data_path": data_path}
        saved = Saved(args.results, args.name or f"kvcache-{model.name}", info)
        if not args.json:
            saved.started = lambda store: print(kvcache_report.header(run, data_path), flush=True)
        done: dict = {}

        def measure(store) -> None:
            try:
                kv.run_users()
            finally:  # what was measured is saved, whatever ended the run
                kv.close()
                done["figures"] = session.summarise(run, kv.tally, kv.cache, data_path)
                done["headline"] = session.headline(done["figures"])
                for row in session.tier_rows(done["figures"]):
                    store.append(row)

        try:
            return measured(saved, measure, what="requests", as_json=args.json, rows=lambda: done["figures"],
                            answer=lambda: kvcache_report.table(done["figures"]),
                            final=lambda: {"figures": done.get("headline", {})})
        finally:  # the run's files go, whatever happened before the users ran
            kv.close()
