"""Every bad input: one line on stderr naming the parameter and the fix,
a non-zero exit, no traceback."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import is_root

from gdsbench import cli


def assert_one_line_error(res, *fragments, code=2):
    assert res.code == code, (res.code, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    assert lines[0].startswith("gdsbench: error: ")
    assert "Traceback" not in res.err
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def test_missing_path(gdsbench, tmp_path):
    assert_one_line_error(gdsbench("run", tmp_path / "nope.dat"), "does not exist", "gdsbench prepare")


@pytest.mark.parametrize("extra, size", [([], "1G"), (["--size", "512M", "--offset", "1G"], "2G"),
                                         (["--size", "10G"], "10G")])
def test_a_missing_file_s_hint_makes_one_the_job_fits(gdsbench, tmp_path, extra, size):
    """The prepare the error suggests makes a file the same command can then run on."""
    path = tmp_path / "nope.dat"
    assert_one_line_error(gdsbench("run", path, *extra), f"`gdsbench prepare {path} --size {size}`")


def test_directory(gdsbench, tmp_path):
    assert_one_line_error(gdsbench("run", tmp_path), "is a directory")


def test_file_shorter_than_one_block(gdsbench, tmp_path):
    small = tmp_path / "small.dat"
    small.write_bytes(b"x" * 4096)
    assert_one_line_error(gdsbench("run", small, "--bs", "1M", "--buffered"), "--bs", "larger than the region")


def test_block_size_zero(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--bs", "0"), "--bs 0", "between 1 byte")


def test_block_size_misaligned_for_direct(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--bs", "1000", "--direct"), "--bs 1000", "logical block size",
                          "--buffered")


def test_offset_misaligned_for_direct(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--bs", "4K", "--offset", "100"), "--offset 100", "logical block size")


@pytest.fixture
def ramfs_dir(tmp_path):
    """A ramfs mount, which refuses O_DIRECT. (tmpfs accepts O_DIRECT since Linux 6.6.)"""
    mnt = tmp_path / "ramfs"
    mnt.mkdir()
    if not is_root() or shutil.which("mount") is None:
        pytest.skip("mounting ramfs needs root")
    if subprocess.run(["mount", "-t", "ramfs", "none", str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount ramfs here (container without CAP_SYS_ADMIN?)")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_direct_on_a_filesystem_that_refuses_it(gdsbench, ramfs_dir):
    f = ramfs_dir / "data.dat"
    f.write_bytes(b"\0" * 65536)
    assert_one_line_error(gdsbench("run", f, "--bs", "4K", "--direct"), "--direct", "ramfs", "refuses O_DIRECT", "--buffered")


def test_checkpoint_direct_on_a_filesystem_that_refuses_it(gdsbench, ramfs_dir, tmp_path):
    """Refused before anything is written, in run's words, naming DIR (not a rank's failed open)."""
    ck = ramfs_dir / "ck"
    res = gdsbench("checkpoint", ck, "--model", "llama3-8b", "--dp", "2", "--layers", "1", "--vocab", "1024", "--scale",
                   "0.01", "--checkpoints", "1", "--direct", "--results", tmp_path / "res")
    assert_one_line_error(res, "--direct", "ramfs", "refuses O_DIRECT", f"DIR {ck}", "--buffered")
    assert [p.name for p in ck.iterdir()] == [".gdsbench-checkpoint-lock"]  # no checkpoint folder was made


@pytest.mark.parametrize("qd, fragment", [("0", "at least 1"), ("40000", "from 1 to 32768")])
def test_queue_depth_out_of_range(gdsbench, pattern_file, qd, fragment):
    assert_one_line_error(gdsbench("run", pattern_file, "--engine", "io_uring", "--qd", qd), "--qd", fragment)


def test_psync_with_queue_depth(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--engine", "psync", "--qd", "8"), "--qd 8", "psync", "--threads")


def test_too_many_threads(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--threads", "5000"), "--threads 5000", "between 1 and")


def test_buffers_larger_than_memory(gdsbench, pattern_file):
    res = gdsbench("run", pattern_file, "--engine", "io_uring", "--threads", "1000", "--qd", "1000", "--bs", "1G")
    assert_one_line_error(res, "--threads x --qd x --bs", "memory available")


def test_runtime_zero(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--runtime", "0"), "--runtime", "positive")


def test_unknown_engine(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--engine", "libaio"), "--engine", "libaio")


def test_bad_unit(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--bs", "4X"), "--bs '4X'", "unknown unit")


def test_unknown_flag(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--iodepth", "4"), "--iodepth")


def test_verify_without_pattern(gdsbench, tmp_path):
    f = tmp_path / "plain.dat"
    f.write_bytes(b"\0" * 65536)
    assert_one_line_error(gdsbench("run", f, "--bs", "4K", "--verify"), "--verify", "gdsbench prepare")


def test_not_a_regular_file(gdsbench):
    assert_one_line_error(gdsbench("run", "/dev/null", "--bs", "4K"), "/dev/null", "not a regular file or block device")


def test_unreadable_file(tmp_path):
    """A file this user may not read. Root reads everything, so as root the
    check runs in a forked child that has dropped to user nobody."""
    f = tmp_path / "secret.dat"
    f.write_bytes(b"\0" * 65536)
    os.chmod(f, 0o600 if is_root() else 0o000)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: become nobody, run the CLI, report through the pipe
        try:
            if is_root():
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            sys.stderr = os.fdopen(write_end, "w")
            code = cli.main(["run", str(f), "--bs", "4K", "--buffered"])
            sys.stderr.flush()
        finally:
            os._exit(locals().get("code", 99))
    os.close(write_end)
    err = os.fdopen(read_end).read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2, err
    assert err.count("\n") == 1 and "permission denied" in err


def test_real_process_exit_code_and_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gdsbench", "run", str(tmp_path / "missing")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("gdsbench: error: PATH ") and proc.stderr.count("\n") == 1
    assert proc.stdout == ""


# ---- train, predict and prepare --workload: every bad input one line, before anything is written ----

TRAIN = ["--workload", "unet3d", "--record-bytes", "64K", "--record-stdev", "16K", "--batch", "2", "--read-threads",
         "2", "--compute-time", "5ms"]


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    """40 samples of about 64 KiB, written by `gdsbench prepare --workload`."""
    path = str(tmp_path_factory.mktemp("bad") / "ds")
    assert cli.main(["prepare", path, "--files", "40", *TRAIN]) == 0
    return path


@pytest.mark.parametrize("command, extra, fragments", [
    ("predict", ["--probe-seconds", "nan"], ["--probe-seconds", "nan"]),
    ("predict", ["--probe-seconds", "inf"], ["--probe-seconds"]),
    ("predict", ["--probe-seconds", "0"], ["--probe-seconds", "more than 0"]),
    ("train", ["--predict", "--probe-seconds", "0"], ["--probe-seconds", "more than 0"]),
    ("predict", ["--compute-time", "0"], ["--compute-time 0", "more than 0"]),
    ("train", ["--compute-time", "999999999999h"], ["--compute-time", "between"]),
    ("predict", ["--steps=-3"], ["--steps", "-3"]),
    ("predict", ["--also", "0"], ["--also 0"]),
    ("train", ["--transfer-size", "1T"], ["--transfer-size 1 TiB", "between"]),
    ("train", ["--engine", "null", "--verify"], ["--verify", "null engine reads nothing"]),
    ("train", ["--gds-register"], ["--gds-register", "--mode gds"]),
    ("train", ["--retries", "2"], ["--retries is an option of the curl engine", "local file", "drop it"]),
    ("run", ["--http2"], ["--http2 is an option of the curl engine", "local file with io_uring", "drop it"]),
    ("run", ["--timeout", "5s"], ["--timeout is an option of the curl engine"]),
    ("run", ["--rw", "randread", "--pattern", "seq"], ["--pattern seq with --rw randread", "use --rw read"]),
    ("run", ["--ramp", "-1s"], ["--ramp '-1s': not a duration"]),  # a value, not an unknown flag
    ("train", ["--au", "nan"], ["--au", "finite"]),
    ("run", ["--mode", "bounce", "--gpu-backend", "sim:bogus=1"], ["--gpu-backend sim:bogus=1"]),
])
def test_train_and_predict_refuse_in_one_line_before_anything_is_written(gdsbench, small_set, tmp_path, command, extra,
                                                                         fragments):
    results = tmp_path / "results"
    args = [small_set, *TRAIN, *extra, "--results", results] if command == "train" else \
        [small_set, *TRAIN, *extra] if command == "predict" else [small_set + "/unet3d_00.dat", *extra]
    assert_one_line_error(gdsbench(command, *args), *fragments)
    assert not results.exists()  # no run folder for a run that cannot start


@pytest.mark.parametrize("toml, fragments", [
    ('base = "unet3d"\nseed = 18446744073709551616\n', ["--seed", "between"]),
    ('base = "unet3d"\nfiles = 100000000000000000000\n', ["--files", "between"]),
    ('base = "resnet50"\nfiles = 20000\n', ["25,020,000 samples", "fewer files"]),
    ('base = "unet3d"\nname = "../escaped"\n', ["workload name '../escaped'", "letters, digits"]),
    ('base = "unet3d"\nname = "/tmp/absolute"\n', ["workload name '/tmp/absolute'"]),
    ('base = "unet3d"\nname = ""\n', ["workload name ''"]),
])
def test_a_workload_file_out_of_bounds_is_one_line_and_writes_nothing(gdsbench, tmp_path, toml, fragments):
    (tmp_path / "wl.toml").write_text(toml)
    folder = tmp_path / "sets" / "ds"
    assert_one_line_error(gdsbench("prepare", "--workload", tmp_path / "wl.toml", folder), *fragments)
    assert not (tmp_path / "sets").exists() and not (tmp_path / "escaped_0.dat").exists()


@pytest.mark.parametrize("target, fragments", [
    ("a file", ["not a directory"]),
    ("/dev/null", ["not a directory"]),
    ("/proc/gdsbench-x", ["cannot create"]),
])
def test_prepare_workload_where_no_dataset_can_be_is_one_line(gdsbench, tmp_path, target, fragments):
    if target == "a file":
        target = tmp_path / "afile"
        target.write_bytes(b"x")
    assert_one_line_error(gdsbench("prepare", "--workload", "unet3d", target, "--files", "2", "--record-bytes", "64K"),
                          *fragments)


@pytest.mark.parametrize("damage", ['"files": []', '"no_workload": 1', '"files": [["a.dat", ["x"]]]',
                                    '"files": [["a.dat"]]', '"files": [["../../etc/passwd", [4096]]]'])
def test_a_hand_damaged_manifest_is_one_line(gdsbench, tmp_path, damage):
    folder = tmp_path / "ds"
    folder.mkdir()
    workload = '"workload": {"name": "unet3d"}' if "no_workload" not in damage else '"other": 1'
    files = damage if damage.startswith('"files"') else '"files": [["a.dat", [4096]]]'
    (folder / "gdsbench-dataset.json").write_text("{" + workload + ", " + files + "}")
    assert_one_line_error(gdsbench("train", folder, *TRAIN), "not a gdsbench dataset manifest", "prepare the dataset")


def test_a_train_run_is_refused_by_compare_and_sweep_resume(gdsbench, small_set, tmp_path):
    assert gdsbench("train", small_set, *TRAIN, "--results", tmp_path, "--name", "t").code == 0
    run = next(p for p in tmp_path.iterdir() if p.name.endswith("-t"))
    assert_one_line_error(gdsbench("compare", run, run), "a train run", "compare takes sweep runs")
    assert_one_line_error(gdsbench("sweep", "--resume", run), "a train run", "sweep --resume takes sweep runs")


def test_train_on_a_file_suggests_a_command_that_works(gdsbench, tmp_path):
    afile = tmp_path / "afile"
    afile.write_bytes(b"x")
    assert_one_line_error(gdsbench("train", afile, *TRAIN), "not a directory", "prepare --workload unet3d NEW_DIR")


def test_metrics_replace_only_gdsbench_s_own_and_are_checked_before_the_run(gdsbench, pattern_file, tmp_path):
    """--metrics over a stranger's file, or where it cannot be written, is refused before the run
    (nothing measured is lost to it, and the file is left as it was); over its own, replaced."""
    stranger = tmp_path / "node.prom"
    stranger.write_text("node_custom_metric 1\n")
    job = [pattern_file, "--bs", "64K", "--io-size", "1M", "--json"]
    r = gdsbench("run", *job, "--metrics", stranger)
    assert_one_line_error(r, "--metrics", "is not metrics gdsbench wrote")
    assert r.out == "" and stranger.read_text() == "node_custom_metric 1\n"
    assert_one_line_error(gdsbench("run", *job, "--metrics", tmp_path / "missing" / "g.prom"), "does not exist")
    ours = tmp_path / "g.prom"
    for _ in range(2):
        assert gdsbench("run", *job, "--metrics", ours).code == 0
    assert ours.read_text().startswith("# HELP gdsbench_")



def test_a_dataset_that_cannot_be_made_is_refused_before_it_says_writing(gdsbench):
    r = gdsbench("prepare", "--workload", "unet3d", "/proc/gdsbench-x")
    assert_one_line_error(r, "PATH /proc/gdsbench-x: cannot create the directory")
    assert r.out == ""


def test_a_dataset_of_empty_files_is_said_so(gdsbench, tmp_path):
    for name in ("a.npz", "b.npz"):
        (tmp_path / name).touch()
    assert_one_line_error(gdsbench("train", tmp_path, "--workload", "unet3d"), "only empty files (2) in it")
