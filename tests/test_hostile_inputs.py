"""Hostile input files and flags (issue 35): fio job files, DLIO workload YAMLs and sweep files
that are crafted, odd or simply wrong each get one short line naming what the user wrote and the
fix, or are read as fio and DLIO read them: never a traceback, a megabyte of error, or a silent
misreading."""

from __future__ import annotations

import os

import pytest
from test_bad_input import assert_one_line_error

from gdsbench.job import fio_job
from gdsbench.job.errors import UsageError, quoted
from gdsbench.train import dlio_yaml

OK_YAML = "dataset: {format: tfrecord}\ntrain: {computation_time: 0.1}\n"
SHORT = 400  # an error line longer than this is not one line a person reads


def write(tmp_path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def refused(path: str, **kw) -> str:
    """The one-line UsageError translate() gives for a DLIO YAML."""
    with pytest.raises(UsageError) as e:
        dlio_yaml.translate(path, **kw)
    text = str(e.value)
    assert "\n" not in text and len(text) < SHORT, text[:SHORT]
    return text


# ---- quoting user values ----

def test_a_quoted_value_is_clipped_however_large_or_deep_it_is():
    assert quoted("abc") == "'abc'" and quoted(5) == "5"
    huge = "x" * 1_000_000
    assert len(quoted(huge)) <= 81 and quoted(huge).endswith("…")
    bomb: list = ["x"] * 10
    for _ in range(8):  # 10^9 elements if written out; repr() would never return
        bomb = [bomb] * 10
    assert len(quoted(bomb)) <= 81


# ---- DLIO YAML ----

def test_a_yaml_alias_bomb_is_refused_in_one_short_line(tmp_path, gdsbench):
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):  # each level ten of the one before: 10^9 values from a few hundred bytes
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        levels.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]")
    bomb = write(tmp_path, "bomb.yaml", "\n".join(levels) + "\ndataset: *i\n")
    assert "aliases" in refused(bomb)
    r = gdsbench("train", tmp_path, "--workload", bomb)
    assert_one_line_error(r, f"--workload {bomb}", "aliases", "expand")
    assert len(r.err) < SHORT
    loop = write(tmp_path, "loop.yaml", "dataset: &d {format: tfrecord, more: *d}\n")
    assert "refers to itself" in refused(loop)
    deep = write(tmp_path, "deep.yaml", "dataset: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested" in refused(deep)


def test_a_few_aliases_are_read_as_yaml_means_them(tmp_path):
    path = write(tmp_path, "alias.yaml", "dataset: {format: tfrecord, record_length: &r 4096, "
                                         "record_length_stdev: *r}\ntrain: {computation_time: 0.1}\n")
    w = dlio_yaml.translate(path).workload
    assert (w.record_bytes, w.record_stdev) == (4096, 4096)


def test_every_value_a_yaml_error_quotes_is_clipped(tmp_path, gdsbench):
    long = "z" * 100_000
    cases = {
        f"dataset: {{format: {long}}}\n": "dataset.format: 'zzz",
        f"{OK_YAML}reader: {{data_loader: {long}}}\n": "reader.data_loader: 'zzz",
        f"dataset:\n  format: tfrecord\n  {'z' * 1000}: 1\n": "dataset.zzz",  # PyYAML's longest plain key
        f"dataset: {{format: tfrecord}}\ntrain: {{epochs: {long}}}\n": "train.epochs 'zzz",
        f"dataset: {{format: tfrecord}}\ntrain: {{computation_time: {long}}}\n": "train.computation_time 'zzz",
        f"reader: {long}\n": "reader: must be a mapping",
        f"model: {{name: {long}}}\n{OK_YAML}": "workload name 'zzz",
        f"dataset: {{format: tfrecord, record_length: 1{'0' * 4000}}}\ntrain: {{computation_time: 1}}\n":
            "dataset.record_length 1000",
    }
    for i, (text, says) in enumerate(cases.items()):
        path = write(tmp_path, f"w{i}.yaml", text)
        r = gdsbench("train", tmp_path, "--workload", path)
        assert_one_line_error(r, f"--workload {path}", says, "…")
        assert len(r.err) < SHORT, r.err[:SHORT]
    huge = write(tmp_path, "huge.yaml", f"dataset: {{num_files_train: 1{'0' * 5000}}}\n")
    assert "more than 4,300 digits" in refused(huge)


@pytest.mark.parametrize("key, value, says", [
    ("record_length", ".nan", "dataset.record_length nan: not a finite number"),
    ("record_length", ".inf", "dataset.record_length inf: not a finite number"),
    ("record_length", "-.inf", "dataset.record_length -inf: not a finite number"),
    ("record_length", "-5.5", "dataset.record_length -5.5: must be a number between 1 B and 64 GiB"),
    ("record_length_stdev", "-1.5", "dataset.record_length_stdev -1.5: must be a number between 0 B"),
    ("record_length_bytes", "1.0e+300", "dataset.record_length_bytes 1e+300: must be a number between"),
    ("num_files_train", ".nan", "dataset.num_files_train nan: not a finite number"),
    ("num_files_train", "-3", "dataset.num_files_train -3: must be between 1"),
])
def test_non_finite_and_negative_numbers_in_a_yaml_are_one_line_naming_the_key(tmp_path, gdsbench, key, value, says):
    path = write(tmp_path, "w.yaml", f"dataset: {{format: tfrecord, {key}: {value}}}\ntrain: {{computation_time: 1}}\n")
    assert_one_line_error(gdsbench("train", tmp_path, "--workload", path), f"--workload {path}: {says}")


def test_a_non_finite_step_cap_is_refused(tmp_path):
    path = write(tmp_path, "w.yaml", f"{OK_YAML[:-2]}, total_training_steps: .nan}}\n")
    assert "train.total_training_steps nan: not a number" in refused(path)


def test_a_key_given_twice_in_a_yaml_is_refused_naming_it_and_its_line(tmp_path, gdsbench):
    path = write(tmp_path, "w.yaml", "dataset:\n  format: tfrecord\n  num_files_train: 3\n  num_files_train: 5\n"
                                     "train: {computation_time: 1}\n")
    assert_one_line_error(gdsbench("train", tmp_path, "--workload", path),
                          f"--workload {path} line 4: dataset.num_files_train is given twice")
    top = write(tmp_path, "top.yaml", f"{OK_YAML}train: {{epochs: 2}}\n")
    assert "line 3: train is given twice" in refused(top)


def test_a_yaml_without_computation_time_is_named_by_its_key_not_by_a_flag(tmp_path, gdsbench):
    path = write(tmp_path, "w.yaml", "dataset: {format: tfrecord}\n")
    r = gdsbench("train", tmp_path, "--workload", path)
    assert_one_line_error(r, f"--workload {path}: train.computation_time: not in the YAML", "must be more than 0",
                          "give --compute-time SECONDS")
    assert "--compute-time 0" not in r.err
    zero = write(tmp_path, "zero.yaml", "dataset: {format: tfrecord}\ntrain: {computation_time: 0}\n")
    assert_one_line_error(gdsbench("train", tmp_path, "--workload", zero),
                          f"--workload {zero}: train.computation_time 0: must be more than 0")
    # a flag the user gave is named as the flag
    assert_one_line_error(gdsbench("train", tmp_path, "--workload", zero, "--compute-time", "0"),
                          "--compute-time 0: must be more than 0")
    many = write(tmp_path, "many.yaml", "dataset: {format: tfrecord, num_files_train: 10000, "
                                        "num_samples_per_file: 10000}\ntrain: {computation_time: 1}\n")
    assert_one_line_error(gdsbench("train", tmp_path, "--workload", many),
                          "dataset.num_files_train 10000 x dataset.num_samples_per_file 10000")


def test_a_yaml_s_epochs_say_how_they_are_used(tmp_path, gdsbench):
    path = write(tmp_path, "w.yaml", "dataset: {format: tfrecord, num_files_train: 2}\n"
                                     "train: {computation_time: 0.1, epochs: 7}\n")
    r = gdsbench("train", tmp_path / "empty", "--workload", path)
    assert "train.epochs -> --epochs 7 (train runs 7 epochs; --epochs N for another number)" in r.err, r.err
    r = gdsbench("train", tmp_path / "empty", "--workload", path, "--epochs", "2")
    assert "train.epochs -> --epochs 7 (the command line's --epochs instead)" in r.err, r.err
    r = gdsbench("prepare", "--workload", path, tmp_path / "ds", "--dry-run")
    assert r.code == 0, r.err
    assert "-> --epochs" not in r.err and "train.epochs: not used by prepare" in r.err, r.err


# ---- sweep files ----

@pytest.mark.parametrize("text, says", [
    ("qd = [0]\n", "line 1: qd 0: must be at least 1"),
    ('bs = ["abc"]\n', "line 1: bs 'abc': not a size"),
    ('engine = "null"\nruntime = "5x"\n', "line 2: runtime '5x': unknown unit 'x'"),
    ('engine = "null"\nthreads = 0\n', "line 2: threads 0: must be between 1 and 1024"),
    (f'engine = "null"\nbs = ["{"9" * 5000}"]\n', "line 2: bs '999"),
])
def test_a_sweep_file_s_errors_name_its_keys_not_flags(tmp_path, gdsbench, text, says):
    path = write(tmp_path, "s.toml", text)
    r = gdsbench("sweep", "--file", path, "--results", tmp_path / "results")
    assert_one_line_error(r, f"{path} {says}")
    assert " --" not in r.err and len(r.err) < SHORT, r.err


def test_a_sweep_file_s_skipped_points_name_its_keys_and_the_command_line_s_flags(tmp_path, gdsbench, pattern_file):
    path = write(tmp_path, "s.toml", 'engine = "psync"\nqd = [4]\n')
    r = gdsbench("sweep", pattern_file, "--file", path, "--results", tmp_path / "results")
    assert_one_line_error(r, "(qd 4: the psync engine is synchronous (queue depth 1); use engine io_uring")
    r = gdsbench("sweep", pattern_file, "--file", path, "--qd", "4", "--results", tmp_path / "results")
    assert_one_line_error(r, "(--qd 4: the psync engine is synchronous (queue depth 1); use engine io_uring")


def test_a_sweep_file_nested_too_deeply_or_with_a_huge_number_is_one_line(tmp_path, gdsbench):
    for text, says in (("bs = " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
                       (f"qd = [1{'0' * 5000}]\n", "more than 4,300 digits")):
        path = write(tmp_path, "s.toml", text)
        r = gdsbench("sweep", "--file", path, "--engine", "null", "--results", tmp_path / "results")
        assert_one_line_error(r, str(path), says)
        assert len(r.err) < SHORT, r.err[:SHORT]


# ---- sweep --resume ----

def test_resume_with_an_empty_run_id_is_refused(tmp_path, gdsbench, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = gdsbench("sweep", "--resume", "", "--results", tmp_path / "results")
    assert_one_line_error(r, "--resume: give the id of the run to finish")
    assert not os.path.exists(tmp_path / "results")  # no new sweep, no scratch file


# ---- fio job files ----

def fio(tmp_path, text: str | bytes, name: str = "j.fio") -> str:
    return write(tmp_path, name, text)


@pytest.mark.parametrize("line, says", [
    ("numjobs=abc", "numjobs 'abc': not a whole number"),
    ("numjobs=0", "numjobs 0: must be between 1"),
    ("numjobs=2*$ncpus", "numjobs '2*"),
    ("iodepth=abc", "iodepth 'abc': not a whole number"),
    ("runtime=soon", "runtime 'soon': not a duration"),
    ("fsync=x", "fsync 'x': not a whole number"),
    ("bs=0", "bs 0 B: must be between 1 byte"),
    ("bs=4k-16k", "bs=4k-16k: a range, list or split of sizes"),
    ("bs=lots", "bs=lots: not a size"),
])
def test_an_fio_value_gdsbench_cannot_read_is_one_line_naming_the_fio_option(tmp_path, gdsbench, line, says):
    job = fio(tmp_path, f"[j]\nrw=read\n{line}\n")
    r = gdsbench("run", "--fio-job", job, "--engine", "null")
    assert_one_line_error(r, f"--fio-job {job}", says)
    assert "--threads" not in r.err and "--qd" not in r.err


def test_fio_s_keywords_are_its_system_values(tmp_path):
    t = fio_job.translate(fio(tmp_path, "[j]\nrw=read\nnumjobs=$ncpus\nbs=$pagesize\n"))
    cpus, page = os.sysconf("SC_NPROCESSORS_ONLN"), os.sysconf("SC_PAGE_SIZE")
    assert t.flags == ["--rw", "read", "--threads", str(cpus), "--bs", str(page)]
    assert f"numjobs=$ncpus: $ncpus is {cpus} here" in " ".join(t.notes)


def test_fio_s_fadvise_hint_is_asked_for_by_name(tmp_path):
    assert fio_job.translate(fio(tmp_path, "[j]\nrw=read\nfadvise_hint=1\n")).flags == ["--rw", "read", "--fadvise-hint"]
    assert "fadvise_hint=0 -> no advice" in " ".join(fio_job.translate(fio(tmp_path, "[j]\nfadvise_hint=0\n")).mapped)
    with pytest.raises(UsageError, match="fadvise_hint"):
        fio_job.translate(fio(tmp_path, "[j]\nrw=read\nfadvise_hint=noreuse\n"))
    # a buffered job without it gets fio's default, said as such; an O_DIRECT one no advice
    buffered = fio_job.translate(fio(tmp_path, "[j]\nrw=read\ndirect=0\n"))
    assert buffered.flags == ["--rw", "read", "--buffered", "--fadvise-hint"]
    assert "fadvise_hint (not given: fio's default, 1) -> --fadvise-hint" in buffered.mapped
    assert fio_job.translate(fio(tmp_path, "[j]\nrw=read\ndirect=1\n")).flags == ["--rw", "read", "--direct"]
    null = fio_job.translate(fio(tmp_path, "[j]\nrw=read\nioengine=null\ndirect=0\n"))
    assert "--fadvise-hint" not in null.flags  # an engine that opens no file takes no advice


def test_fio_s_uncached_is_the_job_s_uncached(tmp_path):
    t = fio_job.translate(fio(tmp_path, "[j]\nrw=write\nioengine=pvsync2\nuncached=1\n"))
    assert t.flags == ["--rw", "write", "--engine", "psync", "--uncached"]
    assert "uncached=0 -> off, as by default" in fio_job.translate(fio(tmp_path, "[j]\nrw=read\nuncached=0\n")).mapped


def test_fio_s_io_uring_options_are_io_uring_s_own(tmp_path):
    t = fio_job.translate(fio(tmp_path, "[j]\nrw=read\nioengine=io_uring\nfixedbufs\nregisterfiles=1\nhipri=0\n"
                                        "sqthread_poll=1\nsqthread_poll_cpu=1\niodepth=8\niodepth_batch_submit=4\n"
                                        "iodepth_batch_complete_min=2\n"))
    assert t.flags == ["--rw", "read", "--engine", "io_uring", "--fixedbufs", "--registerfiles", "--sqthread-poll",
                       "--sqthread-poll-cpu", "1", "--qd", "8", "--submit-batch", "4", "--complete-batch", "2"]
    assert "hipri=0 -> off, as by default" in t.mapped
    with pytest.raises(UsageError, match="iodepth_batch_complete_min 0: must be between 1"):
        fio_job.translate(fio(tmp_path, "[j]\nrw=read\niodepth_batch_complete_min=0\n"))


def test_fio_verify_0_and_null_are_off(tmp_path):
    for off in ("0", "null"):
        t = fio_job.translate(fio(tmp_path, f"[j]\nrw=read\nverify={off}\n"))
        assert "--verify" not in t.flags and any(m.startswith(f"verify={off} -> no verification") for m in t.mapped)
    assert "--verify" in fio_job.translate(fio(tmp_path, "[j]\nrw=read\nverify=md5\n")).flags


def test_fio_directory_without_filename_is_fio_s_file_in_it(tmp_path, gdsbench, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "d"
    folder.mkdir()
    job = fio(tmp_path, f"[seq]\nrw=read\ndirectory={folder}\n")
    assert fio_job.translate(job).path == str(folder / "seq.0.0")
    r = gdsbench("run", "--fio-job", job)
    assert r.code == 2 and str(folder / "seq.0.0") in r.err and "does not exist" in r.err, r.err
    assert not os.path.exists(tmp_path / "results")  # no scratch file written instead
    assert fio_job.translate(fio(tmp_path, f"[j]\ndirectory={folder}\nfilename=x\n")).path == str(folder / "x")
    with pytest.raises(UsageError, match="directory=a:b: several directories"):
        fio_job.translate(fio(tmp_path, "[j]\nrw=read\ndirectory=a:b\n"))


def test_an_fio_file_with_a_byte_order_mark_or_indented_lines_is_read_as_fio_reads_it(tmp_path):
    t = fio_job.translate(fio(tmp_path, b"\xef\xbb\xbf[j]\nrw=randread\nfilename=x\n"))
    assert t.flags == ["--rw", "randread"] and t.path == "x"
    t = fio_job.translate(fio(tmp_path, "[j]\r\n  rw=read\r\n\tbs=8k\r\n"))  # fio strips each line: no continuation
    assert t.flags == ["--rw", "read", "--bs", "8K"]
    t = fio_job.translate(fio(tmp_path, "[j]\nrw=read  # sequential\nruntime=3600 ; an hour\n"))  # fio cuts comments
    assert t.flags == ["--rw", "read", "--runtime", "3600s"]


def test_fio_environment_variables_are_expanded_and_an_unset_one_is_refused(tmp_path, monkeypatch, gdsbench):
    monkeypatch.setenv("GDSBENCH_TEST_BS", "8k")
    t = fio_job.translate(fio(tmp_path, "[j]\nrw=read\nbs=${GDSBENCH_TEST_BS}\n"))
    assert "--bs" in t.flags and t.flags[t.flags.index("--bs") + 1] == "8K"
    assert any("${GDSBENCH_TEST_BS} is 8k" in note for note in t.notes)
    monkeypatch.delenv("GDSBENCH_TEST_BS")
    job = fio(tmp_path, "[j]\nrw=read\nbs=${GDSBENCH_TEST_BS}\n", "unset.fio")
    assert_one_line_error(gdsbench("run", "--fio-job", job, "--engine", "null"),
                          f"--fio-job {job} line 3: ${{GDSBENCH_TEST_BS}} is not set")
    # where the value is not used, empty as fio reads it, and said
    t = fio_job.translate(fio(tmp_path, "[j]\nrw=read\ndescription=${GDSBENCH_TEST_BS}\n", "noted.fio"))
    assert "line 3: ${GDSBENCH_TEST_BS} is not set: description read as empty, as fio reads it" in t.notes


def test_an_fio_include_is_refused_naming_its_line(tmp_path, gdsbench):
    fio(tmp_path, "[global]\nbs=4k\n", "other.fio")
    for text, line in (("include other.fio\n[j]\nrw=read\n", 1), ("[j]\nrw=read\ninclude other.fio\n", 3)):
        job = fio(tmp_path, text)
        assert_one_line_error(gdsbench("run", "--fio-job", job, "--engine", "null"),
                              f"--fio-job {job} line {line}: include other.fio: gdsbench does not read fio's included")


def test_an_fio_value_or_job_list_quoted_in_an_error_is_clipped(tmp_path):
    for text in (f"[j]\nrw={'r' * 100_000}\n", f"[j]\nioengine={'e' * 100_000}\n",
                 "".join(f"[job{i}]\nrw=read\n" for i in range(5000))):
        with pytest.raises(UsageError) as e:
            fio_job.translate(fio(tmp_path, text))
        assert len(str(e.value)) < SHORT and "…" in str(e.value), str(e.value)[:SHORT]
