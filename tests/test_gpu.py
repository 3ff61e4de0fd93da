"""GPU modes. Without a GPU: the staging pipeline runs against the SIMULATED
device (a CPU stand-in, labelled as such), and every GPU mode must fail with
one clear line. With a GPU (marked `gpu`): the real paths, data verified."""

import os
import threading

import numpy as np
import pytest
from conftest import wait_for_workers

from gdsbench import IoFailure, JobSpec, UsageError, _native, run
from gdsbench.system import gpu
from gdsbench.system.pattern import bad_blocks

MiB = 1024 * 1024
NO_GPU = gpu.why_no_gpu()  # "no NVIDIA GPU on the PCI bus" where there is none
# A test marked `gpu` runs where a GPU is; it is skipped only when the GPU or a library it needs is
# absent, named, and fails on any error it meets (tests/conftest.py holds the rule).


def sim(**kw) -> JobSpec:
    return JobSpec(mode="bounce", gpu_backend="sim", **kw)


# ---- the staging pipeline, on the simulated device ----

@pytest.mark.parametrize("engine", ["psync", "io_uring"])
@pytest.mark.parametrize("pattern", ["seq", "rand"])
@pytest.mark.parametrize("mode", ["bounce", "cached-bounce"])
def test_every_block_lands_intact_in_simulated_device_memory(pattern_file, engine, pattern, mode):
    size = os.path.getsize(pattern_file)
    qd = 1 if engine == "psync" else 4
    r = run(JobSpec(path=pattern_file, mode=mode, gpu_backend="sim", engine=engine, bs=64 * 1024, qd=qd, threads=2,
                    pattern=pattern, verify=True, io_size=size))
    # verify checks the bytes at their final place: the simulated device buffers
    assert r.bytes == size and r.verified_blocks == size // _native.PATTERN_BLOCK and r.verify_mismatches == 0
    assert r.spec.direct is (mode == "bounce")


@pytest.mark.parametrize("mode,engine", [("bounce", "io_uring"), ("gds", "cufile"), ("gds", "cufile_batch")])
def test_vmm_buffers_take_reads_and_writes_on_the_cpu_stand_in(own_pattern_file, mode, engine):
    """--gpu-memory vmm: buffers reserved and mapped as CUDA's VMM makes them (on the SIMULATED device a
    PROT_NONE range with a memfd mapped over it), every block verified where it landed, writes read
    back clean, the data path naming the allocation. Untested on a GPU (the gpu-marked test below)."""
    import hashlib

    size = os.path.getsize(own_pattern_file)
    qd = 1 if engine == "cufile" else 4
    spec = JobSpec(path=own_pattern_file, mode=mode, engine=engine, gpu_backend="sim", gpu_memory="vmm", bs=256 * 1024,
                   qd=qd, io_size=size)
    mapped = []  # whether the stand-in's memfd is mapped in this process, looked at while the run reads

    def look(nbytes, elapsed_ns):
        if elapsed_ns < 1_500_000_000:  # not at the end, where a finished worker has unmapped its buffers
            with open("/proc/self/maps") as maps:
                mapped.append("gdsbench-vmm-stand-in" in maps.read())

    r = run(spec.replace(verify=True, io_size=0, runtime_ns=2_000_000_000), progress=look)
    assert r.verified_blocks >= size // _native.PATTERN_BLOCK and r.verify_mismatches == 0 and mapped and all(mapped)
    assert r.data_path.endswith("GPU buffers from cuMemCreate, mapped by cuMemMap (VMM)") and "SIMULATED" in r.data_path
    before = hashlib.sha256(open(own_pattern_file, "rb").read()).digest()
    assert run(spec.replace(rw="randwrite", fsync_end=True)).bytes == size
    assert hashlib.sha256(open(own_pattern_file, "rb").read()).digest() != before  # the writes' own seed's payload
    assert run(JobSpec(path=own_pattern_file, verify=True, io_size=size)).verify_mismatches == 0


@pytest.mark.parametrize("mode", ["cpu", "kvikio"])
def test_vmm_buffers_are_refused_where_gdsbench_allocates_no_gpu_memory(pattern_file, mode):
    with pytest.raises(UsageError, match=r"^--gpu-memory vmm: --mode .* has no GPU buffers of gdsbench's own; use "
                                         r"it with --mode bounce, cached-bounce, gds$"):
        JobSpec(path=pattern_file, mode=mode, gpu_memory="vmm").validate()


def test_reads_overlap_copies(pattern_file):
    """Double buffering: with one read in flight, the next read starts while the previous copy runs."""
    r = run(JobSpec(path=pattern_file, mode="bounce", gpu_backend="sim:copy-delay-us=2000", engine="psync", bs=MiB,
                    io_size=8 * MiB, verify=True))
    assert r.ops == 8 and r.verify_mismatches == 0
    assert r.reads_while_copying >= 6
    # latency runs to the copy's completion: at least the simulated copy time
    assert r.latency.min >= 2_000_000


def test_reads_in_flight_when_the_ramp_ends_count_in_the_window():
    """fio's rule: what completes inside the window counts, issued before it or not. Judged by
    counts, not by a rate (a loaded machine slows the fake's copies): with --io-size the window
    holds exactly the budget only if the reads in flight when the ramp ends (8 slots of a slow
    fake, copies of 5 ms in order) are counted when they complete in it; the budget counts them
    as outstanding, so leaving them out would complete fewer bytes than asked."""
    for ramp_ms in (30, 60, 120):
        r = run(JobSpec(mode="bounce", gpu_backend="sim:copy-delay-us=5000", engine="null", bs=MiB, qd=4,
                        ramp_ns=ramp_ms * 1_000_000, io_size=24 * MiB))
        assert r.bytes == 24 * MiB and r.ops == 24 and sum(r.timeline_bytes) == r.bytes
    r = run(JobSpec(mode="bounce", gpu_backend="sim:copy-delay-us=5000", engine="null", bs=MiB, qd=4,
                    ramp_ns=50_000_000, runtime_ns=200_000_000))
    assert r.ops > 0 and sum(r.timeline_bytes) == r.bytes


def test_cpu_per_gb_counts_the_whole_process_over_the_window(pattern_file):
    """One rule for every mode: helper threads count (here the simulated
    device's copy thread, doing every memcpy), and the worker threads' own
    share is kept beside it."""
    r = run(sim(path=pattern_file, engine="null", bs=4 * MiB, qd=2, runtime_ns=300_000_000))
    assert r.cpu_s_per_gb > 1.5 * r.worker_cpu_s_per_gb > 0
    assert r.cpu_user_s + r.cpu_sys_s <= r.process_cpu_user_s + r.process_cpu_sys_s + 0.01
    summary = r.summary()
    assert summary["worker_cpu_s_per_gb"] == r.worker_cpu_s_per_gb and summary["in_flight"] > 0


def test_copy_failure_mid_stream_is_reported(pattern_file, gdsbench):
    with pytest.raises(IoFailure, match="simulated device: copy failed"):
        run(JobSpec(path=pattern_file, mode="bounce", gpu_backend="sim:fail-copy=10", bs=64 * 1024, qd=4,
                    io_size=4 * MiB))
    res = gdsbench("run", pattern_file, "--mode", "bounce", "--gpu-backend", "sim:fail-copy=3", "--io-size", "4M")
    assert res.code == 3 and res.err.count("\n") == 1 and "simulated device: copy failed" in res.err


def test_short_read_mid_stream_is_reported(tmp_path):
    from gdsbench import prepare

    path = str(tmp_path / "shrinking.dat")
    prepare(path, 64 * MiB)

    def cut():  # our own file, cut under the reader once it reads (not before the run has looked at it)
        wait_for_workers(os.getpid())
        os.truncate(path, 4 * MiB)

    cutter = threading.Thread(target=cut, daemon=True)
    cutter.start()
    with pytest.raises(IoFailure, match="short read|truncated"):
        run(JobSpec(path=path, mode="bounce", gpu_backend="sim:copy-delay-us=500", engine="psync", bs=MiB,
                    pattern="rand", runtime_ns=60_000_000_000))  # a hang guard: the cut ends it
    cutter.join()


def test_simulated_results_say_so(pattern_file):
    r = run(sim(path=pattern_file, bs=MiB, io_size=4 * MiB))
    d = r.to_dict()
    assert d["gpu_simulated"] is True and "SIMULATED" in d["data_path"] and "not a GPU" in d["data_path"]
    assert d["spec"]["gpu_backend"] == "sim"
    cpu = run(JobSpec(path=pattern_file, bs=MiB, io_size=4 * MiB)).to_dict()
    assert cpu["gpu_simulated"] is False and cpu["data_path"].endswith("into host memory")


def test_simulation_never_stands_in_for_kvikio_and_stands_in_for_gds_by_name(pattern_file):
    with pytest.raises(UsageError, match="stands in for GPU memory in bounce and gds modes only"):
        run(JobSpec(path=pattern_file, mode="kvikio", gpu_backend="sim"))
    # gds on the stand-in: pread into its "device memory" (host memory) in place of cuFileRead, and the
    # result says so; what it tests is gdsbench's side of the gds path (unstaged slots, checks), not cuFile
    r = run(JobSpec(path=pattern_file, mode="gds", gpu_backend="sim", bs=MiB, threads=2, verify=True,
                    io_size=os.path.getsize(pattern_file)))
    assert r.spec.engine == "psync" and r.verify_mismatches == 0 and r.verified_blocks > 0
    assert r.data_path.startswith("psync reads into simulated device memory, standing in for cufile [SIMULATED")


@pytest.mark.parametrize("engine", ["cufile_batch", "cufile_async"])
def test_the_stand_in_for_cufiles_queued_apis_is_a_queue_and_says_so(pattern_file, engine):
    """cuFile's batch and stream APIs keep --qd requests in flight: io_uring stands in for both (a
    queue into the stand-in's "device memory"), named, and the label says which APIs it stands in for."""
    r = run(JobSpec(path=pattern_file, mode="gds", gpu_backend="sim", engine=engine, bs=MiB, qd=8, threads=2,
                    verify=True, io_size=os.path.getsize(pattern_file)))
    assert r.spec.engine == "io_uring" and r.verify_mismatches == 0 and r.verified_blocks > 0
    assert r.data_path.startswith("io_uring reads into simulated device memory, standing in for cufile_batch or "
                                  "cufile_async [SIMULATED")


def test_cufiles_synchronous_api_refuses_a_queue_naming_the_apis_that_have_one(pattern_file):
    for engine in ("auto", "cufile"):  # auto takes cuFileRead first, as gdsio's -x 0
        with pytest.raises(UsageError, match="--qd 8: the cufile engine is synchronous .*use --engine cufile_batch "
                                             "or cufile_async for deeper queues, or more --threads"):
            run(JobSpec(path=pattern_file, mode="gds", gpu_backend="sim", engine=engine, bs=MiB, qd=8))
    with pytest.raises(UsageError, match="--cufile-batch-size 16: must be between 0 and --qd \\(8\\)"):
        JobSpec(path=pattern_file, mode="gds", engine="cufile_batch", qd=8, cufile_batch_size=16).validate()
    with pytest.raises(UsageError, match="--cufile-batch-size is an option of the cufile_batch engine"):
        JobSpec(path=pattern_file, mode="gds", engine="cufile", cufile_batch_size=4).validate()
    with pytest.raises(UsageError, match="--cufile-batch-size is an option of the cufile_batch engine, and this job "
                                         "reads its local file with io_uring; drop it under --gpu-backend sim \\(the "
                                         "CPU stand-in has no such setting\\)"):
        run(JobSpec(path=pattern_file, mode="gds", gpu_backend="sim", engine="cufile_batch", qd=8, cufile_batch_size=4))
    with pytest.raises(UsageError, match="--gds-register is an option of the cufile engine.*drop it under --gpu-backend sim"):
        run(JobSpec(path=pattern_file, mode="gds", gpu_backend="sim", gds_register=True))


def test_simulated_copies_with_null_reads_measure_the_pipeline_alone(pattern_file):
    r = run(sim(engine="null", bs=MiB, qd=4, runtime_ns=200_000_000))
    assert r.ops > 0 and "null" in r.data_path


def _native_job(**kw):
    from gdsbench.execution.native import to_native
    from gdsbench.execution.runner import plan

    return to_native(plan(JobSpec(**kw)).spec)


def test_the_write_direction_copies_from_the_gpu_before_each_write():
    """The one transfer loop's write direction, tested here on the
    null engine (which does writes by doing nothing) and the SIMULATED device: each request's
    bytes are copied from GPU memory to pinned staging first, and its latency runs from that
    copy's start to the write's completion."""
    job = _native_job(mode="bounce", gpu_backend="sim:copy-delay-us=2000", engine="null", bs=MiB, qd=2,
                      io_size=12 * MiB)
    job.direction = "write"
    t = _native.run(job)["threads"][0]
    assert t["ops"] == 12 and t["bytes"] == 12 * MiB
    assert t["latency"].min >= 2_000_000  # the copy from the GPU is part of every write
    assert t["reads_while_copying"] >= 6  # writes were queued while the next copies ran


@pytest.mark.gpu
def test_the_write_direction_copies_from_a_real_gpu_before_each_write():
    """The same loop with a real GPU: device-to-host copies (cudaMemcpyAsync) before each null write."""
    job = _native_job(mode="bounce", engine="null", bs=MiB, qd=2, io_size=12 * MiB)
    job.direction = "write"
    t = _native.run(job)["threads"][0]
    assert t["ops"] == 12 and t["bytes"] == 12 * MiB and t["latency"].min > 0


def test_an_unknown_direction_is_refused(pattern_file):
    job = _native_job(path=pattern_file, engine="psync", bs=MiB, io_size=MiB)
    with pytest.raises(UsageError, match="direction sideways: unknown; use read or write"):
        job.direction = "sideways"


# ---- without a GPU, every GPU mode says what is missing ----

@pytest.mark.skipif(not NO_GPU, reason="a GPU is present: the no-GPU errors cannot be seen here")
@pytest.mark.parametrize("mode", ["bounce", "cached-bounce", "gds", "kvikio"])
def test_gpu_modes_without_a_gpu_fail_with_one_line(gdsbench, pattern_file, mode):
    res = gdsbench("run", pattern_file, "--mode", mode)
    assert res.code == 2 and res.err.count("\n") == 1 and "Traceback" not in res.err
    assert f"--mode {mode} needs" in res.err
    if not gpu.pci_gpus():  # the plain fact, not the CUDA runtime's words about drivers
        assert f"--mode {mode} needs a GPU: no NVIDIA GPU on the PCI bus" in res.err


def test_bad_gpu_options(gdsbench, pattern_file):
    res = gdsbench("run", pattern_file, "--mode", "gds", "--qd", "4")
    assert res.code == 2 and "cufile_batch or cufile_async" in res.err and "\n" not in res.err.strip()
    res = gdsbench("run", pattern_file, "--mode", "bounce", "--buffered")
    assert res.code == 2 and "cached-bounce" in res.err
    res = gdsbench("run", pattern_file, "--gpu", "x")
    assert res.code == 2 and "--gpu x" in res.err
    res = gdsbench("run", pattern_file, "--mode", "bounce", "--gpu-backend", "fpga")
    assert res.code == 2 and "--gpu-backend fpga" in res.err
    res = gdsbench("run", pattern_file, "--mode", "cpu", "--engine", "cufile")
    assert res.code == 2 and "--engine cufile with --mode cpu" in res.err


def test_gpu_status_without_a_gpu_is_complete_and_explains():
    s = gpu.status()
    for key in ("gpus", "driver_version", "cuda", "nvidia_fs", "cufile_json", "cupy", "kvikio"):
        assert key in s
    if NO_GPU:
        assert s["cuda"]["cudart_error"] and s["cuda"]["cufile_error"]


def test_info_command(gdsbench, pattern_file):
    res = gdsbench("info", "--path", pattern_file)
    assert res.code == 0
    for word in ("GPUs", "libcudart", "libcufile", "nvidia-fs", "io_uring", "O_DIRECT"):
        assert word in res.out
    res = gdsbench("info", "--json")
    assert res.code == 0 and '"nvidia_fs"' in res.out


# ---- the GPU verification rule, on the host ----

def test_array_pattern_check_matches_the_native_one():
    buf = np.empty(256 * 1024, dtype=np.uint8)
    _native.pattern_fill(buf, 1 << 20, 9)
    assert bad_blocks(np, buf, 1 << 20) == []
    buf[4096 * 5 + 99] ^= 0x10
    assert bad_blocks(np, buf, 1 << 20) == [(1 << 20) + 4096 * 5]
    assert (1, (1 << 20) + 4096 * 5) == tuple(_native.pattern_check(buf, 1 << 20)[:2])
    assert len(bad_blocks(np, buf, 0)) == 64  # every block at the wrong offset


# ---- on a real GPU ----

@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["bounce", "cached-bounce", "gds", "kvikio"])
def test_real_gpu_modes_deliver_correct_data(pattern_file, mode, gpu_needs):
    gpu_needs(mode, verify=True)  # skipped, naming it, where cuFile, kvikio or cupy is absent; any error fails
    r = run(JobSpec(path=pattern_file, mode=mode, bs=MiB, verify=True, io_size=os.path.getsize(pattern_file)))
    assert r.verify_mismatches == 0 and r.verified_blocks == os.path.getsize(pattern_file) // 4096
    assert "SIMULATED" not in r.data_path


@pytest.mark.gpu
@pytest.mark.parametrize("engine,options", [("cufile_batch", {}), ("cufile_batch", {"cufile_batch_size": 4}),
                                            ("cufile_async", {})])
def test_real_gpu_cufile_queued_apis_deliver_correct_data(pattern_file, engine, options, gpu_needs):
    """cuFile's batch API (one batch of 8, and two of 4 in flight) and stream API, 8 requests in flight."""
    gpu_needs("gds", verify=True)
    r = run(JobSpec(path=pattern_file, mode="gds", engine=engine, qd=8, bs=MiB, verify=True,
                    io_size=os.path.getsize(pattern_file), **options))
    assert r.spec.engine == engine and r.verify_mismatches == 0
    assert r.verified_blocks == os.path.getsize(pattern_file) // 4096 and "SIMULATED" not in r.data_path


@pytest.mark.gpu
@pytest.mark.parametrize("mode,engine", [("bounce", "io_uring"), ("gds", "cufile"), ("gds", "cufile_batch")])
def test_real_gpu_vmm_buffers_deliver_correct_data(pattern_file, mode, engine, gpu_needs):
    """GPU memory from cuMemCreate + cuMemMap: copied into (bounce), and read into by cuFile (gds), verified."""
    gpu_needs(mode, verify=True)
    r = run(JobSpec(path=pattern_file, mode=mode, engine=engine, gpu_memory="vmm", qd=1 if engine == "cufile" else 8,
                    bs=MiB, verify=True, io_size=os.path.getsize(pattern_file)))
    assert r.verify_mismatches == 0 and r.verified_blocks == os.path.getsize(pattern_file) // 4096
    assert "SIMULATED" not in r.data_path and "GPU buffers from cuMemCreate, mapped by cuMemMap (VMM)" in r.data_path


@pytest.mark.gpu
def test_real_gpu_gds_run_is_counted_by_cufiles_own_statistics(pattern_file, gpu_needs):
    """Where libcufile has its statistics API (1.15, CUDA 13.0, on), a gds run in this process moves its
    per-GPU read counters by every request, on one of the three routes, and its label names them."""
    gpu_needs("gds", verify=False)
    from gdsbench.system import cufile_stats

    size = os.path.getsize(pattern_file)
    r = run(JobSpec(path=pattern_file, mode="gds", bs=MiB, io_size=size))
    read = _native.cufile_stats()
    if "has no statistics API" in read["error"]:  # an older libcufile: said, in the label too
        assert read["version"] < 1150 and "counters not read" in r.data_path, (read, r.data_path)
        return
    assert read["error"] == "", read["error"]  # 1.15 on: gdsbench turned them on, so they must read
    gpus = cufile_stats.parse(read["bytes"])["gpus"]
    moved = sum(g["reads"] for g in gpus.values())
    routes = sum(g["nvfs_reads"] + g["p2p_reads"] + g["posix_reads"] for g in gpus.values())
    assert moved >= size // MiB and routes >= size // MiB, gpus
    assert "cuFile counted" in r.data_path, r.data_path


# ---- the rule for gpu-marked tests (tests/conftest.py), proved on a stand-in for a machine's facts ----

pytest_plugins = ["pytester"]
TESTS = os.path.dirname(os.path.abspath(__file__))
FAKE_MACHINE = '''
"""A stand-in for what a machine says it has, loaded with -p: FAKE_GPU=1 a GPU on the PCI bus, its
driver and the CUDA runtime, though nothing CUDA really does works (CUDA_VISIBLE_DEVICES is empty:
a run meets "CUDA cannot see a GPU", here and on a GPU machine alike); FAKE_GPU=0 no GPU.
kvikio is absent either way; cupy is present (an empty module: nothing reaches it)."""
import os, sys, types
from gdsbench import _native
from gdsbench.system import gpu

if os.environ["FAKE_GPU"] == "1":
    gpu.pci_gpus = lambda: [{"model": "NVIDIA H200 (stand-in)", "pci_address": "0000:00:00.0"}]
    gpu.nvidia_driver_version = lambda: "580.95.05"
    _real_status = _native.gpu_status
    _native.gpu_status = lambda: {**_real_status(), "cudart_error": "", "cufile_error": "",
                                  "devices": [{"index": 0, "pci_bus_id": "0000:00:00.0", "total_bytes": 1 << 37}]}
else:
    gpu.pci_gpus = lambda: []
sys.modules["kvikio"] = None
sys.modules["cupy"] = types.ModuleType("cupy")
'''
REAL_GPU_TESTS = [os.path.join(TESTS, "test_gpu.py"), os.path.join(TESTS, "test_train.py"), "-m", "gpu",
                  "-p", "fake_machine", "-p", "no:cacheprovider"]


def _gpu_tests(pytester, monkeypatch, fake_gpu: str, required: str | None, *args):
    """pytest in a new process, on the machine FAKE_MACHINE says, with GDSBENCH_GPU_REQUIRED as given."""
    pytester.makepyfile(fake_machine=FAKE_MACHINE)
    monkeypatch.setenv("FAKE_GPU", fake_gpu)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # CUDA sees no GPU, on a machine that has one too
    if required is None:
        monkeypatch.delenv("GDSBENCH_GPU_REQUIRED", raising=False)
    else:
        monkeypatch.setenv("GDSBENCH_GPU_REQUIRED", required)
    return pytester.runpytest_subprocess(*args, "-rA", timeout=240)


def test_on_a_gpu_machine_an_error_in_a_gpu_test_fails_it(pytester, monkeypatch):
    """Device run 1's cuFileHandleRegister failure was "3 passed, 1 skipped": the tests took any
    UsageError (exit 2) for a missing library. The real GPU tests, on a machine whose facts say
    it has a GPU, under scripts/device_check.sh's variable: each meets an error and fails; only
    kvikio's, whose library is absent, is skipped, naming it."""
    result = _gpu_tests(pytester, monkeypatch, "1", "1", *REAL_GPU_TESTS)
    result.assert_outcomes(failed=13, skipped=2)
    result.stdout.fnmatch_lines(["FAILED *test_real_gpu_modes_deliver_correct_data?gds?*",
                                 "FAILED *test_real_gpu_train_modes_land_correct_samples?bounce?*"], consecutive=False)
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]  # the same reason, counted once
    assert skips and all("absent here: kvikio is not installed" in line for line in skips), skips


def test_a_gpu_test_skips_only_naming_the_absent_gpu_and_fails_where_one_is_declared(pytester, monkeypatch):
    result = _gpu_tests(pytester, monkeypatch, "0", None, *REAL_GPU_TESTS)
    result.assert_outcomes(skipped=15)
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert skips and all("absent here: no NVIDIA GPU on the PCI bus" in line for line in skips), skips
    # scripts/device_check.sh declares the GPU present: its absence is then an error, not a skip
    result = _gpu_tests(pytester, monkeypatch, "0", "1", *REAL_GPU_TESTS)
    result.assert_outcomes(errors=15)
    result.stdout.fnmatch_lines(["*GDSBENCH_GPU_REQUIRED=1 declares a GPU present, but it is absent: no NVIDIA GPU*"])


OLD_WAY = '''
import pytest
from gdsbench import UsageError

@pytest.mark.gpu
def test_skips_on_the_error_it_met():
    try:
        raise UsageError("cuFileHandleRegister failed: internal error")
    except UsageError as e:  # "e.g. cuFile missing on this GPU machine"
        pytest.skip(str(e))

@pytest.mark.gpu
@pytest.mark.skipif(True, reason="some reason of its own")
def test_skipped_by_a_mark():
    pass

@pytest.mark.gpu
def test_needs_kvikio(gpu_needs):
    gpu_needs("kvikio")
    raise AssertionError("not reached: kvikio is absent")
'''


def test_a_gpu_test_that_skips_on_an_error_fails(pytester, monkeypatch):
    """The old way, in any test file under the rule: a skip a gpu-marked test takes itself (on an
    error it met, or by a skipif) is reported as a failure; only a named absence skips it."""
    with open(os.path.join(TESTS, "conftest.py")) as f:
        pytester.makeconftest(f.read())
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs an NVIDIA GPU\n")
    pytester.makepyfile(test_old_way=OLD_WAY)
    result = _gpu_tests(pytester, monkeypatch, "1", None, "-p", "fake_machine")
    result.assert_outcomes(failed=1, errors=1, skipped=1)  # the skipif's, taken in set-up, is an error there
    for why in ("cuFileHandleRegister failed", "some reason of its own"):
        result.stdout.fnmatch_lines([f"a gpu-marked test skipped on: {why}*"])


def test_gpu_benchmark_script_runs_against_the_simulation(tmp_path):
    """The device benchmark, exercised here on the CPU stand-in (its output says SIMULATED)."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "benchmarks/gpu_modes.py", "--gpu-backend", "sim", "--quick",
                           "--file", str(tmp_path / "g.dat"), "--out", str(tmp_path / "out")],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    table = (tmp_path / "out" / "gpu_modes-simulated.md").read_text()
    assert "SIMULATED" in table and "| bounce | 1M |" in table and "cannot run here" in table


# ---- the kvikio mode's loop, against a stand-in for kvikio and cupy ----

class _FakeFuture:
    def __init__(self, n):
        self.n = n

    def get(self):
        return self.n

    def done(self):
        return True


class _FakeCuFile:
    """TEST DOUBLE for kvikio.CuFile: plain pread and pwrite with numpy arrays. Not kvikio."""

    opened: list = []  # the flags of every open

    def __init__(self, path, flags):
        _FakeCuFile.opened.append(flags)
        self.fd = os.open(path, {"r": os.O_RDONLY, "r+": os.O_RDWR}[flags])  # never creates or truncates

    def pread(self, buf, size, file_offset):
        data = os.pread(self.fd, size, file_offset)
        buf[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        return _FakeFuture(len(data))

    def pwrite(self, buf, size, file_offset):
        return _FakeFuture(os.pwrite(self.fd, bytes(buf[:size]), file_offset))

    def is_direct_io_supported(self):
        return True

    def close(self):
        os.close(self.fd)


class _FakeRemoteFile:
    """TEST DOUBLE for kvikio.RemoteFile: each pread one ranged GET by urllib into a numpy array,
    unsigned (HTTP only: an S3 open is recorded, not read). Not kvikio."""

    opened: list = []  # (how, url, keyword arguments) of every open

    def __init__(self, url):
        self.url = url

    @classmethod
    def open_http(cls, url, nbytes=None):
        cls.opened.append(("open_http", url, {}))
        return cls(url)

    @classmethod
    def open_s3_url(cls, url, nbytes=None, **aws):
        cls.opened.append(("open_s3_url", url, aws))
        return cls(url)

    def pread(self, buf, size, file_offset):
        import urllib.request

        request = urllib.request.Request(self.url, headers={"Range": f"bytes={file_offset}-{file_offset + size - 1}"})
        with urllib.request.urlopen(request) as answer:
            data = answer.read()
        buf[: len(data)] = np.frombuffer(data, dtype=np.uint8)
        return _FakeFuture(len(data))

    def close(self):
        pass


def fake_kvikio_modules(monkeypatch):
    import contextlib
    import sys
    import types

    kvikio = types.ModuleType("kvikio")
    kvikio.CuFile = _FakeCuFile
    kvikio.RemoteFile = _FakeRemoteFile
    _FakeRemoteFile.opened = []
    settings = {"num_threads": 1, "task_size": 4 << 20, "compat_mode": True, "gds_threshold": 1 << 20,
                "auto_direct_io_read": False, "is_gds_available": False, "http_max_attempts": 3, "http_timeout": 60}
    # As in kvikio, these are submodules that `import kvikio` does not load:
    # no kvikio.defaults attribute, so code must import them by name.
    defaults = types.ModuleType("kvikio.defaults")
    defaults.get = settings.__getitem__
    defaults.set = lambda new, *value: settings.update(  # KeyError if unknown; set({k: v}) or set(k, v)
        {k: (settings[k], v)[1] for k, v in (new.items() if not value else [(new, value[0])])})
    defaults.is_compat_mode_preferred = lambda: settings["compat_mode"]
    driver = types.ModuleType("kvikio.cufile_driver")
    driver.get = settings.__getitem__
    monkeypatch.setitem(sys.modules, "kvikio.defaults", defaults)
    monkeypatch.setitem(sys.modules, "kvikio.cufile_driver", driver)
    # the machine's cuFile as the labels ask it: no nvidia-fs, no P2PDMA (not this host's, whatever it has)
    monkeypatch.setattr(gpu, "status", lambda: {"nvidia_fs": {"loaded": False, "version": None}, "cufile_json": {},
                                                "cuda": {}})
    cupy = types.ModuleType("cupy")  # TEST DOUBLE: numpy stands in for cupy, host memory for the GPU's
    cupy.__getattr__ = lambda name: getattr(np, name)  # uint8, empty, arange, ... as numpy has them
    cupy.cuda = types.SimpleNamespace(Device=lambda i: contextlib.nullcontext())
    monkeypatch.setitem(sys.modules, "kvikio", kvikio)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return settings


def test_kvikio_loop_accounts_every_read_against_a_test_double(pattern_file, monkeypatch):
    from gdsbench.execution import kvikio_mode
    from gdsbench.execution.runner import plan
    from gdsbench.job.result import Result

    settings = fake_kvikio_modules(monkeypatch)
    spec = plan(JobSpec(path=pattern_file, mode="cpu", bs=MiB, io_size=8 * MiB)).spec.replace(
        mode="kvikio", engine="kvikio", qd=4, kvikio_threads=3, pattern="rand")
    raw, path = kvikio_mode.run(spec)
    r = Result.from_run(spec, raw, data_path=path)
    assert r.ops == 8 and r.bytes == 8 * MiB and r.latency.count == 8
    # reads done inside pread() end there, not when their future is collected qd preads later
    assert r.in_flight < 1.5
    # with a ramp: reads that finished during it are left out, whenever their futures are collected
    ramped = spec.replace(io_size=0, runtime_ns=150_000_000, ramp_ns=50_000_000, pattern="seq")
    raw, _ = kvikio_mode.run(ramped)
    r = Result.from_run(ramped, raw)
    assert r.ops > 0 and sum(r.timeline_bytes) == r.bytes
    # timed from the ramp's end to the last read counted: a read may end just before the window does,
    # and none is issued after it (a loaded host put that last end 2 us early), nor more than one
    # read's time after it
    assert 75_000_000 < r.elapsed_ns <= 150_000_000 + r.latency.max
    raw, _ = kvikio_mode.run(spec.replace(ramp_ns=20_000_000))
    assert Result.from_run(spec, raw).bytes == 8 * MiB  # --io-size after a ramp: exactly the budget
    assert settings["num_threads"] == 3  # --kvikio-threads applied
    assert "compatibility mode" in path and "NOT GPUDirect" in path
    kvikio_mode.run(spec.replace(kvikio_threads=0))
    assert settings["num_threads"] == 1  # 0 restores kvikio's own default, not the last run's
    assert settings["auto_direct_io_read"] is True and "POSIX O_DIRECT (where aligned) reads" in path  # the job is O_DIRECT
    settings["compat_mode"] = False
    assert "under kvikio's gds_threshold" in kvikio_mode.compat_description(sys_modules_kvikio(), 4096)
    assert "NOT GPUDirect" in kvikio_mode.compat_description(sys_modules_kvikio(), 1 << 20)  # no nvidia-fs
    settings["is_gds_available"] = True
    assert "NOT" not in kvikio_mode.compat_description(sys_modules_kvikio(), 1 << 20)


def test_kvikio_label_follows_what_kvikios_statistics_saw(monkeypatch):
    """kvikio can fall back to POSIX for one file while its global setting
    says cuFile: the label must follow the bytes, not the setting."""
    from types import SimpleNamespace

    from gdsbench.execution import kvikio_mode

    settings = fake_kvikio_modules(monkeypatch)
    settings.update(compat_mode=False, is_gds_available=True)
    kvikio = sys_modules_kvikio()
    summary = SimpleNamespace(by_backend={"POSIX": {"bytes_transferred": 3 << 20}, "GDS": {"bytes_transferred": 0}})
    assert kvikio_mode.backend_shares(summary) == {"posix": 1.0}
    fell_back = kvikio_mode.compat_description(kvikio, 1 << 20, backends={"posix": 1.0})
    assert "NOT GPUDirect" in fell_back and "fell back to POSIX" in fell_back and "100% posix" in fell_back
    through = kvikio_mode.compat_description(kvikio, 1 << 20, backends={"gds": 1.0})
    assert "through cuFile" in through and "NOT" not in through
    mixed = kvikio_mode.compat_description(kvikio, 1 << 20, backends={"gds": 0.5, "posix": 0.5})
    assert mixed.startswith("MIXED") and "NOT all GPUDirect" in mixed
    settings["is_gds_available"] = False  # cuFile without nvidia-fs is cuFile's own compatibility mode
    assert "NOT GPUDirect" in kvikio_mode.compat_description(kvikio, 1 << 20, backends={"gds": 1.0})


def sys_modules_kvikio():
    import sys

    return sys.modules["kvikio"]


@pytest.mark.parametrize("engine,options,words", [
    ("cufile", {}, "GPU buffers not registered (cuFile stages each request through registered buffers of its own)"),
    ("cufile", {"gds_register": True}, "GPU buffers registered with cuFileBufRegister"),
    ("cufile_batch", {}, "GPU buffers registered with cuFileBufRegister"),  # the queued APIs always register
    ("cufile_async", {"gpu_memory": "vmm"},
     "GPU buffers from cuMemCreate, mapped by cuMemMap (VMM), registered with cuFileBufRegister")])
def test_a_cufile_data_path_says_how_its_gpu_buffers_were_made_and_registered(pattern_file, engine, options, words,
                                                                             monkeypatch):
    """What the label says of a real GPU's run (the words only: no GPU here), on a machine where cuFile
    may go GPUDirect (nvidia-fs loaded, planted); in its certain compatibility mode registering
    changes nothing, and the label does not speak of it."""
    from gdsbench.system import gpu_path

    planted = {"nvidia_fs": {"loaded": True, "version": "2.20 (planted)"}, "cufile_json": {}, "cuda": {}}
    monkeypatch.setattr(gpu, "status", lambda: planted)
    spec = JobSpec(path=pattern_file, mode="gds", engine=engine, **options)
    path = gpu_path.data_path(spec, None)
    assert path.startswith("cuFile reads into GPU memory, ") and path.endswith(f"; {words}")
    planted["nvidia_fs"]["loaded"] = False
    assert "registered" not in gpu_path.data_path(spec, None)
