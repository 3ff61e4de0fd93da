"""gdsbench: how fast can this storage put data into GPU memory?

    import gdsbench
    result = gdsbench.run(gdsbench.JobSpec(path="/data/test.dat", bs=1 << 20, qd=8))
    print(result.bandwidth, result.percentile(99))
"""

__version__ = "0.1.0"

from gdsbench.execution.runner import run  # noqa: E402
from gdsbench.job.errors import GdsbenchError, IoFailure, UsageError, VerifyFailure  # noqa: E402
from gdsbench.job.result import Result  # noqa: E402
from gdsbench.job.spec import JobSpec  # noqa: E402
from gdsbench.system.prepare import prepare  # noqa: E402


def __getattr__(name: str):
    # load() brings in pandas; import it on first use so `gdsbench run` starts fast.
    if name == "load":
        from gdsbench.results.store import load

        return load
    raise AttributeError(f"module 'gdsbench' has no attribute {name!r}")


__all__ = ["GdsbenchError", "IoFailure", "JobSpec", "Result", "UsageError", "VerifyFailure", "load", "prepare", "run"]
