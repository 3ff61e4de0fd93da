"""One class per subcommand, listed explicitly (memray's commands/ pattern).

Each has `name`, `help`, `add_arguments(parser)` and `run(args) -> exit code`.
"""

from .prepare import PrepareCommand
from .run import RunCommand

COMMANDS = [RunCommand, PrepareCommand]
