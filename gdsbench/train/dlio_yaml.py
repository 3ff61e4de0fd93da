"""A DLIO workload YAML (DLIO 2.0's configs/workload/*.yaml, mlcommons/storage
v2.0's configs/dlio/workload/*.yaml) read as a gdsbench workload.

Every key is accounted for, one of three ways:
  mapped    onto a workload field (or train's epochs and steps), said in one line;
  warned    not emulated, and it does not change what is measured (where the
            data lives, model facts, profiling, what DLIO does after training);
  refused   not emulated, and it would change what is measured (another file
            format or loader, evaluation reads, compressed data, no shuffle).
A key this module does not know is refused under the sections that shape the
reads (dataset, reader, train, workflow) and warned elsewhere: gdsbench says
so rather than guess.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any

from gdsbench.job import tomlfile
from gdsbench.job.declared_option import Option
from gdsbench.job.errors import UsageError, clip, quoted
from gdsbench.train import parquet
from gdsbench.train.formats import DLIO_DEFAULT, FORMATS, format_names
from gdsbench.train.workloads import OPTIONS, Workload

SHAPING = {"dataset": "num_files_train", "reader": "batch_size", "train": "epochs",
           "workflow": "train"}  # sections whose unknown keys are refused, and a key of each

# (section, key) -> workload field; both spellings DLIO has used for the record length
TO_FIELD = {
    ("dataset", "num_files_train"): "files",
    ("dataset", "num_samples_per_file"): "samples_per_file",
    ("dataset", "record_length"): "record_bytes",
    ("dataset", "record_length_bytes"): "record_bytes",
    ("dataset", "record_length_stdev"): "record_stdev",
    ("dataset", "record_length_bytes_stdev"): "record_stdev",
    ("reader", "batch_size"): "batch",
    ("reader", "read_threads"): "read_threads",
    ("reader", "prefetch_size"): "prefetch",
    ("reader", "transfer_size"): "transfer_size",
    ("train", "computation_time"): "compute_s",
    ("train", "computation_time_stdev"): "compute_stdev_s",
    ("train", "seed"): "seed",
    ("metric", "au"): "au_threshold",
}
TO_RUN = {("train", "epochs"): Option("int", "--epochs", "epochs", low=1, high=100_000, name="epochs")}  # train's own

# not emulated and not changing what is measured: why, in a few words
WARNED = {
    ("dataset", "data_folder"): "the dataset is DIR on the command line",
    ("dataset", "record_length_resize"): "a resize after the read, in memory",
    ("dataset", "record_length_bytes_resize"): "a resize after the read, in memory",
    ("dataset", "num_files_eval"): "evaluation data, read only when workflow.evaluation is on",
    ("dataset", "num_subfolders_eval"): "evaluation data, read only when workflow.evaluation is on",
    ("dataset", "eval_num_samples_per_file"): "evaluation data, read only when workflow.evaluation is on",
    ("dataset", "num_subfolders_train"): "how the files are spread over folders (gdsbench prepare lays out its own)",
    ("dataset", "file_prefix"): "file names (gdsbench prepare names its own)",
    ("dataset", "keep_files"): "whether generated files are kept",
    ("reader", "computation_threads"): "threads of the emulated compute, a sleep here",
    ("reader", "batch_size_eval"): "evaluation batches, read only when workflow.evaluation is on",
    ("reader", "shuffle_size"): "tf.data's shuffle buffer (the order of records already in memory)",
    ("reader", "dont_use_mmap"): "indexed_binary's reads (not a format gdsbench reads)",
    ("train", "seed_change_epoch"): "a new shuffle seed each epoch",
    ("train", "total_eval_steps"): "evaluation steps, run only when workflow.evaluation is on",
    ("workflow", "generate_data"): "making the dataset: gdsbench prepare --workload does",
    ("workflow", "checkpoint"): "checkpoints DLIO writes after training: gdsbench checkpoint measures them",
    ("workflow", "profiling"): "DLIO's own profilers",
    ("workflow", "debug"): "DLIO's debug output",
    ("framework", None): "the framework's name (the reader rule follows the format: "
                         + ", ".join(f"{f.name} as {f.rule}" for f in FORMATS.values()) + ")",
}
WARNED_SECTIONS = {
    "model": "facts of the model DLIO emulates; train emulates its input pipeline",
    "checkpoint": "DLIO's checkpoints: gdsbench checkpoint measures them",
    "evaluation": "evaluation settings, used only when workflow.evaluation is on",
    "profiling": "DLIO's own profilers",
    "output": "where DLIO writes its logs",
    "hydra": "DLIO's configuration framework",
}
ROUNDED = ("record_bytes", "record_stdev")  # sizes DLIO writes with a fraction
SHUFFLES = ("seed", "random")  # PyTorch's rule: samples shuffled either way; "off" (DLIO's default) reads them in order
MAX_VALUES = 10_000  # values in a workload YAML, its aliases written out (DLIO's own hold under 100)


@dataclass
class Translation:
    workload: Workload
    run: dict[str, int] = field(default_factory=dict)  # train's own settings: epochs, steps
    mapped: list[str] = field(default_factory=list)  # "dataset.num_files_train -> files 168"
    keys: dict[str, str] = field(default_factory=dict)  # workload field -> the key that set it, as errors name it
    warnings: list[str] = field(default_factory=list)  # one line per key not emulated that changes nothing measured


def is_yaml(name: str) -> bool:
    return name.lower().endswith((".yaml", ".yml"))


def read(path: str, flag: str = "--workload") -> dict:
    """The YAML document, or one UsageError naming the flag that gave it, the file and why."""
    import yaml

    where = f"{flag} {path}"
    try:
        with open(path, "rb") as f:
            text = tomlfile.decode(f.read(), where, "YAML")
    except OSError as e:
        raise UsageError(f"{where}: cannot read it ({e.strerror})") from None
    try:
        data = _load(text, where)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise UsageError(f"{where}{line}: not valid YAML ({clip(getattr(e, 'problem', None) or e)})") from None
    except RecursionError:
        raise UsageError(f"{where}: nested too deeply for a DLIO workload (a section of settings, a level or two "
                         "deep)") from None
    except ValueError:  # PyYAML's int() of a number past Python's 4,300 digits
        raise UsageError(f"{where}: a number of more than 4,300 digits; no DLIO setting is that large") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a DLIO workload is a YAML mapping (dataset:, reader:, train:, ...)")
    for section, key in SHAPING.items():
        content = data.get(section, {})
        if content is None:  # "reader:" with nothing under it
            data[section] = {}
        elif not isinstance(content, dict):
            raise UsageError(f"{where}: {section}: must be a mapping of settings ({section}: {{{key}: ...}}), "
                             f"not {quoted(content)}")
    return data


def _load(text: str, where: str) -> Any:
    """safe_load, once the document's nodes are checked (_count): PyYAML keeps the last of a key given
    twice and writes aliases out without a bound."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _count(node, where, "", {}, set())
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _count(node, where: str, key: str, counted: dict[int, int], inside: set[int]) -> int:
    """The values node holds with its aliases written out (each node counted once: a bomb of aliases costs
    its size in nodes, not its expansion); UsageError for a key given twice, an alias inside its own anchor,
    or more than MAX_VALUES values."""
    import yaml

    if id(node) in counted:
        return counted[id(node)]
    if id(node) in inside:
        raise UsageError(f"{where} line {node.start_mark.line + 1}: {clip(key or 'the document')} refers to itself "
                         "(an alias inside its own anchor): write the values out")
    inside.add(id(node))
    total = 1
    if isinstance(node, yaml.MappingNode):
        lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            scalar = isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge"
            name = key_node.value if scalar else "?"
            dotted = f"{key}.{name}" if key else name
            if scalar and name in lines:
                raise UsageError(f"{where} line {key_node.start_mark.line + 1}: {clip(dotted)} is given twice (first "
                                 f"on line {lines[name]}; YAML would keep the last without a word): keep one")
            lines[name] = key_node.start_mark.line + 1
            total += _count(key_node, where, key, counted, inside) + _count(value_node, where, dotted, counted, inside)
    elif isinstance(node, yaml.SequenceNode):
        total += sum(_count(item, where, key, counted, inside) for item in node.value)
    inside.discard(id(node))
    if total > MAX_VALUES:
        raise UsageError(f"{where}: more than {MAX_VALUES:,} values once its aliases (*name) expand; a DLIO workload "
                         "holds a few dozen settings: write them out")
    counted[id(node)] = total
    return total


def _value(option: Option, value: Any, where: str) -> Any:
    """A YAML value as the option reads it, within its bounds; UsageError naming the key (where) if not.
    A number is checked as written: finite, and in bounds before a fractional size is rounded."""
    option = dataclasses.replace(option, flag=where)
    if isinstance(value, float):
        if not (math.isfinite(value) and option.low <= value <= option.high):
            raise UsageError(f"{where} {value:g}: {'must be' if math.isfinite(value) else 'not a finite number; give'} "
                             f"a number between {option.format(option.low)} and {option.format(option.high)}")
        if option.name in ROUNDED:
            value = round(value)  # DLIO's record_length may be fractional (resnet50's 114660.07)
    value = option.convert(value)
    option.check(value)
    return value


def _refuse(path: str, key: str, why: str) -> UsageError:
    return UsageError(f"--workload {path}: {key}: {why}; gdsbench does not emulate it, and it changes what is measured")


def translate(path: str, prepare: bool = False) -> Translation:
    """The workload a DLIO YAML describes, what was mapped, and what was not emulated (warned);
    UsageError, naming the key, for what would change the measurement. prepare: the dataset is
    to be made (a data generation YAML, workflow.generate_data, is what it is for)."""
    data = read(path)
    workflow = data.get("workflow") or {}
    if prepare and workflow.get("train", True) is False and workflow.get("generate_data"):
        workflow = dict(workflow, train=True)  # the same dataset a training YAML reads
    if workflow.get("train", True) is False:
        what = "a checkpoint workload: use gdsbench checkpoint DIR --model FILE.yaml" if workflow.get("checkpoint") else \
            "nothing to train (a data generation workload: use gdsbench prepare --workload)"
        raise UsageError(f"--workload {path}: workflow.train is False: {what}")
    for key in ("evaluation", "do_eval"):
        if workflow.get(key):
            raise _refuse(path, f"workflow.{key}", "evaluation reads another dataset between epochs")
    dataset, reader = data.get("dataset") or {}, data.get("reader") or {}
    fmt = dataset.get("format", DLIO_DEFAULT.name)
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise _refuse(path, "dataset.format", f"{quoted(fmt)} (gdsbench reads {format_names()})")
    if dataset.get("compression", "none") not in ("none", None):
        raise _refuse(path, "dataset.compression", f"{quoted(dataset['compression'])}: compressed samples read and inflated")
    if not prepare:  # how the dataset is read: not a question for making it
        _check_reader(path, fmt, reader, data)
    model = data.get("model")
    name = (model.get("name") if isinstance(model, dict) else model) or os.path.splitext(os.path.basename(path))[0]
    out = Translation(workload=Workload(name=str(name), format=fmt, **_defaults(fmt)))
    values: dict[str, Any] = {}
    for section, content in data.items():
        items = content.items() if isinstance(content, dict) else [(None, content)]
        for key, value in items:
            dotted = clip(section if key is None else f"{section}.{key}")
            if (section, key) in TO_FIELD:
                target = TO_FIELD[section, key]
                values[target] = _value(OPTIONS[target], value, f"--workload {path}: {dotted}")
                out.mapped.append(f"{dotted} -> {target} {values[target]}")
                out.keys[target] = dotted
            elif (section, key) in TO_RUN:
                option = TO_RUN[section, key]
                out.run[option.name] = _value(option, value, f"--workload {path}: {dotted}")
                out.mapped.append(f"{dotted} -> {option.flag} {out.run[option.name]}")
            elif (section, key) in WARNED:
                out.warnings.append(f"{dotted}: not emulated ({WARNED[section, key]})")
            elif section in WARNED_SECTIONS:
                out.warnings.append(f"{dotted}: not emulated ({WARNED_SECTIONS[section]})")
            elif (section, key) in NESTED:
                NESTED[section, key](path, value, values, out)
            elif FORMATS[fmt].row_groups and (section, key) in (("reader", "file_shuffle"), ("reader", "sample_shuffle"),
                                                                ("reader", "prefetch_size")):
                out.warnings.append(f"{dotted}: not emulated (v3.0 DLIO's parquet reader deals each loader worker every "
                                    "R-th file in name order and holds PyTorch's default 2 batches a worker ahead)")
            elif FORMATS[fmt].streams and (section, key) in (("reader", "file_shuffle"), ("reader", "sample_shuffle")):
                out.warnings.append(f"{dotted}: not emulated (tf.data's rule here reads each rank's files whole in "
                                    "name order; a shuffle changes which file comes when, or the order of records "
                                    "in memory, not what is read)")
            elif (section, key) in (("dataset", "format"), ("reader", "data_loader"), ("dataset", "compression"),
                                    ("reader", "file_shuffle"), ("reader", "sample_shuffle"),
                                    ("reader", "read_type"), ("workflow", "train"), ("workflow", "evaluation"),
                                    ("workflow", "do_eval"), ("train", "total_training_steps"), ("metric", None)):
                continue  # checked above: emulated as they say
            elif section in SHAPING:
                raise _refuse(path, dotted, "a setting gdsbench does not know")
            else:
                out.warnings.append(f"{dotted}: not emulated (gdsbench does not know it; it is outside the sections "
                                    "that shape the reads)")
    if prepare and "compute_s" not in values:  # a data generation YAML has no training settings: none are needed
        values["compute_s"] = 1.0
    # checked with the command line's values in place (workload_flags.workload_from_args)
    out.workload = Workload(**{**{f.name: getattr(out.workload, f.name) for f in fields(Workload)}, **values,
                               "about": f"from {os.path.basename(path)} (DLIO workload YAML)"})
    return out


def _parquet_section(path: str, section: Any, values: dict[str, Any], out: Translation) -> None:
    """dataset.parquet: the columns and row-group size map; what only changes how DLIO generates is
    warned; a partitioned layout is refused."""
    where = f"--workload {path}: dataset.parquet"
    if not isinstance(section, dict):
        raise UsageError(f"{where}: must be a mapping (columns: [...], row_group_size: N)")
    for key, value in section.items():
        dotted = f"dataset.parquet.{clip(key)}"
        if key == "columns":
            values["columns"] = parquet.columns_from_yaml(value, f"--workload {path}: {dotted}")
            out.mapped.append(f"{dotted} -> {len(values['columns'])} columns, "
                              f"{parquet.row_bytes(values['columns']):,} bytes a row")
        elif key == "row_group_size":
            values["row_group"] = _value(OPTIONS["row_group"], value, f"--workload {path}: {dotted}")
            out.mapped.append(f"{dotted} -> row_group {values['row_group']}")
            out.keys["row_group"] = dotted
        elif key in ("generation_batch_size", "use_s3dlio_gen"):
            out.warnings.append(f"{dotted}: not emulated (how DLIO's generator batches its writes)")
        elif key == "read_mode" and value == "row_group":
            out.warnings.append(f"{dotted}: not read by v3.0's DLIO at cbe2001 (it reads by row group anyway)")
        else:
            raise _refuse(path, dotted, "a parquet setting gdsbench does not emulate (a partitioned layout, another "
                          "read mode)")
    if any(isinstance(column, dict) and "read" in column for column in section.get("columns") or []):
        out.warnings.append("dataset.parquet.columns: the per-column read: flags are not read by v3.0's DLIO at "
                            "cbe2001 (only storage.storage_options.columns selects); every column is read")


def _storage_options(path: str, options: Any, values: dict[str, Any], out: Translation) -> None:
    """storage.storage_options: the columns a parquet reader reads map; its read-ahead window must be
    the one emulated; the rest (an object store's library and credentials) is warned."""
    if not isinstance(options, dict):
        raise UsageError(f"--workload {path}: storage.storage_options: must be a mapping")
    for key, value in options.items():
        dotted = f"storage.storage_options.{clip(key)}"
        if key == "columns" and value:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UsageError(f"--workload {path}: {dotted}: a list of column names")
            values["read_columns"] = tuple(value)
            out.mapped.append(f"{dotted} -> reads {len(value)} columns")
        elif key in ("prefetch_window", "prefetch_workers") and value != parquet.WINDOW:
            raise _refuse(path, dotted, f"{quoted(value)}: gdsbench emulates v3.0 DLIO's default of {parquet.WINDOW}")
        else:
            out.warnings.append(f"{dotted}: not emulated (how DLIO reaches its storage)")


NESTED = {("dataset", "parquet"): _parquet_section,  # keys holding settings of their own: each mapped by its reader
          ("storage", "storage_options"): _storage_options}


def _defaults(fmt: str) -> dict[str, Any]:
    """DLIO's own defaults where a YAML leaves a field out (its ConfigArguments), and
    gdsbench's transfer size for the format (train/formats.py)."""
    return {"files": 8, "samples_per_file": 1, "record_bytes": 65536, "record_stdev": 0, "batch": 1, "read_threads": 1,
            "prefetch": 2, "transfer_size": FORMATS[fmt].transfer_size, "compute_s": 0.0, "compute_stdev_s": 0.0,
            "au_threshold": 0.90, "seed": 123}


def _check_reader(path: str, fmt: str, reader: dict, data: dict) -> None:
    """UsageError for a way of reading that gdsbench does not emulate and that changes what is measured."""
    emulated = FORMATS[fmt].loader
    loader = reader.get("data_loader", emulated)
    if loader != emulated:
        raise _refuse(path, "reader.data_loader", f"{quoted(loader)} for {fmt} (gdsbench emulates {emulated}'s rules "
                                                  f"for {fmt})")
    dealt = not FORMATS[fmt].streams and not FORMATS[fmt].row_groups  # PyTorch's sampler deals the samples
    if dealt and reader.get("sample_shuffle", "off") not in SHUFFLES:  # DLIO's default is off
        raise _refuse(path, "reader.sample_shuffle", f"{quoted(reader.get('sample_shuffle', 'off'))}"
                      f"{'' if 'sample_shuffle' in reader else ' (DLIO default)'}: samples read in order, where "
                      "gdsbench deals them shuffled as PyTorch's sampler does")
    total_steps = (data.get("train") or {}).get("total_training_steps", -1)
    if not isinstance(total_steps, (int, float)) or math.isnan(total_steps):
        raise UsageError(f"--workload {path}: train.total_training_steps {quoted(total_steps)}: not a number")
    if total_steps > 0:
        raise _refuse(path, "train.total_training_steps", "a cap on steps counted over the whole run (gdsbench's "
                      "--steps caps each epoch: give it instead)")
    if reader.get("read_type", "on_demand") != "on_demand":
        raise _refuse(path, "reader.read_type", f"{quoted(reader['read_type'])}: the dataset read once into memory")
