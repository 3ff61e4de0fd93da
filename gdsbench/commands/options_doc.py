"""docs/options.md, generated from the option tables (job and workload), as
`fio --cmdhelp` prints fio's; scripts/options_doc writes it, a test compares."""

from __future__ import annotations

from gdsbench.job.spec import OPTIONS, JobSpec

KIND_UNITS = {"size": "size (4K, 1M, 1GiB)", "duration": "time (500ms, 10s)", "int": "number", "bool": "flag",
              "choice": "choice", "str": "text", "path": "path", "gpus": "GPU list (0 or 0,1)",
              "seconds": "time (112ms, 0.5)", "number": "number (0.9)"}


def _allowed(opt) -> str:
    if opt.low is not None:
        return f">= {opt.format(opt.low)}" if opt.high is None else f"{opt.format(opt.low)} to {opt.format(opt.high)}"
    return ", ".join(opt.choices) if opt.choices else ""


def options_markdown() -> str:
    """docs/options.md: every job option, from the option table (as `fio --cmdhelp` prints fio's)."""
    defaults = JobSpec()
    lines = ["# Job options", "",
             "Generated from the option table in `gdsbench/job/spec.py` by `scripts/options_doc`; a test fails when",
             "the two disagree. Every option is a flag of `gdsbench run` and `gdsbench sweep`, a key of sweep files",
             "(`key`), and a column of results (`column`, in base units: bytes, nanoseconds).", "",
             "| flag | key | column | value | default | allowed | sweep | what it does |", "|---|---|---|---|---|---|---|---|"]
    for opt in OPTIONS:
        flags = " / ".join(f"`{f}`" for f in (opt.flag, *opt.aliases, *([opt.negative] if opt.negative else [])))
        default = opt.format(getattr(defaults, opt.name)) if opt.name != "path" else "a scratch file"
        help_text = opt.help.replace("|", "\\|")
        lines.append(f"| {flags} | `{opt.key}` | `{opt.column}` | {KIND_UNITS[opt.kind]} | {default} | {_allowed(opt)} | "
                     f"{'yes' if opt.sweep else 'no'} | {help_text} |")
    lines += ["", "## Training workload fields", "",
              "The fields of a training workload (`gdsbench train`, `predict`, `prepare --workload`), from the",
              "`Workload` table in `gdsbench/train/workloads.py`: each is a key of workload TOML files and, but",
              "`seed`, a flag that overrides the workload's own value (`--seed` is train's and prepare's own flag).", "",
              "| flag | key | value | allowed | what it does |", "|---|---|---|---|---|"]
    from gdsbench.train.workloads import OPTIONS as WORKLOAD_OPTIONS

    for name, opt in WORKLOAD_OPTIONS.items():
        lines.append(f"| `{opt.flag}` | `{name}` | {KIND_UNITS[opt.kind]} | {_allowed(opt)} | {opt.help} |")
    return "\n".join(lines) + "\n"
