"""`gdsbench` command line: main(argv) -> exit code, testable without a subprocess."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys

from gdsbench import __version__
from gdsbench.commands import COMMANDS
from gdsbench.commands.options import s3_endpoint
from gdsbench.job.errors import EXIT_INTERRUPTED, GdsbenchError, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad input as one line (UsageError), not usage + exit."""

    usage_exit_code = UsageError.exit_code

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "-1s" and "-4K" are values (refused by their own parsers, naming the flag), not unknown flags:
        # argparse takes only bare numbers such as "-1" so, and said "--ramp: expected one argument"
        self._negative_number_matcher = re.compile(r"^-\d*\.?\d+[A-Za-z%]*$")

    def error(self, message: str) -> None:  # type: ignore[override]
        error = UsageError(message)
        error.exit_code = self.usage_exit_code  # a command may have its own (validate: 3, as gds-diag)
        raise error


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gdsbench", description="How fast can this storage put data into GPU memory?")
    parser.add_argument("--version", action="version", version=f"gdsbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command_class in COMMANDS:
        command = command_class()
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        p.usage_exit_code = getattr(command, "usage_exit_code", UsageError.exit_code)
        command.add_arguments(p)
        p.set_defaults(handler=command, command_parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    usage_code = UsageError.exit_code
    try:
        args, extra = parser.parse_known_args(argv)
        usage_code = getattr(getattr(args, "command_parser", None), "usage_exit_code", usage_code)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # as given (run --fio-job reads its own again)
        if extra:  # reported by the command's parser, so it exits with that command's usage code
            getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
        if not getattr(args, "handler", None):
            parser.print_help()
            return 2
        _ranks_agree(args)
        with s3_endpoint(args):
            return args.handler.run(args)
    except GdsbenchError as e:
        from gdsbench.execution import mpi

        code = e.exit_code
        if type(e) is UsageError and "exit_code" not in vars(e):  # the command's, not its parser's: its usage code
            code = usage_code  # (validate's bad --timeout: 3, as a bad flag)
        if mpi.world_or_none() is not None:  # one rank failing ends them all, naming itself
            mpi.abort(str(e), code)
        print(f"gdsbench: error: {e}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        print("gdsbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        sys.stdout = None  # nothing more can be written there, not even at exit
        return 0
    except RuntimeError as e:  # mpi4py's errors are RuntimeErrors: a rank lost mid-call is one line, not a traceback
        from gdsbench.execution import mpi

        code = mpi.lost_peer(e)
        if code is None:
            raise
        return code


def _ranks_agree(args: argparse.Namespace) -> None:
    """Under MPI, every rank was given the same command and arguments (mpirun's `A : B` form can
    give each its own, and their figures would be merged under rank 0's job), or UsageError."""
    from gdsbench.execution import mpi

    if mpi.world_or_none() is not None:
        mpi.agree(described_arguments(args))


def described_arguments(args: argparse.Namespace) -> dict[str, str]:
    """The command and each argument given, by flag, a job option's value in one spelling (4096
    and 4K are one size): what the ranks of one job compare. Not those the command takes per host
    (its `per_host`: validate's PATH, each host its own storage)."""
    from gdsbench.job.spec import BY_NAME

    described = {"COMMAND": args.command}
    for action in args.command_parser._actions:
        value = getattr(args, action.dest, None)
        flag = action.option_strings[0] if action.option_strings else action.metavar or action.dest
        if value is None or flag in getattr(args.handler, "per_host", ()):
            continue
        option = BY_NAME.get(action.dest)
        if option is not None and option.kind != "bool":
            value = ",".join(_one_spelling(option, part) for part in str(value).split(","))
        described[flag] = str(value)
    return described


def _one_spelling(option, text: str) -> str:
    try:
        return option.format(option.parse(text.strip()))
    except (GdsbenchError, ValueError):  # refused later, in the command's own words
        return text


def _stop_as_ctrl_c(signum, frame) -> None:
    raise KeyboardInterrupt


def entry_point() -> None:
    """The console script. SIGTERM (kill, a job scheduler's stop), SIGHUP (a closed terminal or SSH
    session) and SIGQUIT (Ctrl-\\) end a command as Ctrl-C does: what was measured is kept, files it
    made are removed, exit 130. Not under an MPI launcher, which ends the ranks with SIGTERM when one
    fails: rank 0 says why in its own handler (execution/mpi.py)."""
    from gdsbench.execution.mpi import LAUNCHER_VARIABLES
    from gdsbench.execution.processes import STOP_SIGNALS

    # Ctrl-C (and kill -INT) always stops a run, also where gdsbench was started with SIGINT
    # ignored, as a script's background job is: measured work is kept, not lost to a kill -9
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if not any(v in os.environ for v in LAUNCHER_VARIABLES):
        for sig in STOP_SIGNALS:
            if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                continue  # started under nohup: a closed session must not end it, as asked
            signal.signal(sig, _stop_as_ctrl_c)
    sys.exit(main())
