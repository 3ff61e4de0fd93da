from gdsbench.cli import entry_point

entry_point()
