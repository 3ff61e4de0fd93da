"""One class per subcommand, listed explicitly (memray's commands/ pattern).

Each has `name`, `help`, `add_arguments(parser)` and `run(args) -> exit code`.
Modules that pull in pandas or matplotlib are imported inside run(), so that
`gdsbench run` and `--help` start in a fraction of a second.
"""

from .compare import CompareCommand
from .info import InfoCommand
from .prepare import PrepareCommand
from .report import ReportCommand
from .run import RunCommand
from .sweep import SweepCommand

COMMANDS = [RunCommand, SweepCommand, ReportCommand, CompareCommand, PrepareCommand, InfoCommand]
