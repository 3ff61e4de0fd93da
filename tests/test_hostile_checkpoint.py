"""checkpoint and train as a hostile user meets them (issue 35): two checkpoint runs into one
directory, a file another program rewrote under a checkpoint's name, --engine null, a stranger's
folder found after checkpoint 1 was written, a full /dev/shm under train, a dataset of fewer
files than its workload, and the checkpoint page's chart and table."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from conftest import is_root, wait_until
from test_bad_input import assert_one_line_error

from gdsbench.checkpoint import session
from gdsbench.checkpoint.on_disk import MANIFEST, read_manifest

SMALL = ("--model", "llama3-8b", "--dp", "2", "--layers", "1", "--vocab", "1024", "--scale", "0.01")
FILE = "zero_pp_rank_1_mp_rank_0_optim_states.pt"  # one of rank 1's files in SMALL's layout


def _checkpoint(gdsbench, ck, results, *extra):
    return gdsbench("checkpoint", ck, *SMALL, "--checkpoints", "1", "--results", results, *extra)


def test_a_second_checkpoint_into_the_same_directory_is_refused_naming_the_first(gdsbench, tmp_path):
    """The first run is held part-way through checkpoint 1 (rank 1 starts 5 s late, a test hook,
    and the parent is stopped): the second is refused in one line naming DIR and the first's pid
    and run, before it makes a run folder or touches a checkpoint; the first then ends whole."""
    ck = tmp_path / "ck"
    env = dict(os.environ, **{session.LATE_RANK: "1:5"})
    first = subprocess.Popen([sys.executable, "-m", "gdsbench", "checkpoint", str(ck), *SMALL, "--checkpoints", "1",
                              "--results", str(tmp_path / "res1"), "--json"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (ck / "global_epoch1_step1" / MANIFEST).exists() or first.poll() is not None,
                   "the first run's checkpoint 1 begun")
        first.send_signal(signal.SIGSTOP)  # it holds the directory, its checkpoint 1 INCOMPLETE
        assert read_manifest(str(ck / "global_epoch1_step1"))["complete"] is False
        second = _checkpoint(gdsbench, ck, tmp_path / "res2")
        assert_one_line_error(second, f"DIR {ck}", f"pid {first.pid}", "res1")
        assert not (tmp_path / "res2").exists() and (ck / "global_epoch1_step1" / MANIFEST).exists()
    finally:
        first.send_signal(signal.SIGCONT)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert [(r["phase"], r["checkpoint"], r["verify_mismatches"]) for r in json.loads(out)] == [
        ("write", 1, 0), ("read", 1, 0)]
    assert _checkpoint(gdsbench, ck, tmp_path / "res3").code == 0  # the lock went with the first run


@pytest.mark.parametrize("how", ["renamed over it", "rewritten in place", "another size"])
def test_a_file_another_program_rewrote_under_a_checkpoint_s_name_is_left_and_named(gdsbench, tmp_path, how):
    """A complete checkpoint's manifest records each file's size, inode and modification time: a
    file that differs in any is not gdsbench's, and its folder is left whole, the file named."""
    ck = tmp_path / "ck"
    assert _checkpoint(gdsbench, ck, tmp_path / "res").code == 0
    folder = ck / "global_epoch1_step1"
    path = folder / FILE
    size = path.stat().st_size
    theirs = b"PK\x03\x04" + b"t" * (size - 4)  # a torch.save of the same size
    if how == "renamed over it":
        (folder / "new").write_bytes(theirs)
        os.rename(folder / "new", path)
    elif how == "rewritten in place":
        with open(path, "r+b") as f:
            f.write(theirs)
    else:
        path.write_bytes(b"theirs")
    before = sorted(os.listdir(folder))
    res = _checkpoint(gdsbench, ck, tmp_path / "res")
    assert_one_line_error(res, str(path), "left")
    assert sorted(os.listdir(folder)) == before and path.read_bytes()[:6] in (b"theirs", theirs[:6])


def test_a_foreign_file_in_an_incomplete_checkpoint_is_left_and_named(gdsbench, tmp_path):
    """An incomplete checkpoint (a rank failed part-way) has no record of its files yet: each must
    still be its size in the manifest and start with gdsbench's pattern, or a hole not yet written."""
    ck = tmp_path / "ck"
    res = _checkpoint(gdsbench, ck, tmp_path / "res", "--mode", "bounce", "--gpu-backend", "sim:fail-copy=3")
    assert res.code != 0 and read_manifest(str(ck / "global_epoch1_step1"))["complete"] is False
    made = sorted((ck / "global_epoch1_step1").glob("*.pt"))  # those begun before the failure
    path = made[-1]  # the last checked: gdsbench's own part-written ones before it pass
    size = path.stat().st_size
    path.write_bytes(b"PK\x03\x04" + b"t" * (size - 4))
    assert_one_line_error(_checkpoint(gdsbench, ck, tmp_path / "res"), str(path), "left")
    assert path.read_bytes()[:4] == b"PK\x03\x04"


def test_a_stranger_s_folder_for_a_later_checkpoint_is_refused_before_checkpoint_1_is_written(gdsbench, tmp_path):
    ck = tmp_path / "ck"
    stranger = ck / "global_epoch1_step2" / "notes.txt"
    stranger.parent.mkdir(parents=True)
    stranger.write_text("mine")
    res = gdsbench("checkpoint", ck, *SMALL, "--checkpoints", "2", "--results", tmp_path / "res")
    assert_one_line_error(res, "global_epoch1_step2", "not a checkpoint gdsbench wrote")
    assert not (ck / "global_epoch1_step1").exists()
    assert not (tmp_path / "res").exists() and stranger.read_text() == "mine"


def test_the_null_engine_is_refused_it_would_time_no_storage(gdsbench, tmp_path):
    res = _checkpoint(gdsbench, tmp_path / "ck", tmp_path / "res", "--engine", "null")
    assert_one_line_error(res, "--engine null")
    assert not (tmp_path / "ck").exists() and not (tmp_path / "res").exists()


# ---- train ----

TRAIN = ["--workload", "unet3d", "--record-bytes", "64K", "--record-stdev", "16K", "--batch", "2", "--read-threads",
         "2", "--compute-time", "5ms"]


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory):
    """40 samples of about 64 KiB (unet3d's shape has 168 files)."""
    from gdsbench import cli

    path = str(tmp_path_factory.mktemp("hostile") / "ds")
    assert cli.main(["prepare", path, "--files", "40", *TRAIN]) == 0
    return path


@pytest.fixture
def full_tmpfs(tmp_path):
    """A small tmpfs, filled."""
    if not is_root():
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "shm"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "none", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount tmpfs here")
    try:
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\1" * 4096):
                pass
        except OSError:  # ENOSPC: full
            pass
        finally:
            os.close(fd)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_shared_memory_folder_is_one_line_before_train_runs(gdsbench, small_dataset, full_tmpfs, tmp_path,
                                                                     monkeypatch):
    """The step barrier's file is allocated when made (posix_fallocate): a full /dev/shm (here a full
    tmpfs in its place) is one line naming it, not a SIGBUS later, and no run folder is left."""
    from gdsbench.train import accelerators

    monkeypatch.setattr(accelerators, "SHARED_MEMORY", str(full_tmpfs), raising=False)
    res = gdsbench("train", small_dataset, *TRAIN, "--files", "40", "--accelerators", "2", "--results", tmp_path / "res")
    assert_one_line_error(res, str(full_tmpfs), "full")
    assert not (tmp_path / "res").exists()
    assert [f for f in os.listdir(full_tmpfs) if f != "filler"] == []


def test_a_dataset_of_fewer_files_than_its_workload_is_said_once(gdsbench, small_dataset, tmp_path):
    res = gdsbench("train", small_dataset, *TRAIN, "--results", tmp_path / "res")
    assert res.code == 0, res.err
    said = [line for line in res.err.splitlines() if "168" in line]  # unet3d's files
    assert len(said) == 1, res.err
    assert "was prepared with --files 40 (the workload's: 168): steps come from the dataset's 40 samples" in said[0]


# ---- the checkpoint page ----

def test_the_checkpoint_page_fits_its_chart_subtitle_and_names_every_column(gdsbench, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from gdsbench.reporting import checkpoint_report

    assert _checkpoint(gdsbench, tmp_path / "ck", tmp_path / "res", "--json").code == 0
    (run,) = (tmp_path / "res").iterdir()
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    page = checkpoint_report.build(str(run), str(tmp_path / "page")).html_path
    (fig,) = figures
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        box = ax.title.get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= fig.bbox.width, (box, ax.get_title())
    plt.close(fig)
    html = open(page).read()
    table = html.split("<h2>Every checkpoint</h2>")[1].split("</table>")[0]
    header = re.findall(r"<th>(.*?)</th>", table)
    assert all(header) and len(set(header)) == len(header), header
    first_row = re.findall(r"<tr>(.*?)</tr>", table)[1]
    assert len(re.findall(r"<td>", first_row)) == len(header)
