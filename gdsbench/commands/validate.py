from __future__ import annotations

import argparse
import json
import os
import sys

from gdsbench.commands.options import (
    add_asking_arguments,
    add_metrics_argument,
    add_remote_arguments,
    asking_from_args,
    output_file,
)


def url_scope() -> str:
    """The PATHs --timeout and --retries are for: every URL the native curl engine reads."""
    from gdsbench.system.targets import url_schemes

    return f"a URL PATH ({url_schemes()})"


def junit_file(text: str) -> str:
    from gdsbench.validate.output import check_junit

    return output_file(text, check_junit)


class ValidateCommand:
    name = "validate"
    help = ("install-time validation: platform, the path each mode takes, integrity and speed, each PASS, WARN, FAIL "
            "or SKIP with its evidence and a fix; exit 0 pass, 1 a FAIL, 2 not ready, 3 usage")
    usage_exit_code = 3  # gds-diag's: a bad flag or profile is 3, so 2 means only "not ready"
    per_host = ("PATH", "--metrics")  # under mpirun each host validates its own (mpirun's `A : B` may give each its own)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", nargs="?", metavar="PATH",
                            help="a file, block device or URL to read, or a directory to make a test file in "
                                 "(default: gdsbench's scratch file under results/)")
        parser.add_argument("--profile", help="thresholds: a shipped profile (default, h200-gen5-nvme, disk-tier) or a "
                                              "TOML file (default: default, which holds no absolute speeds)")
        parser.add_argument("--json", action="store_true", help="print the whole record as JSON instead of the table")
        parser.add_argument("--junit", metavar="FILE", type=junit_file,
                            help="also write one JUnit testcase per check to FILE")
        add_metrics_argument(parser, "the checks and figures (under mpirun: each host its own, at FILE on that host)")
        parser.add_argument("--baseline", metavar="RUN", help="a saved `gdsbench validate --json`: FAIL a figure worse "
                                                              "than it by more than the profile allows")
        parser.add_argument("--quick", action="store_true",
                            help="shorter measurements (the profile's quick_runtime): about a third of the time (9 s "
                                 "instead of 26 on a 2-core VM without a GPU)")
        add_remote_arguments(parser)
        add_asking_arguments(parser, url_scope(), 0)

    def run(self, args: argparse.Namespace) -> int:
        from gdsbench.execution import mpi
        from gdsbench.reporting import prom
        from gdsbench.system.targets import protocol_of
        from gdsbench.system.targets.remote_object import asking_of
        from gdsbench.validate import fleet, output, profile
        from gdsbench.validate.judge import load_baseline
        from gdsbench.validate.session import NotReady, Validation, validate

        asking = asking_from_args(args, protocol_of(args.path) is not None, url_scope(), asking_of())
        chosen = profile.load(args.profile)
        baseline = load_baseline(args.baseline) if args.baseline else None
        if args.path == "":
            raise NotReady("PATH '': give a file, block device or directory, or leave PATH out")

        def run(host: str = "") -> Validation:
            v = validate(args.path, chosen, quick=args.quick, baseline=baseline, baseline_source=args.baseline or "",
                         host=host, asking=asking)
            if args.metrics:  # this host's, where its node_exporter reads it
                problem = prom.unwritten(prom.validate_metrics(v), args.metrics)
                if problem:
                    print(f"gdsbench: error: {f'{host}: ' if host else ''}{problem}; the checks are printed below",
                          file=sys.stderr)
                    v.report_unwritten(problem)
            return v

        def run_on_host(host: str) -> Validation:  # a host not ready is that host's verdict, not the fleet's end
            try:
                return run(host)
            except NotReady as e:
                v = Validation(chosen, args.quick, options={"path": args.path})
                v.notes.append(f"not ready: {e}")
                return v

        comm = mpi.world()
        if comm is not None:  # a fleet: each host validated by its first rank, reported by rank 0
            hosts = fleet.validate_fleet(comm, run_on_host)
            code = comm.bcast(self._report(args, lambda: fleet.worst_exit(hosts), lambda: fleet.to_dict(hosts),
                                           lambda color: output.fleet_table(hosts, color),
                                           [(h.host, h.validation) for h in hosts]) if hosts else None, root=0)
            return code
        v = run()
        return self._report(args, lambda: v.exit_code, v.to_dict, lambda color: output.table(v, color),
                            [(os.uname().nodename, v)])

    def _report(self, args, exit_code, record, table, validations) -> int:
        """Write the JUnit file, then print the table (or JSON: record()) with the exit code it ends
        in (exit_code()); the exit code, or the usage code where a passing report could not be
        written (a report that could not be written is never a pass)."""
        from gdsbench.validate import output

        written = True
        if args.junit:
            try:
                output.junit_hosts(validations, args.junit)
            except OSError as e:
                problem = f"--junit {args.junit}: not written: {e.strerror or e}"
                print(f"gdsbench: error: {problem}; the checks are printed below", file=sys.stderr)
                for _, v in validations:  # the file held every host's: the table and record say so, with the exit
                    v.report_unwritten(problem)
        exit_code = exit_code()
        try:
            if args.json:
                json.dump(record(), sys.stdout, indent=1, default=str)
                print()
            else:
                from rich.console import Console

                console = Console(highlight=False, soft_wrap=True)
                text = table(console.is_terminal)
                console.print(text) if console.is_terminal else print(text)
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            print(f"gdsbench: error: {'--json' if args.json else 'the table'} could not be written to standard "
                  f"output: {e.strerror}", file=sys.stderr)
            written = False
        return exit_code if written or exit_code else self.usage_exit_code
