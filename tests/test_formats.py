"""The formats users already have: DLIO workload YAML in, read from the real
files (every workload YAML DLIO 2.0 ships, from its wheel, which scripts/setup --tests
downloads; mlcommons/storage v2.0's configs, in tests/data)."""

from __future__ import annotations

import glob
import json
import os
import zipfile

import pytest
from test_bad_input import assert_one_line_error

from gdsbench.job.errors import UsageError
from gdsbench.reporting import prom
from gdsbench.train import dlio_yaml, workloads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DLIO_WHEEL = next(iter(glob.glob(os.path.join(ROOT, ".venv", "dlio", "dlio_benchmark-2.0.0-*.whl"))), None)
needs_dlio = pytest.mark.skipif(DLIO_WHEEL is None, reason="DLIO 2.0's wheel is not in .venv/dlio (scripts/setup --tests "
                                                           "downloads it)")
MLCOMMONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mlcommons-storage-v2.0")


@pytest.fixture(scope="module")
def dlio_configs(tmp_path_factory) -> dict[str, str]:
    """DLIO 2.0's configs/workload/*.yaml, as its wheel ships them: name -> path."""
    folder = tmp_path_factory.mktemp("dlio-configs")
    out = {}
    with zipfile.ZipFile(DLIO_WHEEL) as wheel:
        for name in wheel.namelist():
            if name.startswith("dlio_benchmark/configs/workload/") and name.endswith(".yaml"):
                path = folder / os.path.basename(name)
                path.write_bytes(wheel.read(name))
                out[path.stem] = str(path)
    return out


def outcome(path: str, prepare: bool = False) -> str:
    try:
        dlio_yaml.translate(path, prepare=prepare)
        return "mapped"
    except UsageError as e:
        assert "\n" not in str(e) and path in str(e)
        return str(e).split(": ", 2)[1]  # the key refused


@needs_dlio
def test_every_workload_yaml_dlio_2_ships_is_mapped_or_refused_naming_the_key(dlio_configs):
    assert {name: outcome(path) for name, path in dlio_configs.items()} == {
        **{f"{m}_{gpu}": "mapped" for m in ("unet3d", "cosmoflow", "resnet50") for gpu in ("a100", "h100", "v100")},
        "resnet50_tf": "mapped",
        "bert_v100": "train.total_training_steps",  # counted over the run, where --steps caps an epoch
        "default": "workflow.evaluation",  # evaluation reads another dataset between epochs
        "dlrm": "workflow.do_eval",
        "megatron_deepspeed": "dataset.format",  # mmap_indexed_binary
    }


def test_mlcommons_storage_v2_configs_are_mapped_for_train_and_prepare_or_sent_to_checkpoint():
    configs = {os.path.basename(p)[:-5]: p for p in glob.glob(os.path.join(MLCOMMONS, "*.yaml"))}
    assert len(configs) == 13
    for name, path in configs.items():
        if name.startswith("llama3"):
            with pytest.raises(UsageError, match="workflow.train is False: a checkpoint workload: use gdsbench checkpoint"):
                dlio_yaml.translate(path)
        elif name.endswith("datagen"):
            assert outcome(path) == "workflow.train is False" and outcome(path, prepare=True) == "mapped"
        else:
            assert outcome(path) == "mapped", name


def test_unet3d_h100_maps_onto_the_built_in_workload_and_names_what_it_does_not_emulate():
    t = dlio_yaml.translate(os.path.join(MLCOMMONS, "unet3d_h100.yaml"))
    w = t.workload
    assert (w.name, w.format, w.files, w.samples_per_file, w.record_bytes, w.record_stdev, w.batch, w.read_threads,
            w.compute_s, w.au_threshold) == ("unet3d", "npz", 168, 1, 146_600_628, 68_341_808, 7, 4, 0.323, 0.90)
    assert t.run == {"epochs": 5}
    assert "dataset.record_length_bytes -> record_bytes 146600628" in t.mapped and "train.epochs -> --epochs 5" in t.mapped
    noted = {line.split(":")[0] for line in t.warnings}
    assert {"dataset.data_folder", "dataset.record_length_bytes_resize", "workflow.checkpoint", "model.name",
            "checkpoint.checkpoint_folder", "framework"} <= noted
    resnet = dlio_yaml.translate(os.path.join(MLCOMMONS, "resnet50_h100.yaml")).workload
    assert (resnet.format, resnet.record_bytes, resnet.batch, resnet.compute_s) == ("tfrecord", 114_660, 400, 0.224)


def test_mlcommons_storage_v3_b200_workloads_map_as_the_built_ins(gdsbench):
    """MLPerf Storage v3.0's B200 timings ride on the workload files: unet3d_b200 maps with its own
    computation time, retinanet_b200 as a JPEG file a sample with its AU threshold of 0.85, flux and
    dlrm as parquet with their columns; each built-in is its file."""
    v3 = os.path.join(os.path.dirname(MLCOMMONS), "mlcommons-storage-v3.0")
    w = dlio_yaml.translate(os.path.join(v3, "unet3d_b200.yaml")).workload
    assert (w.name, w.format, w.files, w.batch, w.read_threads, w.compute_s, w.au_threshold) == (
        "unet3d", "npz", 7200, 7, 4, 0.162, 0.90)
    r = dlio_yaml.translate(os.path.join(v3, "retinanet_b200.yaml")).workload
    assert (r.name, r.format, r.files, r.samples_per_file, r.record_bytes, r.batch, r.read_threads, r.compute_s,
            r.au_threshold) == ("retinanet", "jpeg", 1_170_301, 1, 322_957, 24, 8, 0.04755, 0.85)
    built_in = workloads.BUILT_IN["retinanet"]
    assert (built_in.files, built_in.record_bytes, built_in.batch, built_in.compute_s, built_in.au_threshold) == (
        r.files, r.record_bytes, r.batch, r.compute_s, r.au_threshold)
    for name in ("flux", "dlrm"):
        t = dlio_yaml.translate(os.path.join(v3, f"{name}_b200.yaml"))
        built_in = workloads.BUILT_IN[name]
        assert t.workload.format == "parquet"
        for field in ("files", "samples_per_file", "record_bytes", "batch", "read_threads", "compute_s", "au_threshold",
                      "row_group", "columns", "read_columns"):
            assert getattr(t.workload, field) == getattr(built_in, field), (name, field)
    res = gdsbench("predict", "--workload", os.path.join(v3, "flux_b200.yaml"), "/nonexistent")
    assert "/nonexistent: not a directory" in res.err.strip().splitlines()[-1]


def test_accelerator_type_gives_a_built_in_workload_mlperf_storages_timing(gdsbench):
    """--accelerator-type: each timing is the one MLPerf Storage's own workload file for that
    accelerator gives (v2.0's a100 and h100 files, v3.0's b200 and mi355 ones, held here)."""
    folders = [MLCOMMONS, os.path.join(os.path.dirname(MLCOMMONS), "mlcommons-storage-v3.0")]
    for name, timings in workloads.TIMINGS.items():
        for kind, (batch, compute_s) in timings.items():
            path = next(p for p in (os.path.join(f, f"{name}_{kind}.yaml") for f in reversed(folders)) if os.path.exists(p))
            w = dlio_yaml.translate(path).workload
            assert (w.batch, w.compute_s) == (batch, compute_s), path
            assert workloads.on_accelerator(workloads.BUILT_IN[name], kind).compute_s == compute_s
        assert workloads.own_accelerator(name)  # every built-in is one of MLPerf Storage's timings
    assert_one_line_error(gdsbench("predict", "/nonexistent", "--workload", "unet3d", "--accelerator-type", "mi355"),
                          "--accelerator-type mi355", "a100, h100, b200", "--compute-time")
    v3 = os.path.join(os.path.dirname(MLCOMMONS), "mlcommons-storage-v3.0")
    assert_one_line_error(gdsbench("predict", "/nonexistent", "--workload", os.path.join(v3, "unet3d_b200.yaml"),
                                   "--accelerator-type", "b200"), "names its own")
    res = gdsbench("predict", "/nonexistent", "--workload", "unet3d", "--accelerator-type", "b200")
    assert "--accelerator-type" not in res.err  # taken: what fails is the missing dataset


def test_what_a_yaml_cannot_mean_here_is_refused_in_one_line(tmp_path, gdsbench):
    cases = {
        "dataset: {format: hdf5}\n": "dataset.format: 'hdf5'",
        "dataset: {format: npz}\nreader: {data_loader: dali}\n": "reader.data_loader: 'dali'",
        "dataset: {format: npz}\nreader: {data_loader: pytorch}\n": "reader.sample_shuffle: 'off' (DLIO default)",
        "dataset: {format: tfrecord, compression: gzip}\n": "dataset.compression",
        "dataset: {format: tfrecord}\nreader: {read_type: memory}\n": "reader.read_type",
        "dataset: {format: tfrecord, num_files_tain: 3}\n": "dataset.num_files_tain: a setting gdsbench does not know",
        "dataset: [1, 2\n": "not valid YAML",
        "- a list\n": "a YAML mapping",
    }
    for i, (text, says) in enumerate(cases.items()):
        path = tmp_path / f"w{i}.yaml"
        path.write_text(text)
        assert_one_line_error(gdsbench("train", tmp_path, "--workload", path), says)


@pytest.mark.parametrize("command", ["train", "predict"])
def test_a_yaml_s_bad_bytes_sections_and_numbers_are_refused_in_one_line_naming_the_key(tmp_path, gdsbench, command):
    ok = "dataset: {format: npz}\nreader: {sample_shuffle: seed}\n"
    cases = {
        b"\xff\xfedataset: {}\n": "line 1: not a text file (YAML, UTF-8)",
        b"reader: 5\n": "reader: must be a mapping of settings (reader: {batch_size: ...}), not 5",
        b"train: [1]\n": "train: must be a mapping of settings (train: {epochs: ...}), not [1]",
        b"workflow: 3\n": "workflow: must be a mapping of settings (workflow: {train: ...}), not 3",
        b"dataset: [1, 2]\n": "dataset: must be a mapping of settings (dataset: {num_files_train: ...}), not [1, 2]",
        f"{ok}train: {{epochs: -3}}\n".encode(): "train.epochs -3: must be between 1 and 100000",
        f"{ok}train: {{epochs: many}}\n".encode(): "train.epochs 'many': not a whole number",
        b"dataset: {format: npz}\nreader: {batch_size: 0, sample_shuffle: seed}\n": "reader.batch_size 0: must be between 1",
        b"dataset: {format: [1]}\n": "dataset.format: [1] (gdsbench reads npz, jpeg, tfrecord and parquet)",
        f"{ok}train: {{total_training_steps: abc}}\n".encode(): "train.total_training_steps 'abc': not a number",
    }
    for i, (text, says) in enumerate(cases.items()):
        path = tmp_path / f"w{i}.yaml"
        path.write_bytes(text)
        assert_one_line_error(gdsbench(command, tmp_path, "--workload", path), f"--workload {path}", says)


def test_an_empty_yaml_section_is_read_as_empty_not_as_a_setting(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("dataset: null\nreader:\ntrain: {computation_time: 1ms, epochs: 2}\n")
    t = dlio_yaml.translate(str(path))
    assert t.run == {"epochs": 2} and t.workload.format == "tfrecord" and t.workload.compute_s == 0.001


def test_train_and_prepare_read_a_dlio_yaml_and_say_what_they_mapped(tmp_path, gdsbench):
    yaml_file = os.path.join(MLCOMMONS, "unet3d_h100.yaml")
    small = ["--files", "24", "--record-bytes", "64K", "--batch", "2", "--compute-time", "2ms"]
    res = gdsbench("prepare", tmp_path / "ds", "--workload", yaml_file, *small)
    assert res.code == 0, res.err
    assert "unet3d_h100.yaml (DLIO workload YAML): dataset.num_files_train -> files 168" in res.err
    res = gdsbench("train", tmp_path / "ds", "--workload", yaml_file, *small, "--results", tmp_path / "res", "--json")
    assert res.code == 0, res.err
    (row,) = json.loads(res.out)
    assert row["epochs"] == 5 and row["accelerators"] == 1  # the YAML's train.epochs
    assert "note: " in res.err and "dataset.data_folder: not emulated (the dataset is DIR" in res.err
    res = gdsbench("train", tmp_path / "ds", "--workload", yaml_file, *small, "--epochs", "1", "--results",
                   tmp_path / "res", "--json")
    assert json.loads(res.out)[0]["epochs"] == 1  # the flag wins
    assert_one_line_error(gdsbench("train", tmp_path / "ds", "--workload", os.path.join(MLCOMMONS, "llama3_8b.yaml")),
                          "use gdsbench checkpoint")


# ---- DLIO's summary.json beside every train run ----

DLIO_SUMMARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "dlio-2.0-summary", "summary.json")


def read_summary(path: str) -> dict:
    """What MLPerf tooling reads of a summary.json, the same code for both tools': every key's type
    (a list by its items', a dict of text as such), the metric's units re-derived, the times parsed
    with DLIO's format."""
    from datetime import datetime

    with open(path) as f:
        d = json.load(f)

    def shape(value):
        if isinstance(value, dict):
            if value and all(isinstance(v, str) for v in value.values()):  # /proc tables: their keys are the host's
                return "dict[str, str]"
            return {k: shape(v) for k, v in value.items()}
        if isinstance(value, list):
            return [sorted({type(v).__name__ for v in value})]
        return type(value).__name__

    m = d["metric"]
    mean = sum(m["train_throughput_samples_per_second"]) / len(m["train_throughput_samples_per_second"])
    return {
        "shape": shape({k: v for k, v in d.items() if k != "gdsbench"}),
        "io_is_samples_times_record_in_MiB": m["train_io_mean_MB_per_second"] / mean,  # record bytes / 2**20
        "au_mean_is_mean_of_epochs": m["train_au_mean_percentage"] == pytest.approx(
            sum(m["train_au_percentage"]) / len(m["train_au_percentage"])),
        "epochs_listed": len(m["train_au_percentage"]) == d["epochs"] == len(m["train_throughput_samples_per_second"]),
        "verdict": m["train_au_meet_expectation"] in ("success", "fail"),
        "seconds": (datetime.strptime(d["end"], "%Y-%m-%dT%H:%M:%S.%f")
                    - datetime.strptime(d["start"], "%Y-%m-%dT%H:%M:%S.%f")).total_seconds(),
        "only_gdsbench_added": set(d) - {"gdsbench"},
    }


def test_train_writes_dlio_s_summary_json_with_its_keys_types_and_units(tmp_path, gdsbench):
    """The same shape of run as DLIO's committed summary.json (2 accelerators, 240 files of 64 KiB,
    batch 7, 2 read threads, 5 ms compute, 2 epochs), both read by the same code."""
    shape = ["--workload", "unet3d", "--files", "240", "--record-bytes", "64K", "--record-stdev", "0", "--batch", "7",
             "--read-threads", "2", "--compute-time", "5ms"]
    assert gdsbench("prepare", tmp_path / "ds", *shape).code == 0
    res = gdsbench("train", tmp_path / "ds", *shape, "--accelerators", "2", "--epochs", "2", "--results", tmp_path)
    assert res.code == 0, res.err
    (run,) = [p for p in tmp_path.iterdir() if p.name != "ds"]
    ours, dlio = read_summary(str(run / "summary.json")), read_summary(DLIO_SUMMARY)
    assert ours["shape"] == dlio["shape"]  # every DLIO key, no other, each of DLIO's type
    assert ours["only_gdsbench_added"] == dlio["only_gdsbench_added"]
    assert ours["io_is_samples_times_record_in_MiB"] == pytest.approx(65536 / 2**20)
    assert dlio["io_is_samples_times_record_in_MiB"] == pytest.approx(65536 / 2**20)
    for key in ("au_mean_is_mean_of_epochs", "epochs_listed", "verdict"):
        assert ours[key] is True and dlio[key] is True
    assert 0 < ours["seconds"] < 120
    extra = json.loads((run / "summary.json").read_text())["gdsbench"]
    assert extra["point_key"] == "accelerators=2" and extra["hosts"] == [os.uname().nodename]
    assert (run / "dlio" / "accelerators=2-repeat0" / "summary.json").exists()


# ---- fio job files in ----

FIO_EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "fio-examples")


def test_every_job_of_fios_own_examples_is_translated_or_refused_naming_the_option():
    """fio's examples/*.fio (tests/data/fio-examples): each job becomes run's flags, or one line names
    the option (or engine) gdsbench does not have; nothing else happens."""
    from gdsbench.job import fio_job

    translated = []
    for path in sorted(glob.glob(os.path.join(FIO_EXAMPLES, "*.fio"))):
        for job in fio_job.read(path).sections():
            try:
                t = fio_job.translate(path, job)
                translated.append(os.path.basename(path))
                assert t.flags or t.path, path
            except UsageError as e:
                text = str(e)
                if text.startswith(f"--fio-job {path} line ") and "is not set (fio would read " in text:
                    continue  # a ${VAR} of fio's example, unset here, in an option whose value is used
                assert "\n" not in text and text.startswith(f"--fio-job {path}: ") and "changes what is measured" in text
                option = text.split(": ")[1].split("=")[0]
                assert option in dict(fio_job.read(path).items(job)), (path, job, text)
    assert {"fio-rand-read.fio", "fio-seq-write.fio", "ssd-test.fio", "basic-verify.fio", "null.fio"} <= set(translated)


def test_fio_rand_read_becomes_the_flags_that_mean_it_and_the_command_line_wins(gdsbench, pattern_file):
    from gdsbench.job import fio_job

    t = fio_job.translate(os.path.join(FIO_EXAMPLES, "fio-rand-read.fio"))
    assert t.path == "fio-rand-read" and t.flags == ["--rw", "randread", "--bs", "4K", "--buffered", "--threads", "1",
                                                      "--runtime", "900s", "--size", "10G", "--engine", "io_uring",
                                                      "--qd", "16", "--fadvise-hint"]  # (fio's default advice)
    assert any(n.startswith("libaio -> io_uring") for n in t.notes)
    res = gdsbench("run", pattern_file, "--fio-job", os.path.join(FIO_EXAMPLES, "fio-rand-read.fio"), "--size", "4M",
                   "--runtime", "300ms", "--json")
    assert res.code == 0, res.err
    spec = json.loads(res.out)["spec"]
    assert (spec["rw"], spec["bs"], spec["qd"], spec["engine"], spec["direct"], spec["runtime_ns"], spec["size"]) == (
        "randread", 4096, 16, "io_uring", False, 300_000_000, 4 << 20)
    said = [line for line in res.err.splitlines() if "fio-rand-read.fio: " in line]
    assert "iodepth=16 -> --qd 16" in said[0] and all(line.startswith("gdsbench: note: ") for line in said[1:])
    assert "name: not emulated" in said[1] and "libaio -> io_uring" in said[2]


def test_a_job_file_with_several_jobs_asks_which(gdsbench, pattern_file):
    ssd = os.path.join(FIO_EXAMPLES, "ssd-test.fio")
    assert_one_line_error(gdsbench("run", pattern_file, "--fio-job", ssd), "4 jobs (seq-read, rand-read, seq-write, "
                                                                            "rand-write)")
    res = gdsbench("run", pattern_file, "--fio-job", ssd, "--fio-section", "rand-read", "--size", "4M", "--runtime",
                   "200ms", "--json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["spec"]["rw"] == "randread"
    assert "stonewall: not emulated" in res.err
    assert_one_line_error(gdsbench("run", pattern_file, "--fio-section", "x"), "only with --fio-job")


def test_a_job_file_that_is_not_text_or_has_a_job_twice_or_none_is_refused_in_one_line(gdsbench, pattern_file,
                                                                                        tmp_path):
    cases = {
        b"\xff\xfe[j]\nbs=4k\n": "line 1: not a text file (fio job file, UTF-8)",
        b"[j]\nrw=read\nbs\n": "line 3: bs has no value; fio needs one (bs=VALUE)",
        b"[global]\niodepth\n[j]\nrw=read\n": "line 2: iodepth has no value",
        b"[j]\nbs=4k\n[k]\nbs=8k\n[j]\nbs=16k\n": "line 5: a second job named [j] (fio runs each as a job of its "
                                                  "own; gdsbench would merge them): give each job its own name",
        b"# nothing yet\n": "no job sections (fio runs each [name] section, other than [global], as a job)",
        b"[global]\nbs=4k\n": "no job sections",
    }
    for i, (text, says) in enumerate(cases.items()):
        job = tmp_path / f"j{i}.fio"
        job.write_bytes(text)
        for command in ("run", "sweep"):
            assert_one_line_error(gdsbench(command, pattern_file, "--fio-job", job), f"--fio-job {job}", says)


def test_fio_s_flags_stand_alone_on_their_line(tmp_path):
    from gdsbench.job import fio_job

    job = tmp_path / "flags.fio"
    job.write_text("[global]\ngroup_reporting\n[j]\nrw=read\ntime_based\ndirect=1\nruntime=1s\n[global]\nbs=8k\n")
    t = fio_job.translate(str(job))
    assert t.flags == ["--bs", "8K", "--rw", "read", "--direct", "--runtime", "1s"]  # [global] first
    assert "time_based -> --runtime alone (no --io-size)" in t.mapped
    job.write_text("[j]\nrw=read\ndirect\n")  # fio: "Option direct requires an argument"
    with pytest.raises(UsageError, match="line 3: direct has no value; fio needs one"):
        fio_job.translate(str(job))


# ---- metrics for node_exporter's textfile collector ----

def check_with_the_reference_parsers(path) -> dict:
    """The file as prometheus_client's text parser reads it ({family: [samples]}), and, where
    Debian's prometheus package is installed, `promtool check metrics` clean."""
    import shutil
    import subprocess

    from prometheus_client.parser import text_string_to_metric_families

    text = open(path).read()
    families = {f.name: f.samples for f in text_string_to_metric_families(text)}
    if shutil.which("promtool"):
        checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    return families


def test_validate_metrics_give_a_gauge_per_check_state_and_figure(gdsbench, tmp_path):
    prom_file = tmp_path / "node.prom"
    res = gdsbench("validate", "--quick", "--metrics", prom_file, "--json")
    record = json.loads(res.out)
    families = check_with_the_reference_parsers(prom_file)
    states = families["gdsbench_validate_check_state"]
    by_check: dict[str, list] = {}
    for s in states:
        by_check.setdefault(s.labels["check"], []).append(s)
    assert set(by_check) == {c["name"] for c in record["checks"]}
    for check in record["checks"]:  # one state set per check: 1 for its own state, 0 for the other four
        assert {s.labels["state"]: s.value for s in by_check[check["name"]]} == {
            state: float(state == check["status"]) for state in ("PASS", "INFO", "WARN", "FAIL", "SKIP")}
    (seq,) = [s for s in families["gdsbench_validate_bandwidth_bytes_per_second"] if s.labels["point"] == "storage_seq"]
    assert seq.labels["mode"] == "cpu" and seq.labels["block_size"] == "1048576" and seq.labels["device"]
    assert seq.value == pytest.approx(record["measurements"]["storage_seq"]["median"]["gbps"] * 1e9)
    # the path the bytes took, in short (the full label is in the JSON), and the latency quantiles as one summary
    assert seq.labels["data_path"] == prom.short_data_path(record["measurements"]["storage_seq"]["data_path"])
    assert seq.labels["data_path"] in ("o_direct", "page_cache") and seq.labels["simulated"] == "false"
    quantiles = {s.labels["quantile"]: s.value for s in families["gdsbench_validate_latency_seconds"]
                 if s.labels["point"] == "storage_seq"}
    assert quantiles == pytest.approx({q: record["measurements"]["storage_seq"]["median"][f"p{p}_us"] / 1e6
                                       for q, p in (("0.5", 50), ("0.99", 99))})
    assert families["gdsbench_validate_exit_code"][0].value == res.code
    assert [p.name for p in tmp_path.iterdir()] == ["node.prom"]  # written whole, renamed into place
    assert_one_line_error(gdsbench("validate", "--quick", "--metrics", tmp_path / "node.txt"), "*.prom", code=3)


def test_run_metrics_label_what_ran(gdsbench, pattern_file, tmp_path):
    res = gdsbench("run", pattern_file, "--bs", "256K", "--qd", "4", "--io-size", "4M", "--metrics",
                   tmp_path / "run.prom", "--json")
    assert res.code == 0, res.err
    families = check_with_the_reference_parsers(tmp_path / "run.prom")
    (bw,) = families["gdsbench_run_bandwidth_bytes_per_second"]
    record = json.loads(res.out)
    assert bw.value == pytest.approx(record["bandwidth_bytes_per_s"])
    assert (bw.labels["block_size"], bw.labels["queue_depth"], bw.labels["rw"]) == ("262144", "4", "read")
    # latency: one summary, a quantile label per percentile, its _count the reads and _sum their latency
    latency = families["gdsbench_run_latency_seconds"]
    quantiles = {s.labels["quantile"]: s.value for s in latency if "quantile" in s.labels}
    assert quantiles == pytest.approx({"0.5": record["lat_p50_ns"] / 1e9, "0.9": record["lat_p90_ns"] / 1e9,
                                       "0.99": record["lat_p99_ns"] / 1e9, "0.999": record["lat_p99.9_ns"] / 1e9,
                                       "0.9999": record["lat_p99.99_ns"] / 1e9})
    (count,) = [s for s in latency if s.name == "gdsbench_run_latency_seconds_count"]
    (total,) = [s for s in latency if s.name == "gdsbench_run_latency_seconds_sum"]
    assert count.value == record["ops"] and total.value == pytest.approx(record["ops"] * record["lat_mean_ns"] / 1e9)
    (cpu,) = families["gdsbench_run_cpu_seconds_per_byte"]
    assert cpu.value == pytest.approx(record["cpu_s_per_gb"] / 1e9)


def test_runs_that_differ_in_pattern_cache_or_simulation_never_share_a_series(gdsbench, pattern_file, tmp_path):
    """A sequential run, a random one, a buffered one and one on the simulated GPU: each its own series
    in every family (the old labels (mode, engine, rw, block size, queue depth, threads, device) let the
    first three collide), and the names in base units (no per-gigabyte, no percentile in a name)."""
    common = [pattern_file, "--bs", "256K", "--qd", "4", "--io-size", "4M"]
    runs = {"seq": [], "rand": ["--pattern", "rand"], "buffered": ["--buffered"],
            "sim": ["--mode", "bounce", "--gpu-backend", "sim"]}
    series: dict[str, set] = {}
    for name, extra in runs.items():
        res = gdsbench("run", *common, *extra, "--metrics", tmp_path / f"{name}.prom")
        assert res.code == 0, res.err
        for family, samples in check_with_the_reference_parsers(tmp_path / f"{name}.prom").items():
            if family.startswith("gdsbench_run_"):
                for s in samples:
                    key = (s.name, tuple(sorted(s.labels.items())))
                    assert key not in series.setdefault(family, set()), f"{name} shares {key}"
                    series[family].add(key)
    labels = {s[1] for s in series["gdsbench_run_bandwidth_bytes_per_second"]}
    assert {dict(x)["pattern"] for x in labels} == {"seq", "rand"} and {dict(x)["direct"] for x in labels} == {
        "true", "false"} and {dict(x)["simulated"] for x in labels} == {"true", "false"}
    assert {dict(x)["data_path"] for x in labels} == {"o_direct", "page_cache", "o_direct_bounce"}
    assert set(series) == {"gdsbench_run_bandwidth_bytes_per_second", "gdsbench_run_operations_per_second",
                           "gdsbench_run_latency_seconds", "gdsbench_run_cpu_seconds_per_byte",
                           "gdsbench_run_verify_mismatched_blocks", "gdsbench_run_timestamp_seconds"}


def test_the_data_path_in_short_follows_its_label():
    """Each kind of data-path label (system/gpu_path.data_path) gets its own short word."""
    from gdsbench.job.spec import JobSpec
    from gdsbench.system import nvfs
    from gdsbench.system.gpu_path import data_path

    def short(**job) -> str:
        return prom.short_data_path(data_path(JobSpec(path="/x", **job), None))

    assert short(engine="psync", direct=True) == "o_direct" and short(engine="psync", direct=False) == "page_cache"
    assert short(mode="bounce", engine="psync", gpu_backend="sim") == "o_direct_bounce"
    assert short(mode="cached-bounce", engine="psync", gpu_backend="sim") == "page_cache_bounce"
    assert short(mode="bounce", engine="null", gpu_backend="sim") == "copies_only" and short(engine="null") == "none"
    assert short(mode="gds", engine="psync", gpu_backend="sim") == "stand_in"
    assert short(engine="psync", rw="write", direct=True) == "o_direct"
    assert prom.short_data_path(f"cuFile reads into GPU memory, {nvfs.OBSERVED}: 1 GiB") == "gpudirect"
    assert prom.short_data_path(f"cuFile reads into GPU memory, {nvfs.INFERRED}: ...") == "gpudirect_inferred"
    assert prom.short_data_path("cuFile reads into GPU memory, in cuFile's COMPATIBILITY mode (...)") == "cufile_compat"
    assert prom.short_data_path("cuFile reads into GPU memory, not observed: PCI P2PDMA, which nvidia-fs does not "
                                "count, or cuFile's compatibility mode (...)") == "p2pdma_unobserved"
    assert prom.short_data_path("kvikio reads into GPU memory (kvikio through cuFile without nvidia-fs here (...), "
                                "which may read by PCI P2PDMA (...)), GPUDirect (inferred, not observed): ...") \
        == "gpudirect_inferred"  # as gds's label where P2PDMA may carry the reads
    assert prom.short_data_path("") == prom.short_data_path("unavailable") == "unknown"
    with open(os.path.join(ROOT, "docs", "validate.md")) as f:  # every word is explained there
        page = f.read()
    assert [w for _, w in prom.SHORT_PATHS if f"`{w}`" not in page] == []


# ---- the versioned result schema ----

def test_the_published_schemas_are_the_code_s():
    """docs/schema/*.json are what scripts/schema_doc makes now: a field added in the code without
    regenerating them fails here."""
    from gdsbench.job.spec import OPTIONS
    from gdsbench.results.schema import SCHEMAS, summary_keys

    for name, make in SCHEMAS.items():
        with open(os.path.join(ROOT, "docs", "schema", f"{name}.json")) as f:
            assert json.load(f) == json.loads(json.dumps(make())), f"run scripts/schema_doc ({name})"
    # a point is the spec's columns and the figures side by side: no figure may take an option's column
    # (the count of retried requests once overwrote --retries's)
    assert {o.column for o in OPTIONS} & set(summary_keys()) == {"mode"}


def test_real_outputs_carry_the_version_and_validate_against_their_schemas(gdsbench, pattern_file, tmp_path):
    import jsonschema
    import pandas as pd

    from gdsbench.results.schema import SCHEMA_VERSION, SCHEMAS

    def valid(name: str, record: dict) -> None:
        jsonschema.validate(record, SCHEMAS[name](), format_checker=jsonschema.FormatChecker())
        assert record["schema_version"] == SCHEMA_VERSION

    res = gdsbench("run", pattern_file, "--bs", "1M", "--io-size", "4M", "--json")
    valid("run-record", json.loads(res.out))
    res = gdsbench("sweep", pattern_file, "--bs", "256K,1M", "--io-size", "2M", "--results", tmp_path, "--name", "s")
    assert res.code == 0, res.err
    (run,) = tmp_path.iterdir()
    valid("run-info", json.loads((run / "run.json").read_text()))
    rows = [json.loads(line) for line in (run / "points.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        valid("point", row)
    assert set(pd.read_parquet(run / "points.parquet")["schema_version"]) == {SCHEMA_VERSION}
    with pytest.raises(jsonschema.ValidationError):  # a schema that can fail: a figure of the wrong type
        jsonschema.validate(dict(rows[0], bytes="many"), SCHEMAS["point"]())


def test_sweep_takes_a_fio_job_and_sweeps_the_lists_given_beside_it(gdsbench, pattern_file, tmp_path):
    res = gdsbench("sweep", pattern_file, "--fio-job", os.path.join(FIO_EXAMPLES, "fio-rand-read.fio"), "--qd", "1,4",
                   "--size", "4M", "--runtime", "200ms", "--results", tmp_path, "--no-report")
    assert res.code == 0, res.err
    rows = [json.loads(line) for line in next(tmp_path.glob("*/points.jsonl")).read_text().splitlines()]
    assert [(r["rw"], r["bs_bytes"], r["qd"], r["engine"]) for r in rows] == [("randread", 4096, 1, "io_uring"),
                                                                              ("randread", 4096, 4, "io_uring")]


def test_every_mlcommons_storage_v3_config_here_maps_or_is_refused_naming_the_key():
    """v3.0's training files (unet3d, retinanet's jpeg, flux's jpeg and parquet variants, dlrm's npz and
    parquet ones) and datagen files (for prepare) all map."""
    v3 = os.path.join(os.path.dirname(MLCOMMONS), "mlcommons-storage-v3.0")
    configs = {os.path.basename(p)[:-5]: p for p in glob.glob(os.path.join(v3, "*.yaml"))}
    mapped = ("unet3d_a100", "unet3d_b200", "unet3d_h100", "retinanet_a100", "retinanet_b200", "retinanet_h100",
              "retinanet_mi355", "flux_a100", "flux_h100", "flux_b200", "flux_mi355", "dlrm_a100", "dlrm_h100",
              "dlrm_b200", "dlrm_mi355")
    assert {name: outcome(path) for name, path in configs.items()} == {
        **{name: "mapped" for name in mapped},
        **{f"{m}_datagen": "workflow.train is False" for m in ("unet3d", "retinanet", "flux", "dlrm")},
        **{f"llama3_{m}": "workflow.train is False" for m in ("8b", "70b", "405b", "1t")}}  # checkpoint's
    assert {m: outcome(configs[f"{m}_datagen"], prepare=True) for m in ("unet3d", "retinanet", "flux", "dlrm")} == {
        "unet3d": "mapped", "retinanet": "mapped", "flux": "mapped", "dlrm": "mapped"}
    dlrm = dlio_yaml.translate(configs["dlrm_datagen"], prepare=True).workload
    assert (dlrm.format, dlrm.files, dlrm.samples_per_file, dlrm.row_group, len(dlrm.columns)) == (
        "parquet", 1024, 1_536_000, 6144, 200)
    mi355 = dlio_yaml.translate(configs["retinanet_mi355"]).workload
    assert (mi355.format, mi355.files, mi355.batch, mi355.compute_s, mi355.au_threshold) == (
        "jpeg", 1_170_301, 32, 0.0634, 0.85)
    flux = dlio_yaml.translate(configs["flux_h100"]).workload
    assert (flux.format, flux.record_bytes, flux.record_stdev, flux.compute_s, flux.au_threshold) == (
        "jpeg", 307_200, 102_400, 0.85, 0.80)
