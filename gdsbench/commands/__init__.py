"""One class per subcommand, listed explicitly (memray's commands/ pattern).

Each has `name`, `help`, `add_arguments(parser)` and `run(args) -> exit code`.
Modules that pull in pandas or matplotlib are imported inside run(), so that
`gdsbench run` and `--help` start in a fraction of a second.
"""

from gdsbench.commands.checkpoint import CheckpointCommand
from gdsbench.commands.compare import CompareCommand
from gdsbench.commands.info import InfoCommand
from gdsbench.commands.kvcache import KVCacheCommand
from gdsbench.commands.objects import ObjectsCommand
from gdsbench.commands.prepare import PrepareCommand
from gdsbench.commands.report import ReportCommand
from gdsbench.commands.run import RunCommand
from gdsbench.commands.sweep import SweepCommand
from gdsbench.commands.train import PredictCommand, TrainCommand
from gdsbench.commands.validate import ValidateCommand

COMMANDS = [RunCommand, SweepCommand, ReportCommand, CompareCommand, PrepareCommand, InfoCommand, ValidateCommand, TrainCommand,
            PredictCommand, CheckpointCommand, KVCacheCommand, ObjectsCommand]
