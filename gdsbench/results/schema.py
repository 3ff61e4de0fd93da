"""The result schema: a version every record carries, and JSON Schemas for
them generated from the code (the option table, the result's own summary),
published as docs/schema/*.json by scripts/schema_doc.

SCHEMA_VERSION changes when a field's meaning changes (a unit, a rule),
not when a field is added: a reader that knows version N reads any file of
version N, ignoring fields it does not know.

    run-record   `gdsbench run --json`: the spec, the figures, and the rest
    point        one row of a run folder's points.jsonl (and its tables)
    run-info     a run folder's run.json
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gdsbench.job.result import SCHEMA_VERSION  # declared with the result it describes

DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE = "https://gdsbench.invalid/schema/"  # an identifier only: the files are docs/schema/*.json in the source

_STRINGS = {"mode", "data_path", "per_host", "warnings", "point_key"}
_BOOLEANS = {"gpu_simulated", "interrupted"}


PROVENANCE = {
    "type": "object", "required": ["gdsbench", "tools"],
    "description": "the gdsbench that made the record and the tools beside it, each as it reports itself "
                   "(gdsbench/system/provenance.py)",
    "properties": {
        "gdsbench": {"type": "object", "required": ["version", "commit", "dirty"],
                     "properties": {"version": {"type": "string"}, "commit": {"type": ["string", "null"]},
                                    "dirty": {"type": ["boolean", "null"],
                                              "description": "its sources differed from the commit"},
                                    "checkout": {"type": "string", "description": "how the commit is known, "
                                                 "where not read from a git checkout"}}},
        "tools": {"type": "object", "additionalProperties": {"type": ["string", "null"]}}}}


def _figure(name: str) -> dict:
    """A figure's type, from its name (units are in the names: _ns, _s, _bytes, _per_s, ...)."""
    if name in _STRINGS:
        return {"type": ["string", "null"]}
    if name in _BOOLEANS:
        return {"type": "boolean"}
    return {"type": ["number", "null"]}


def _option_type(option, annotation) -> dict:
    """An option's JSON type, from its declared kind and Python type."""
    text = annotation if isinstance(annotation, str) else annotation.__name__
    nullable = "None" in text
    if option.kind == "gpus":
        out: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}
    elif option.kind == "bool":
        out = {"type": ["boolean", "null"] if nullable else "boolean"}
    elif option.kind in ("choice", "path", "str"):
        out = {"type": "string"}
        if option.kind == "choice" and option.choices:
            out["enum"] = list(option.choices)
    elif option.kind in ("seconds", "number"):
        out = {"type": "number"}
    else:  # size, duration, int: whole numbers in base units (bytes, nanoseconds)
        out = {"type": ["integer", "null"] if nullable else "integer"}
    return {**out, "description": option.help}


def spec_schema() -> dict:
    from gdsbench.job.spec import OPTIONS, JobSpec

    types = {f.name: f.type for f in dataclasses.fields(JobSpec)}
    return {"type": "object", "required": [o.name for o in OPTIONS],
            "properties": {o.name: _option_type(o, types[o.name]) for o in OPTIONS}}


def summary_keys() -> list[str]:
    """The figures a result has, as its summary() names them (asked of an empty result)."""
    from gdsbench.execution.record import RunRecord
    from gdsbench.job.result import Result
    from gdsbench.job.spec import JobSpec

    return list(Result.from_run(JobSpec(path="x"), RunRecord.nothing_measured(), data_path="").summary())


def _version() -> dict:
    return {"const": SCHEMA_VERSION, "description": "the result schema's version (gdsbench/results/schema.py)"}


def run_record() -> dict:
    figures = {k: _figure(k) for k in summary_keys()}
    figures["schema_version"] = _version()
    return {"$schema": DRAFT, "$id": BASE + "run-record.json", "title": "gdsbench run --json",
            "type": "object", "required": ["spec", *figures],
            "properties": {"spec": spec_schema(), **figures,
                           "timeline": {"type": "object"}, "rounds": {"type": "object"},
                           "threads": {"type": "array"}, "per_process": {"type": "array"},
                           "per_host": {"type": "array"}, "latency_histogram": {"type": "object"},
                           "warnings": {"type": "array", "items": {"type": "string"}},
                           "environment": {"type": ["object", "null"]}, "provenance": PROVENANCE}}


def point() -> dict:
    from gdsbench.job.spec import OPTIONS, JobSpec

    types = {f.name: f.type for f in dataclasses.fields(JobSpec)}
    columns = {}
    for o in OPTIONS:
        column = _option_type(o, types[o.name])
        if o.kind == "gpus":
            column = {"type": "string", "description": o.help}  # a results column holds GPUs as text
        elif o.kind == "bool":  # a bool left to the mode (None) is a column's null
            column["type"] = ["boolean", "null"]
        columns[o.column] = column
    figures = {k: _figure(k) for k in summary_keys() if k not in columns}  # mode: the spec's, in both
    figures["schema_version"] = _version()
    own = {"point": {"type": "integer"}, "point_key": {"type": "string"}, "repeat": {"type": "integer"},
           "hist_index": {"type": "array"}, "hist_count": {"type": "array"}, "hist_m2": {"type": "number"},
           "timeline_bytes": {"type": "array"}, "warnings": {"type": "string"}}
    made_by = {"type": "string", "description": "the gdsbench that measured this row: version and commit "
                                                "(rows saved before it was recorded have none)"}
    return {"$schema": DRAFT, "$id": BASE + "point.json", "title": "a row of a run folder's points.jsonl",
            "type": "object", "required": [*own, *columns, *figures],
            "properties": {**own, **columns, **figures, "made_by": made_by}}


def run_info() -> dict:
    text = {"type": "string"}
    return {"$schema": DRAFT, "$id": BASE + "run-info.json", "title": "a run folder's run.json",
            "type": "object",
            "required": ["schema_version", "run_id", "name", "created", "gdsbench", "host", "status"],
            "properties": {"schema_version": _version(), "run_id": text, "name": text,
                           "created": {"type": "string", "format": "date-time"}, "gdsbench": text,
                           "provenance": PROVENANCE,
                           "git_revision": {"type": ["string", "null"],
                                            "description": "runs made before provenance was recorded: the commit"},
                           "host": text,
                           "status": {"enum": ["running", "complete", "interrupted", "failed"]}}}


SCHEMAS = {"run-record": run_record, "point": point, "run-info": run_info}
