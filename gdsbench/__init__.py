"""gdsbench: how fast can this storage put data into GPU memory?

    import gdsbench
    result = gdsbench.run(gdsbench.JobSpec(path="/data/test.dat", bs=1 << 20, qd=8))
    print(result.bandwidth, result.percentile(99))
"""

import importlib

__version__ = "0.1.0"

# The public API, each name loaded from its module on first use: `import gdsbench.job.units` (as every
# layer does for its own modules) then loads that module alone, not the runner above it, and
# `gdsbench run` does not pay for pandas (load) until it needs it.
_MODULE_OF = {
    "run": "gdsbench.execution.runner",
    "prepare": "gdsbench.system.prepare",
    "load": "gdsbench.results.store",
    "JobSpec": "gdsbench.job.spec",
    "Result": "gdsbench.job.result",
    **{name: "gdsbench.job.errors" for name in ("GdsbenchError", "IoFailure", "UsageError", "VerifyFailure")},
}


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'gdsbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    globals()[name] = value  # found once
    return value


def __dir__():
    return sorted([*globals(), *_MODULE_OF])


__all__ = sorted(_MODULE_OF)
