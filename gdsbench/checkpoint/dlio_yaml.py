"""A DLIO checkpoint workload YAML (mlcommons/storage's configs/dlio/workload/llama3_*.yaml, in the
versions of MLPerf Storage v2.0 and v3.0 read) read as `gdsbench checkpoint`'s model and settings.

Every key is accounted for, as train's YAMLs are (train/dlio_yaml.py, whose safe reader this
uses): mapped (the model's shape, the checkpoint count, fsync, subset mode), noted where it does
not change what is measured (where DLIO writes, its pause between checkpoints), or refused in one
line naming it where it would (another framework's layout, reads not equal to writes, a setting
gdsbench does not know under model or checkpoint). The names are DLIO's ConfigArguments'
(dlio_benchmark/utils/config.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gdsbench.checkpoint.models import BUILT_IN, Model
from gdsbench.job.errors import UsageError, clip, quoted
from gdsbench.train import dlio_yaml

DATATYPES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "int8": 1, "uint8": 1}  # bytes a value
# (section of model, key) -> Model field; tp, pp: DLIO's default 1
TO_MODEL = {
    (None, "num_layers"): "layers",
    ("parallelism", "tensor"): "tp", ("parallelism", "pipeline"): "pp", ("parallelism", "zero_stage"): "zero_stage",
    ("transformer", "vocab_size"): "vocab", ("transformer", "hidden_size"): "hidden",
    ("transformer", "ffn_hidden_size"): "ffn_hidden", ("transformer", "num_attention_heads"): "heads",
    ("transformer", "num_kv_heads"): "kv_heads",
}
NEEDED = ("layers", "vocab", "hidden", "ffn_hidden", "heads", "kv_heads", "zero_stage")
NOTED = {  # checkpoint.KEY -> why it changes nothing measured
    "checkpoint_folder": "where DLIO writes: the checkpoints go to DIR",
    "time_between_checkpoints": "DLIO's emulated compute before each checkpoint, outside its timed span; "
                                "gdsbench's checkpoints follow one another",
    "rank_sync": "a barrier before each rank's end (DLIO's default is none): each rank's time ends at its own "
                 "last file either way",
    "randomize_tensor": "what the tensors hold (gdsbench writes its pattern)",
    "ksm": "memory sharing of DLIO's tensors in host memory",
    "checkpoint_mechanism_classname": "DLIO's writer class",
}


FLAGS = {"layers": "--layers", "vocab": "--vocab"}  # Model fields the command line can change, as it names them


@dataclass
class Translation:
    model: Model | None = None  # its dp parallelism.data's, else 0: the ranks started say it (DLIO's rule)
    twin: Model | None = None  # the built-in model of the same dimensions, whose dp MLPerf's rank count gives
    checkpoints: int = 10
    fsync: bool = True
    subset: bool = False  # checkpoint.mode: subset (parallelism.data is the full job's DP; the ranks started a share)
    mapped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def translate(path: str) -> Translation:
    """The model and settings a DLIO checkpoint workload describes; UsageError naming the key for
    what gdsbench would measure otherwise."""
    data = dlio_yaml.read(path, "--model")
    where = f"--model {path}"
    out = Translation()
    workflow = data.get("workflow") or {}
    if workflow.get("checkpoint") is not True:
        raise UsageError(f"{where}: workflow.checkpoint is not True: not a checkpoint workload (a training one is "
                         "gdsbench train --workload's)")
    if workflow.get("train"):
        raise UsageError(f"{where}: workflow.train is True: checkpoints taken during training (gdsbench train "
                         "--workload runs the training; gdsbench checkpoint the checkpoints on their own)")
    name, values = _model(where, data.get("model"), out)
    _checkpoint(where, data.get("checkpoint") or {}, out)
    data_parallel = values.pop("data", None)
    if data_parallel is not None and not out.subset:  # some of mlcommons/storage's files carry it (8b and 70b at 1)
        out.notes.append(f"model.parallelism.data {data_parallel}: not used outside checkpoint.mode subset (DLIO run "
                         "alone refuses it there; a full run's data-parallel count is the ranks started over TP x PP, "
                         "MLPerf's for the model where none are)")
        data_parallel = None
    elif data_parallel is not None:
        out.mapped.append(f"model.parallelism.data -> --dp {data_parallel}")
    if out.subset and data_parallel is None:
        raise UsageError(f"{where}: checkpoint.mode subset: needs model.parallelism.data, the full job's data-parallel "
                         "count")
    out.model = Model(name=name, dp=data_parallel or 0, **values)
    out.twin = next((m for m in BUILT_IN.values() if replace(m, name=name, dp=0) == replace(out.model, dp=0)), None)
    for section, content in data.items():
        if section in ("model", "checkpoint", "workflow"):
            continue
        if section == "framework":
            if content != "pytorch":
                raise UsageError(f"{where}: framework {quoted(content)}: gdsbench lays out PyTorch's checkpoint files "
                                 "(DLIO's pytorch); another framework's differ")
        elif section == "storage":
            out.notes.append("storage: not emulated (where DLIO writes: DIR on the command line, a directory or "
                             "s3://BUCKET/PREFIX/)")
        else:
            out.notes.append(f"{clip(section)}: not used (not part of a checkpoint workload)")
    for key in sorted(set(workflow) - {"checkpoint", "train"}):
        if workflow[key]:
            out.notes.append(f"workflow.{clip(key)}: not emulated (gdsbench checkpoint runs the checkpoints alone)")
    return out


def _said(name: str) -> str:
    """A Model field as the mapped line names it: its flag, where the command line has one."""
    return FLAGS.get(name, name)


def _count(where: str, dotted: str, value: Any, low: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise UsageError(f"{where}: {dotted} {quoted(value)}: a whole number of at least {low}")
    return value


def _model(where: str, model: Any, out: Translation) -> tuple[str, dict[str, Any]]:
    """The model's name and its Model fields from the model section (and parallelism.data, as "data")."""
    if not isinstance(model, dict):
        raise UsageError(f"{where}: model: a mapping of the model's settings (name:, num_layers:, parallelism:, "
                         "transformer:)")
    if model.get("type", "transformer") != "transformer":
        raise UsageError(f"{where}: model.type {quoted(model['type'])}: gdsbench lays out a transformer's checkpoint "
                         "(DLIO's other models write one model_size blob)")
    values: dict[str, Any] = {"tp": 1, "pp": 1}
    for key, value in model.items():
        dotted = f"model.{clip(key)}"
        if key in ("name", "type"):
            continue
        if key in ("model_datatype", "optimizer_datatype"):
            if value not in DATATYPES:
                raise UsageError(f"{where}: {dotted} {quoted(value)}: one of {', '.join(DATATYPES)}")
            target = "model_bytes_per_value" if key == "model_datatype" else "optimizer_bytes_per_value"
            values[target] = DATATYPES[value]
            out.mapped.append(f"{dotted} -> {DATATYPES[value]} bytes a value")
        elif key in ("parallelism", "transformer"):
            if not isinstance(value, dict):
                raise UsageError(f"{where}: {dotted}: a mapping of settings")
            for inner, number in value.items():
                name = f"{dotted}.{clip(inner)}"
                if key == "parallelism" and inner == "data":
                    values["data"] = _count(where, name, number)
                elif (key, inner) in TO_MODEL:
                    low = 0 if inner == "zero_stage" else 1
                    values[TO_MODEL[key, inner]] = _count(where, name, number, low)
                    out.mapped.append(f"{name} -> {_said(TO_MODEL[key, inner])} {number}")
                else:
                    raise UsageError(f"{where}: {name}: a model setting gdsbench does not know; it would change the "
                                     "files written")
        elif (None, key) in TO_MODEL:
            values[TO_MODEL[None, key]] = _count(where, dotted, value, 0)
            out.mapped.append(f"{dotted} -> {_said(TO_MODEL[None, key])} {value}")
        else:
            raise UsageError(f"{where}: {dotted}: a model setting gdsbench does not know; it would change the files "
                             "written")
    missing = [f for f in NEEDED if f not in values]
    if missing:
        keys = {v: (f"model.{s}.{k}" if s else f"model.{k}") for (s, k), v in TO_MODEL.items()}
        raise UsageError(f"{where}: lacks {', '.join(keys[f] for f in missing)}: the files' sizes follow from them")
    return str(model.get("name") or "model"), values


def _checkpoint(where: str, section: Any, out: Translation) -> None:
    """The checkpoint section's counts, fsync and mode, into out."""
    if not isinstance(section, dict):
        raise UsageError(f"{where}: checkpoint: a mapping of settings (num_checkpoints_write:, fsync:, ...)")
    write = section.get("num_checkpoints_write", 10)
    read = section.get("num_checkpoints_read", write)
    for key, value in section.items():
        dotted = f"checkpoint.{clip(key)}"
        if key in ("num_checkpoints_write", "num_checkpoints_read"):
            _count(where, dotted, value, 0)
        elif key == "fsync":
            if not isinstance(value, bool):
                raise UsageError(f"{where}: {dotted} {quoted(value)}: True or False")
            out.fsync = value
            out.mapped.append(f"{dotted} -> --no-fsync {'off' if value else 'on'} (DLIO 2.0's code never fsyncs, 3.0's "
                              "always does, whatever this says)")
        elif key == "mode":
            if value not in ("default", "subset"):
                raise UsageError(f"{where}: {dotted} {quoted(value)}: default or subset")
            out.subset = value == "subset"
            out.mapped.append(f"{dotted} -> {value}")
        elif key == "type":
            if value != "all_ranks":
                raise UsageError(f"{where}: {dotted} {quoted(value)}: gdsbench has every rank write its share "
                                 "(DLIO's all_ranks)")
        elif key == "recovery_rank_shift":
            out.notes.append(f"{dotted}: not emulated from the file (DLIO's code reads it into a misspelled setting "
                             "and never shifts); --ranks-per-node N shifts reads")
        elif key in NOTED:
            out.notes.append(f"{dotted}: not emulated ({NOTED[key]})")
        else:
            raise UsageError(f"{where}: {dotted}: a checkpoint setting gdsbench does not know (checkpoints during "
                             "training, or a layout of DLIO's it does not emulate); it would change what is measured")
    if read != write:
        raise UsageError(f"{where}: checkpoint.num_checkpoints_read {read} and num_checkpoints_write {write}: gdsbench "
                         "reads back every checkpoint it writes; make them equal")
    if write < 1:
        raise UsageError(f"{where}: checkpoint.num_checkpoints_write 0: nothing to write; give at least 1")
    out.checkpoints = write
    out.mapped.append(f"checkpoint.num_checkpoints_write/read -> --checkpoints {write}")
