"""Runs through the native engines: data read is the file's, counts add up,
stop conditions hold, the page cache is handled as documented."""

import os
import shutil
import signal
import tempfile
import threading
import time

import pytest
from conftest import device_read_bytes, needs_uncached, wait_for_workers, wait_until
from test_bad_input import assert_one_line_error

from gdsbench import JobSpec, VerifyFailure, _native, run
from gdsbench._native import PATTERN_BLOCK
from gdsbench.job.errors import IncompatibleOptions
from gdsbench.system.pagecache import cached_fraction, evict
from gdsbench.system.prepare import prepare
from gdsbench.system.storage import find_mount

MiB = 1024 * 1024
ENGINES = ["psync", "io_uring"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("pattern", ["seq", "rand"])
@pytest.mark.parametrize("direct", [True, False])
def test_every_block_read_matches_the_file(pattern_file, engine, pattern, direct):
    size = os.path.getsize(pattern_file)
    qd = 1 if engine == "psync" else 8
    spec = JobSpec(path=pattern_file, engine=engine, bs=64 * 1024, qd=qd, threads=2, pattern=pattern,
                   direct=direct, verify=True, io_size=size)
    r = run(spec)
    # one full pass: every 4 KiB block of the file read once, each carrying its own offset and checksum
    assert r.bytes == size and r.ops == size // (64 * 1024)
    assert r.verified_blocks == size // PATTERN_BLOCK
    assert r.verify_mismatches == 0
    assert r.passes == 1


@pytest.mark.parametrize("engine", ENGINES)
def test_planted_corruption_is_found(own_pattern_file, engine):
    bad_offset = 3 * 4096 * 17 + 100  # inside block 51
    with open(own_pattern_file, "r+b") as f:
        f.seek(bad_offset)
        byte = f.read(1)
        f.seek(bad_offset)
        f.write(bytes([byte[0] ^ 0x01]))
    spec = JobSpec(path=own_pattern_file, engine=engine, bs=128 * 1024, verify=True, io_size=4 * MiB, direct=False)
    with pytest.raises(VerifyFailure, match="1 blocks read did not match") as failed:
        run(spec)
    r = failed.value.result  # the measurement comes with the error
    assert r.verify_mismatches == 1
    assert r.first_mismatch_offset == bad_offset // 4096 * 4096


def test_misplaced_block_is_found(own_pattern_file):
    """A correct block at the wrong offset (a misdirected read or write) fails the check."""
    with open(own_pattern_file, "r+b") as f:
        block0 = f.read(4096)
        f.seek(8 * 4096)
        f.write(block0)
    with pytest.raises(VerifyFailure) as failed:
        run(JobSpec(path=own_pattern_file, engine="psync", bs=4096, verify=True, io_size=4 * MiB))
    r = failed.value.result
    assert r.verify_mismatches == 1 and r.first_mismatch_offset == 8 * 4096


def test_counts_add_up(pattern_file):
    r = run(JobSpec(path=pattern_file, engine="io_uring", bs=4096, qd=4, threads=3, pattern="rand", io_size=3 * MiB))
    assert r.bytes == 3 * MiB and r.ops == 3 * MiB // 4096
    assert r.latency.count == r.ops
    assert sum(r.timeline_bytes) == r.bytes
    assert sum(t["bytes"] for t in r.threads) == r.bytes
    assert r.elapsed_ns > 0 and r.bandwidth == pytest.approx(r.bytes / (r.elapsed_ns / 1e9))
    assert 0 < r.latency.min <= r.percentile(50) <= r.percentile(99) <= r.latency.max


def test_runtime_stops_the_run_and_loops_over_the_region(pattern_file):
    r = run(JobSpec(path=pattern_file, engine="null", bs=4096, runtime_ns=300_000_000))
    # the deadline ended it: not a Ctrl-C, not the end of the region (null wraps around its slice
    # many times, and there is no byte budget), and not before the runtime had passed
    assert not r.interrupted and r.passes > 1 and r.wall_ns >= 300_000_000 and r.ops > 0
    # nor at a later deadline: the runtime read in the wrong unit (us: 300 s) would pass 30 s,
    # which a loaded machine does not take by accident (how close to 300 ms it ends is its speed)
    assert r.wall_ns < 30_000_000_000
    assert len(r.timeline_bytes) == r.elapsed_ns // 100_000_000 + 1  # 100 ms intervals cover the window


def test_ramp_is_excluded(pattern_file):
    r = run(JobSpec(path=pattern_file, engine="null", bs=4096, ramp_ns=200_000_000, io_size=4 * MiB))
    assert r.bytes == 4 * MiB  # the byte budget counts only after the ramp
    assert r.wall_ns >= 200_000_000
    assert r.elapsed_ns < r.wall_ns - 150_000_000


def test_cold_run_drops_the_page_cache(pattern_file):
    with open(pattern_file, "rb") as f:  # pull the whole file into the cache
        while f.read(MiB):
            pass
    r = run(JobSpec(path=pattern_file, engine="psync", bs=MiB, direct=True, io_size=MiB))
    assert r.cached_fraction is not None and r.cached_fraction < 0.05


def test_warm_run_keeps_the_page_cache(pattern_file):
    with open(pattern_file, "rb") as f:
        while f.read(MiB):
            pass
    r = run(JobSpec(path=pattern_file, engine="psync", bs=MiB, direct=False, warm=True, io_size=MiB))
    assert r.cached_fraction > 0.95
    assert not any("--warm" in w for w in r.warnings)


def test_buffered_looping_run_warns_it_may_measure_ram(pattern_file):
    r = run(JobSpec(path=pattern_file, engine="psync", bs=MiB, direct=False, runtime_ns=50_000_000))
    assert any("fits in RAM" in w for w in r.warnings)


def ctrl_c_once(under_way=lambda: True) -> threading.Thread:
    """Ctrl-C (SIGINT to this process) from another thread once the run is under way: its native
    worker seen, then under_way() true. The main thread is inside the native run by then, where
    it takes the signal at its next poll, as it takes a Ctrl-C from a terminal."""
    def send():
        wait_for_workers(os.getpid())
        wait_until(under_way, "the run under way")
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def test_ctrl_c_stops_the_run_and_keeps_results():
    runtime = 30_000_000_000
    sender = ctrl_c_once()
    r = run(JobSpec(engine="null", bs=4096, runtime_ns=runtime))
    sender.join()
    # stopped by the Ctrl-C, not by its runtime, and what it measured until then is kept whole
    assert r.interrupted and r.elapsed_ns < runtime
    assert r.latency.count == r.ops and r.bytes == 4096 * r.ops and sum(r.timeline_bytes) == r.bytes


def test_ctrl_c_on_real_reads(pattern_file):
    """Ctrl-C once the reads have reached the disk: those in flight are reaped and counted."""
    runtime = 30_000_000_000
    before = [None]

    def reading() -> bool:
        before[0] = device_read_bytes() if before[0] is None else before[0]
        return device_read_bytes() > before[0]  # O_DIRECT: each read asks the disk

    sender = ctrl_c_once(reading)
    r = run(JobSpec(path=pattern_file, engine="io_uring", qd=16, bs=4096, pattern="rand", runtime_ns=runtime))
    sender.join()
    assert r.interrupted and r.elapsed_ns < runtime and r.ops > 0 and r.latency.count == r.ops


def test_result_json_round_trips(pattern_file):
    import json

    r = run(JobSpec(path=pattern_file, engine="psync", bs=MiB, io_size=4 * MiB))
    d = json.loads(json.dumps(r.to_dict()))
    assert d["bytes"] == 4 * MiB and d["spec"]["engine"] == "psync"
    assert sum(d["latency_histogram"]["count"]) == d["ops"]
    assert d["environment"]["target"]["kind"] == "file"
    assert d["environment"]["host"]["kernel"]
    for key in ("lat_p50_ns", "lat_p90_ns", "lat_p99_ns", "lat_p99.9_ns", "lat_p99.99_ns", "lat_max_ns", "cpu_s_per_gb"):
        assert key in d


def test_submit_batch_reads_the_same_data(pattern_file):
    size = os.path.getsize(pattern_file)
    r = run(JobSpec(path=pattern_file, engine="io_uring", bs=16 * 1024, qd=16, submit_batch=16, pattern="rand",
                    verify=True, io_size=size))
    assert r.bytes == size and r.verified_blocks == size // PATTERN_BLOCK and r.verify_mismatches == 0


@pytest.mark.parametrize("options", [{"fixedbufs": True}, {"registerfiles": True}, {"sqthread_poll": True},
                                     {"sqthread_poll": True, "sqthread_poll_cpu": 0}, {"complete_batch": 8},
                                     {"fixedbufs": True, "registerfiles": True, "submit_batch": 8, "complete_batch": 4}])
def test_io_uring_fast_paths_read_the_same_data(pattern_file, options):
    """fio's io_uring options (registered buffers and file, a polling submission thread, batched
    reaping) change how requests reach the kernel, never what is read: every block checked."""
    size = os.path.getsize(pattern_file)
    for direct in (False, True):
        r = run(JobSpec(path=pattern_file, engine="io_uring", bs=64 * 1024, qd=16, pattern="rand", verify=True,
                        direct=direct, io_size=size, **options))
        assert r.bytes == size and r.verified_blocks == size // PATTERN_BLOCK and r.verify_mismatches == 0
        assert {k: getattr(r.spec, k) for k in options} == options  # recorded as asked


def test_io_uring_fast_paths_write_what_is_read_back(own_pattern_file):
    size = os.path.getsize(own_pattern_file)
    w = run(JobSpec(path=own_pattern_file, engine="io_uring", rw="write", bs=64 * 1024, qd=8, direct=True,
                    io_size=size, fixedbufs=True, registerfiles=True, sqthread_poll=True))
    assert w.bytes == size
    r = run(JobSpec(path=own_pattern_file, engine="io_uring", bs=64 * 1024, qd=8, verify=True, io_size=size))
    assert r.verify_mismatches == 0 and r.verified_blocks == size // PATTERN_BLOCK


def test_hipri_says_why_it_cannot_poll_here(gdsbench, pattern_file):
    """IOPOLL needs O_DIRECT and a device with polled queues: each missing one is a line naming it
    (this machine's disks, virtio and loop, have none; a device that polls is not here to run it on)."""
    assert_one_line_error(gdsbench("run", pattern_file, "--engine", "io_uring", "--hipri", "--buffered",
                                   "--io-size", "1M"), "--hipri: polled completions need O_DIRECT")
    res = gdsbench("run", pattern_file, "--engine", "io_uring", "--hipri", "--direct", "--io-size", "1M")
    if res.code == 0:
        pytest.skip("this machine's disk polls: the refusal cannot be shown here")
    assert_one_line_error(res, "--hipri:", "drop --hipri")


@pytest.mark.parametrize("engine", ENGINES)
def test_uncached_reads_keep_no_pages_and_writes_land(engine, own_pattern_file):
    """fio's uncached=1: buffered I/O whose pages the kernel drops once a read has copied them. The
    file's pages are measured (mincore) before and after, beside a buffered read that keeps them."""
    needs_uncached(own_pattern_file)
    size = os.path.getsize(own_pattern_file)
    w = run(JobSpec(path=own_pattern_file, engine=engine, rw="write", bs=64 * 1024, uncached=True, io_size=size,
                    fsync_end=True))
    assert w.bytes == size and w.spec.uncached and not w.spec.uses_o_direct
    assert w.data_path == f"{engine} uncached page-cache writes from host memory"
    for uncached, most_cached in ((True, 0.25), (False, 1.0)):  # (readahead's last window may stay a moment)
        evict(own_pattern_file, 0, size)
        r = run(JobSpec(path=own_pattern_file, engine=engine, bs=64 * 1024, uncached=uncached, direct=False,
                        verify=True, io_size=size))
        assert r.verify_mismatches == 0 and r.verified_blocks == size // PATTERN_BLOCK  # what was written, read back
        kept = cached_fraction(own_pattern_file, 0, size)
        assert kept <= most_cached and (uncached or kept > 0.9), (uncached, kept)


@pytest.mark.parametrize("engine", ENGINES)
def test_uncached_writes_that_extend_a_file_leave_no_pages(engine, tmp_path):
    """The write side reaching the kernel: writes that extend a new file (as checkpoint's and kvcache's
    do), fsync'd, leave none of their pages cached; buffered ones leave them all. (A write into blocks a
    file already has kept its pages on ext4 under Linux 6.18: docs/running.md.)"""
    from gdsbench.execution.native import to_native

    needs_uncached(tmp_path)
    size = 8 * MiB
    kept = {}
    for uncached in (True, False):
        path = str(tmp_path / f"new-{uncached}.dat")
        open(path, "w").close()
        job = JobSpec(path=path, engine=engine, rw="write", bs=256 * 1024, direct=False, uncached=uncached,
                      fsync_end=True, runtime_ns=0)
        writer = _native.SampleReader(to_native(job), 0, None)
        assert writer.write(path, 0, size)[0] == size
        kept[uncached] = cached_fraction(path, 0, size)
    assert kept[True] <= 0.25 and kept[False] > 0.9, kept


def test_random_advice_turns_readahead_off_for_the_engine_s_descriptor(tmp_path):
    """--fadvise-hint with --pattern rand (POSIX_FADV_RANDOM, as fio's fadvise_hint=1) reaches the kernel:
    a 4 KiB buffered read of the file's first block brings that page alone into the page cache, where
    without the advice the kernel's first readahead brings a few more (Linux 6.18 here: 4 pages)."""
    from gdsbench.execution.native import to_native

    path = str(tmp_path / "ra.dat")
    prepare(path, 8 * MiB)
    os.sync()  # clean pages, which evict() can drop
    pages = {}
    for advice in (True, False):
        evict(path, 0, 8 * MiB)
        job = JobSpec(path=path, engine="psync", bs=4096, direct=False, fadvise_hint=advice, pattern="rand",
                      runtime_ns=0)
        reader = _native.SampleReader(to_native(job), 0, None)
        assert reader.read(path, 0, 4096)[0] == 4096
        pages[advice] = round(cached_fraction(path, 0, 8 * MiB) * 8 * MiB / 4096)
    if pages[False] <= 1:
        pytest.skip("this filesystem or disk reads ahead nothing here (read_ahead_kb 0): the advice cannot show")
    assert pages[True] == 1, pages


@pytest.mark.parametrize("pattern", ["seq", "rand"])
def test_fadvise_hint_reads_the_same_data_and_reaches_the_native_job(pattern_file, pattern):
    """fio's fadvise_hint=1: the advice (sequential or random, by --pattern) given to the engine's own
    descriptor; it changes readahead, never what is read."""
    from gdsbench.execution.native import to_native

    size = os.path.getsize(pattern_file)
    spec = JobSpec(path=pattern_file, engine="io_uring", bs=64 * 1024, qd=4, direct=False, fadvise_hint=True,
                   pattern=pattern, verify=True, io_size=size)
    advice = "random" if pattern == "rand" else "sequential"
    assert to_native(spec.replace(runtime_ns=0)).fadvise_hint and f"fadvise {advice}" in spec.describe()
    r = run(spec)
    assert r.verify_mismatches == 0 and r.verified_blocks == size // PATTERN_BLOCK


def test_uncached_is_refused_where_it_cannot_mean_anything(gdsbench, pattern_file, tmp_path):
    for args, words in ((["--uncached", "--direct"], "--uncached with --direct"),
                        (["--uncached", "--engine", "null"], "--uncached: the null engine does not give it"),
                        (["--fadvise-hint", "--buffered", "--engine", "null"], "--fadvise-hint: the null engine"),
                        (["--uncached", "--mode", "gds", "--gpu-backend", "sim"], "--uncached: --mode gds reads with "
                                                                                  "O_DIRECT"),
                        (["--uncached", "--warm"], "--warm with --uncached")):
        assert_one_line_error(gdsbench("run", pattern_file, *args, "--io-size", "1M"), words)
    with pytest.raises(IncompatibleOptions, match="--mode kvikio reads with none that does; use --mode cpu"):
        JobSpec(path=pattern_file, mode="kvikio", engine="kvikio", uncached=True).validate()  # (before its GPU check)
    shm_mount = find_mount("/dev/shm", os.stat("/dev/shm").st_dev) if os.path.isdir("/dev/shm") else None
    if not shm_mount or shm_mount.fs_type != "tmpfs":
        return
    shm = tempfile.mkdtemp(dir="/dev/shm")
    try:  # tmpfs keeps every page by nature: refused on every kernel, before anything is measured or written
        on_tmpfs = os.path.join(shm, "f.dat")
        prepare(on_tmpfs, MiB)
        assert_one_line_error(gdsbench("run", on_tmpfs, "--uncached", "--engine", "psync", "--io-size", "1M"),
                              f"--uncached: {on_tmpfs}'s filesystem, or this kernel")
        assert_one_line_error(gdsbench("checkpoint", os.path.join(shm, "ck"), "--model", "llama3-8b", "--layers", "1",
                                       "--vocab", "1024", "--scale", "0.01", "--uncached"), "--uncached: DIR ")
        assert not [n for n in os.listdir(os.path.join(shm, "ck")) if n.startswith("global_epoch")]  # none written
    finally:
        shutil.rmtree(shm)


def test_io_uring_options_are_refused_with_another_engine(gdsbench, pattern_file):
    assert_one_line_error(gdsbench("run", pattern_file, "--engine", "psync", "--fixedbufs", "--io-size", "1M"),
                          "--fixedbufs is an option of the io_uring engine")
    assert_one_line_error(gdsbench("run", pattern_file, "--engine", "io_uring", "--qd", "4", "--complete-batch", "8"),
                          "--complete-batch 8")


@pytest.fixture
def loop_device(pattern_file):
    """A read-only loop block device over the pattern file (needs root and losetup)."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("a loop block device needs root and losetup")
    proc = subprocess.run(["losetup", "--find", "--show", "--read-only", pattern_file], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"losetup failed here: {proc.stderr.strip()}")
    dev = proc.stdout.strip()
    yield dev
    subprocess.run(["losetup", "-d", dev], check=False)


@pytest.mark.parametrize("engine", ENGINES)
def test_block_device_target(loop_device, pattern_file, engine):
    size = os.path.getsize(pattern_file)
    qd = 1 if engine == "psync" else 4
    r = run(JobSpec(path=loop_device, engine=engine, bs=64 * 1024, qd=qd, verify=True, io_size=size))
    assert r.verify_mismatches == 0 and r.bytes == size
    target = r.environment["target"]
    assert target["kind"] == "block" and target["size_bytes"] == size
    assert target["block_device"] == os.path.basename(loop_device)


def test_callback_errors_reach_the_caller_as_themselves():
    from gdsbench.execution.native import to_native
    from gdsbench.execution.runner import plan

    runtime = 60_000_000_000
    job = to_native(plan(JobSpec(engine="null", bs=4096, threads=2, runtime_ns=runtime)).spec)

    def refuse():
        raise ValueError("peer gone")

    with pytest.raises(ValueError, match="peer gone"):
        _native.run(job, None, None, refuse)
    with pytest.raises(TypeError, match="poll callback"):
        _native.run(job, lambda *a: "stop")
    started = time.monotonic()
    with pytest.raises(ZeroDivisionError):
        _native.run(job, lambda *a: 1 / 0)
    # the run ends at the first failing poll, not at its 60 s runtime (a bound on time is what this
    # asks; half the runtime, which no loaded machine takes to stop a run by accident)
    assert time.monotonic() - started < runtime / 2e9


def test_verify_failure_on_the_command_line_shows_the_result_then_one_error_line(own_pattern_file, gdsbench):
    with open(own_pattern_file, "r+b") as f:
        f.seek(5 * 4096 + 7)
        f.write(b"\xff")
    res = gdsbench("run", own_pattern_file, "--engine", "psync", "--bs", "64K", "--verify", "--io-size", "4M")
    assert res.code == VerifyFailure.exit_code == 4
    assert "1 mismatched" in res.out and "bandwidth" in res.out  # the measurement is printed all the same
    assert res.err.count("\n") == 1 and "did not match the pattern" in res.err and "offset 20480" in res.err


def test_the_window_rule_is_fios_and_one_for_every_loop():
    """native/window_rule.hpp: the Worker's rule, and the kvikio loop's through the binding."""
    rule = _native.WindowRule(100, 200, 3)
    assert not rule.open_at(99) and rule.open_at(100)
    assert rule.counts(150) and rule.counts(250) and not rule.counts(99)  # completed in it, issued whenever
    assert rule.may_issue(50, 0, 10)  # during the ramp the budget does not apply
    assert rule.may_issue(150, 1, 1) and not rule.may_issue(150, 2, 1)  # completed + outstanding
    assert not rule.may_issue(200, 0, 0) and rule.ended_at(200)


def test_flags_given_beside_a_fio_job_are_said_to_replace_its_options(gdsbench, pattern_file):
    """fio's size is both the region and the bytes to move: --size given here replaces both, and
    the line that says what each option became names what replaced it."""
    job = os.path.join(os.path.dirname(__file__), "data", "fio-examples", "ssd-test.fio")
    r = gdsbench("run", "--fio-job", job, "--fio-section", "rand-read", pattern_file, "--size", "8M",
                 "--runtime", "1s", "--json")
    assert r.code == 0, r.err
    said = r.err.splitlines()[0]
    assert "size=10g -> --size 10G (the command line's --size instead)" in said
    assert "--io-size 10G (the command line's --size instead)" in said and "--runtime 60s (the command line's" in said
    assert said.endswith("rw=randread -> --rw randread")  # not given here: said as it is
    import json

    d = json.loads(r.out)
    assert d["spec"]["io_size"] == 8 << 20 and d["spec"]["size"] == 8 << 20
