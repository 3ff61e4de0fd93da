"""An fio job file as `gdsbench run` flags (`run --fio-job FILE [--fio-section NAME]`).

Each fio option of the job (its section, over [global]) becomes the gdsbench
flag that means the same, and the run says which became which. An option
gdsbench does not have is refused in one line naming it, unless it cannot
change what is measured (names, reporting, logs), which is noted. Flags given
on the command line still win: they are read after the file's.
"""

from __future__ import annotations

import configparser
import dataclasses
import io
import os
import re

from gdsbench.job import tomlfile
from gdsbench.job.errors import UsageError, clip
from gdsbench.job.spec import ENGINE_INFO, OPTIONS

ENGINES = {"io_uring": "io_uring", "psync": "psync", "sync": "psync", "pvsync": "psync", "pvsync2": "psync",
           "vsync": "psync", "null": "null", "libaio": "io_uring"}
ENGINE_NOTES = {"libaio": "libaio -> io_uring: gdsbench's asynchronous engine, at the same queue depth (another kernel "
                          "interface)",
                "sync": "sync -> psync: pread/pwrite at an offset, where sync seeks then reads",
                "vsync": "vsync -> psync: one buffer per call", "pvsync": "pvsync -> psync: one buffer per call",
                "pvsync2": "pvsync2 -> psync: one buffer per call; of its per-call flags, uncached=1's "
                           "RWF_DONTCACHE only"}
DIRECTIONS = ("read", "write", "randread", "randwrite")
# options gdsbench maps that fio refuses without a value ("Option direct requires an argument"), its 0/1 ones too
VALUED = ("rw", "readwrite", "bs", "blocksize", "iodepth", "numjobs", "ioengine", "runtime", "ramp_time", "size",
          "io_size", "offset", "filename", "directory", "fsync", "direct", "buffered", "end_fsync", "fadvise_hint")
# options that change nothing measured: why, in a few words
NOTED = {
    "name": "the job's name", "description": "a description", "group_reporting": "how fio groups its report",
    "stonewall": "fio's order between jobs (one job runs here)", "wait_for_previous": "fio's order between jobs",
    "thread": "fio's clones as threads, not processes", "per_job_logs": "fio's logs",
    "write_bw_log": "fio's logs", "write_lat_log": "fio's logs", "write_iops_log": "fio's logs",
    "write_hist_log": "fio's logs", "log_avg_msec": "fio's logs", "log_hist_msec": "fio's logs",
    "percentile_list": "which percentiles fio prints (gdsbench prints its own)", "lat_percentiles": "fio's report",
    "clat_percentiles": "fio's report", "slat_percentiles": "fio's report", "disable_lat": "fio's report",
    "disable_clat": "fio's report", "disable_slat": "fio's report", "disable_bw_measurement": "fio's report",
    "randrepeat": "fio's random seed", "randseed": "fio's random seed", "allrandrepeat": "fio's random seed",
    "create_on_open": "when fio creates files (gdsbench never creates one in run)", "unlink": "fio removes its files",
    "new_group": "how fio groups its report", "kb_base": "fio's units",
    "unit_base": "fio's units", "clocksource": "fio's clock", "gtod_reduce": "fio's timing overhead",
    "norandommap": "fio's map of blocks already read (gdsbench's random order is a permutation of each pass: "
                   "no block repeats within a pass, so there is no map to keep)",
}
# fio's engine options by their names (io_uring's; uncached is pvsync2's too): those set by being there (or =1),
# and those with a value
ENGINE_SWITCHES = {"fixedbufs": "--fixedbufs", "registerfiles": "--registerfiles", "sqthread_poll": "--sqthread-poll",
                   "hipri": "--hipri", "uncached": "--uncached"}
ENGINE_VALUES = {"sqthread_poll_cpu": "--sqthread-poll-cpu", "iodepth_batch_submit": "--submit-batch",
                 "iodepth_batch": "--submit-batch", "iodepth_batch_complete_min": "--complete-batch",
                 "iodepth_batch_complete": "--complete-batch"}
MAPPED = (*VALUED, *ENGINE_VALUES, "verify", "time_based")  # options whose value gdsbench uses
VERIFY_OFF = {"0": "fio's 0 is off", "null": "fio's null only pretends to verify"}
INCLUDE = re.compile(r"include\s+\S.*")  # fio's "include FILE" line
VARIABLE = re.compile(r"(\$\{([^}]*)\})")  # fio's ${VAR}: the environment's VAR
KEYWORDS = {  # fio's keywords for this system's values (fio's init.c)
    "$ncpus": lambda: os.sysconf("SC_NPROCESSORS_ONLN"),
    "$pagesize": lambda: os.sysconf("SC_PAGE_SIZE"),
    "$mb_memory": lambda: os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20,
}
KEYWORD = re.compile(r"\$(?:ncpus|pagesize|mb_memory)\b")


def read(path: str) -> configparser.ConfigParser:
    return _parse(path).parser


@dataclasses.dataclass
class Parsed:
    parser: configparser.ConfigParser
    notes: list[str]  # a line per expansion made
    unset: dict[tuple[str, str], str]  # (section, option) -> "line N: ${VAR}" of a variable not set, read as empty


def _parse(path: str) -> Parsed:
    """The job file as fio reads it (its ${VAR} and $ncpus-style keywords expanded); UsageError naming
    the line for what gdsbench does not read as fio does."""
    parser = configparser.ConfigParser(allow_no_value=True, strict=False, interpolation=None, delimiters=("=",),
                                       comment_prefixes=("#", ";"), inline_comment_prefixes=None,
                                       default_section="global")
    parser.optionxform = str.lower
    text = _text(path)
    expanded, notes, unset = _expand(text, path)
    try:
        parser.read_file(io.StringIO(expanded, newline=None), source=path)
    except configparser.Error as e:
        raise UsageError(f"--fio-job {path}: not an fio job file ({clip(e.message.splitlines()[0])})") from None
    jobs: set[str] = set()  # a job met twice, configparser merges into one ([global] may come back)
    for number, section, option in _layout(text):
        if option is None and section != parser.default_section:
            if section in jobs:
                raise UsageError(f"--fio-job {path} line {number}: a second job named [{clip(section)}] (fio runs each "
                                 "as a job of its own; gdsbench would merge them): give each job its own name")
            jobs.add(section)
    return Parsed(parser, notes, unset)


def _text(path: str) -> str:
    """The job file's text (UTF-8, a byte order mark skipped), each line cut and stripped as fio's
    strip_blank_end does (a comment from '#' or ';' on, as in `runtime=3600  # an hour`; an indented
    line is an option of its own, not a continuation); or one UsageError naming it."""
    try:
        with open(path, "rb") as f:
            text = tomlfile.decode(f.read(), f"--fio-job {path}", "fio job file")
    except OSError as e:
        raise UsageError(f"--fio-job {path}: cannot read it ({e.strerror})") from None
    lines = re.split(r"\r\n|\r|\n", text.removeprefix("\ufeff"))
    return "\n".join(re.split("[#;]", line, maxsplit=1)[0].strip() for line in lines)


def _expand(text: str, path: str) -> tuple[str, list[str], dict[tuple[str, str], str]]:
    """The text with fio's expansions in option values: ${VAR} from the environment (empty where unset,
    as fio reads it: those are returned, for translate to refuse where the value is used), and the
    keywords $ncpus, $pagesize, $mb_memory as this system's values; a note for each. An include is one
    UsageError naming the line."""
    lines, notes, unset = [], [], {}
    sections = {number: section for number, section, _ in _layout(text)}
    for number, line in enumerate(text.split("\n"), start=1):
        if INCLUDE.fullmatch(line):
            raise UsageError(f"--fio-job {path} line {number}: {clip(line)}: gdsbench does not read fio's included "
                             "files; copy their options into this one")
        option, equals, value = line.partition("=")
        if equals and not line.startswith(("#", ";", "[")):
            for token, name in dict.fromkeys(VARIABLE.findall(value)):
                found = os.environ.get(name, "").replace("\n", " ")
                value = value.replace(token, found)
                if found:
                    notes.append(f"{clip(line)}: {token} is {clip(found)} here (from the environment)")
                else:
                    unset[sections[number], option.strip().lower()] = f"line {number}: {clip(token)}"
            for token in dict.fromkeys(KEYWORD.findall(value)):
                value = re.sub(re.escape(token) + r"\b", str(KEYWORDS[token]()), value)
                notes.append(f"{clip(line)}: {token} is {KEYWORDS[token]()} here (fio's keyword)")
            line = f"{option}={value}"
        lines.append(line)
    return "\n".join(lines), notes, unset


def _layout(text: str):
    """(line number, section, option) for each line read() reads: option None on a section's header."""
    section = "global"
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.strip()
        header = configparser.ConfigParser.SECTCRE.match(line)
        if header:
            section = header.group("header")
            yield number, section, None
        elif line and not line.startswith(("#", ";")):
            yield number, section, line.split("=")[0].strip().lower()


def _no_value(path: str, section: str, option: str) -> UsageError:
    """An option fio needs a value for, alone on its line (in the job's section, or else in [global])."""
    lines = {where: number for number, where, name in _layout(_text(path)) if name == option}
    line = lines.get(section, lines.get("global"))
    return UsageError(f"--fio-job {path}{f' line {line}' if line else ''}: {option} has no value; fio needs one "
                      f"({option}=VALUE)")


def _refuse(path: str, option: str, value: str | None, why: str) -> UsageError:
    shown = clip(option if value is None else f"{option}={value}")
    return UsageError(f"--fio-job {path}: {shown}: {why}; gdsbench does not emulate it, and it changes what is "
                      "measured")


def _size(value: str, path: str, option: str) -> str:
    """fio's size ('4k', '10G', '1m', '512') as gdsbench reads sizes; a range or list is refused."""
    if not re.fullmatch(r"\d+(\.\d+)?[kKmMgGtTpP]?(i?[bB])?", value.strip()):
        if re.fullmatch(r"[\w.]+([-:,/][\w.%]*)+", value.strip()):
            raise _refuse(path, option, value, "a range, list or split of sizes (gdsbench moves one size)")
        raise UsageError(f"--fio-job {path}: {option}={clip(value)}: not a size; give one as fio writes it, such as "
                         f"{option}=4k or {option}=1m")
    return value.strip().upper().replace("IB", "").rstrip("B") or value


def _seconds(value: str) -> str:
    """fio's time (seconds unless suffixed: 60, 1m, 500ms, 2h) as gdsbench reads durations."""
    value = value.strip().lower()
    return f"{value}s" if re.fullmatch(r"\d+(\.\d+)?", value) else value


BY_FLAG = {o.flag: o for o in OPTIONS}


class Translation:
    def __init__(self, source: str) -> None:
        self.source = source  # the job file, as errors name it
        self.flags: list[str] = []  # gdsbench run's flags, in order
        self.path: str | None = None  # fio's filename, PATH
        self.mapped: list[str] = []  # "iodepth=16 -> --qd 16"
        self.notes: list[str] = []  # options not emulated that change nothing measured

    def flag(self, option: str, value: str | None, *flags: str, name: str | None = None) -> None:
        """option=value means flags; a flag's value is checked here as the flag reads it, so that an error
        names the fio option the user wrote (name, where option is said with more), not the flag."""
        if len(flags) == 2:
            self.parsed(name or option, flags[0], flags[1])
        self.flags += flags
        shown = option if value is None else f"{option}={value}"
        self.mapped.append(f"{shown} -> {' '.join(flags)}")

    def parsed(self, option: str, flag: str, value: str):
        """value as `flag` reads it; UsageError naming the fio option if it cannot."""
        return dataclasses.replace(BY_FLAG[flag], flag=f"--fio-job {self.source}: {option}").parse(value)


def translate(path: str, section: str | None = None) -> Translation:
    """The run flags an fio job means; UsageError (naming the option) for what gdsbench cannot mean."""
    parsed = _parse(path)
    parser = parsed.parser
    jobs = parser.sections()
    if not jobs:
        raise UsageError(f"--fio-job {path}: no job sections (fio runs each [name] section, other than [global], as "
                         "a job): add one, such as [job]")
    if section is None:
        if len(jobs) != 1:
            raise UsageError(f"--fio-job {path}: {len(jobs)} jobs ({clip(', '.join(jobs))}); gdsbench runs one: "
                             "choose it with --fio-section NAME")
        section = jobs[0]
    elif section not in jobs:
        raise UsageError(f"--fio-section {clip(section)}: not a job of {path} (its jobs: {clip(', '.join(jobs))})")
    options = dict(parser.items(section))
    out = Translation(path)
    out.notes += parsed.notes
    own = {option for _, where, option in _layout(_text(path)) if where == section}  # else [global]'s, if any
    time_based = "time_based" in options
    writing = options.get("rw", options.get("readwrite", "read")) in ("write", "randwrite")
    for option, value in options.items():
        if value is None and option in VALUED:
            raise _no_value(path, section, option)
        value = None if value is None else value.strip()
        unset = parsed.unset.get((section if option in own else "global", option))
        if unset and option in MAPPED:  # fio reads it as empty: here it would change what is measured
            raise UsageError(f"--fio-job {path} {unset} is not set (fio would read {option}= as empty): set it in "
                             "the environment, or write the value")
        if unset:
            out.notes.append(f"{unset} is not set: {option} read as empty, as fio reads it")
        if option in ("rw", "readwrite"):
            if value not in DIRECTIONS:
                raise _refuse(path, option, value, "mixed, trim or offset-modified directions (gdsbench moves "
                                                   f"{', '.join(DIRECTIONS)})")
            out.flag(option, value, "--rw", value)
        elif option in ("bs", "blocksize"):
            out.flag(option, value, "--bs", _size(value, path, option))
        elif option == "iodepth":
            out.flag(option, value, "--qd", value)
        elif option == "numjobs":
            if out.parsed(option, "--threads", value) > 1 and writing:
                raise _refuse(path, option, value, "clones that each write the whole file")
            out.flag(option, value, "--threads", value)
            if int(value) > 1:
                out.notes.append(f"numjobs={value}: fio's clones each cover the whole file; gdsbench's threads share "
                                 "it, each reading its own blocks")
        elif option == "direct":
            out.flag(option, value, "--direct" if value == "1" else "--buffered")
        elif option == "buffered":
            out.flag(option, value, "--buffered" if value != "0" else "--direct")
        elif option == "ioengine":
            if value == "libcufile":
                out.flag(option, value, "--mode", "gds")
            elif value in ENGINES:
                out.flag(option, value, "--engine", ENGINES[value])
                if value in ENGINE_NOTES:
                    out.notes.append(ENGINE_NOTES[value])
            else:
                raise _refuse(path, option, value, "an engine gdsbench does not have (it has io_uring, psync, null, "
                                                   "libcufile as --mode gds)")
        elif option == "runtime":
            out.flag(option, value, "--runtime", _seconds(value))
        elif option == "ramp_time":
            out.flag(option, value, "--ramp", _seconds(value))
        elif option == "size":
            if value.endswith("%"):
                raise _refuse(path, option, value, "a share of the file (give a size)")
            out.flag(option, value, "--size", _size(value, path, option))
            if not time_based:  # fio stops after size bytes unless time_based
                out.flag(f"{option} (not time_based)", value, "--io-size", _size(value, path, option), name=option)
        elif option == "io_size":
            out.flag(option, value, "--io-size", _size(value, path, option))
        elif option == "offset":
            if value.endswith("%"):
                raise _refuse(path, option, value, "a share of the file (give a size)")
            out.flag(option, value, "--offset", _size(value, path, option))
        elif option == "filename":
            if ":" in value:
                raise _refuse(path, option, value, "several files in one job")
            out.path = os.path.join(options.get("directory") or "", value)
            out.mapped.append(f"filename={value} -> PATH {out.path}")
        elif option == "directory":
            if ":" in value:
                raise _refuse(path, option, value, "several directories (fio spreads a job's files over them)")
            if "filename" not in options:  # fio's own name for the job's file there (its filename_format)
                out.path = os.path.join(value, f"{section}.0.0")
                out.mapped.append(f"directory={value} -> PATH {out.path} (fio's file for job [{section}], as no "
                                  "filename= is given)")
        elif option == "fadvise_hint":  # fio's default is 1; gdsbench advises only when asked (below)
            if value == "1":
                out.flag(option, value, "--fadvise-hint")
            elif value == "0":
                out.mapped.append("fadvise_hint=0 -> no advice, as gdsbench's default")
            else:
                raise _refuse(path, option, value, "an advice other than fio's 1 (sequential or random, by rw=) or 0")
        elif option == "end_fsync":
            if value != "0":
                out.flag(option, value, "--fsync-end")
        elif option == "fsync":
            if value != "0":
                out.flag(option, value, "--fsync-every", value)
        elif option == "verify":
            if value in VERIFY_OFF:
                out.mapped.append(f"verify={value} -> no verification ({VERIFY_OFF[value]})")
            else:
                out.flag(option, value, "--verify")
                out.notes.append(f"verify={value}: gdsbench reads back its own pattern (offset and checksum per 4 KiB "
                                 "block), not fio's")
        elif option == "time_based":
            out.mapped.append("time_based -> --runtime alone (no --io-size)")
        elif option in ENGINE_SWITCHES:
            if value in (None, "", "1"):
                out.flag(option, value, ENGINE_SWITCHES[option])
            elif value == "0":
                out.mapped.append(f"{option}=0 -> off, as by default")
            else:
                raise _refuse(path, option, value, "a value other than 0 or 1")
        elif option in ENGINE_VALUES:
            if value is None:
                raise _no_value(path, section, option)
            out.flag(option, value, ENGINE_VALUES[option], value)
        elif option in NOTED:
            out.notes.append(f"{option}: not emulated ({NOTED[option]})")
        else:
            raise _refuse(path, option, value, "an fio option gdsbench does not have")
    engine = out.flags[out.flags.index("--engine") + 1] if "--engine" in out.flags else None
    advised = (engine is None or ENGINE_INFO[engine].get("buffered_flags", False)) and "://" not in (out.path or "")
    if "--buffered" in out.flags and "fadvise_hint" not in options and advised:  # fio advises unless told not to
        out.flags.append("--fadvise-hint")
        out.mapped.append("fadvise_hint (not given: fio's default, 1) -> --fadvise-hint")
    return out
