"""cuFile's own statistics: the level-3 struct read by its size (its layout moved in CUDA 13.4), the
routes it counts turned into the path a run took, and the label that says so."""

import struct

import pytest

from gdsbench import _native
from gdsbench.reporting.prom import short_data_path
from gdsbench.system import cufile_stats, gpu, gpu_path, nvfs

MiB = 1 << 20


def level3(layout: int, gpus: dict[bytes, dict[str, int]]) -> bytes:
    """A CUfileStatsLevel3_t as a libcufile of that size writes it: level 1 (512 or 624 bytes) and
    level 2's histograms filled with noise, then the GPU count and each GPU's counters."""
    level1 = cufile_stats.LEVEL1_SIZE[layout]
    raw = bytearray(b"\x77" * layout)
    at = level1 + cufile_stats.HISTOGRAMS
    struct.pack_into("<I", raw, at, len(gpus))
    raw[at + 4:at + 8] = b"\0" * 4  # padding
    for i, (uuid, counts) in enumerate(gpus.items()):
        base = at + 8 + i * cufile_stats.PER_GPU_SIZE
        raw[base:base + cufile_stats.PER_GPU_SIZE] = b"\0" * cufile_stats.PER_GPU_SIZE
        raw[base:base + 16] = uuid
        for name, value in counts.items():
            struct.pack_into("<Q", raw, base + cufile_stats.PER_GPU_FIELDS[name], value)
    return bytes(raw)


@pytest.mark.parametrize("layout", sorted(cufile_stats.LEVEL1_SIZE))
def test_the_level3_struct_is_read_by_the_layout_its_size_names(layout):
    gpu0, gpu1 = bytes(range(16)), bytes(range(16, 32))
    raw = level3(layout, {gpu0: {"reads": 100, "nvfs_reads": 90, "posix_reads": 10, "writes": 7},
                          gpu1: {"reads": 5, "p2p_reads": 5, "write_bytes": 1 << 40}})
    parsed = cufile_stats.parse(raw)["gpus"]
    first, second = parsed[f"0:{gpu0.hex()}"], parsed[f"1:{gpu1.hex()}"]
    assert first["nvfs_reads"] == 90 and first["posix_reads"] == 10 and first["writes"] == 7
    assert second["p2p_reads"] == 5 and second["write_bytes"] == 1 << 40 and second["nvfs_reads"] == 0


@pytest.mark.parametrize("size,gpu_count_at", [(5000, 1024), (5112, 1136)])
def test_the_offsets_are_cufile_hs_own(size, gpu_count_at):
    """Written out by hand, not from the module's constants: the GPU count after level 2 (level 1's 512
    or 624 bytes, then two histograms of 32 counters), each GPU's 248 bytes after 4 bytes of padding,
    its nvidia-fs reads at 64 and POSIX writes at 176 within them."""
    raw = bytearray(size)
    struct.pack_into("<I", raw, gpu_count_at, 2)
    second_gpu = gpu_count_at + 8 + 248
    struct.pack_into("<Q", raw, second_gpu + 64, 11)
    struct.pack_into("<Q", raw, second_gpu + 176, 12)
    gpus = list(cufile_stats.parse(bytes(raw))["gpus"].values())
    assert len(gpus) == 2 and gpus[1]["nvfs_reads"] == 11 and gpus[1]["posix_writes"] == 12 and gpus[0]["reads"] == 0


def test_a_snapshot_never_fails_the_run_it_is_beside(monkeypatch):
    def broken():
        raise RuntimeError("a stale build")

    monkeypatch.setattr(_native, "cufile_stats", broken, raising=False)
    assert cufile_stats.snapshot() == {"error": "RuntimeError: a stale build"}


def test_a_size_no_known_layout_has_is_said_not_read():
    raw = level3(5000, {b"g" * 16: {"reads": 1}})
    assert "wrote 4999 bytes, not a layout gdsbench knows (5000 or 5112)" in cufile_stats.parse(raw[:-1])["error"]


def observation(layout, before, after, direction="read"):
    uuid = b"u" * 16
    return cufile_stats.Observation(cufile_stats.parse(level3(layout, {uuid: before})),
                                    cufile_stats.parse(level3(layout, {uuid: after})), direction)


def test_the_routes_cufile_counted_tell_the_path():
    p2p = observation(5112, {"reads": 10, "p2p_reads": 10}, {"reads": 74, "p2p_reads": 74})
    assert p2p.direct is True and p2p.evidence() == ("cuFile counted 64 reads: 0 through nvidia-fs, 64 by PCI "
                                                     "P2PDMA, 0 by POSIX calls (compatibility mode)")
    posix = observation(5000, {}, {"reads": 64, "nvfs_reads": 32, "posix_reads": 32})
    assert posix.direct is False and "32 by POSIX calls" in posix.evidence()
    writes = observation(5000, {"reads": 3}, {"reads": 3, "writes": 8, "nvfs_writes": 8}, "write")
    assert writes.direct is True and writes.evidence().startswith("cuFile counted 8 writes: 8 through nvidia-fs")
    idle = observation(5000, {"reads": 3}, {"reads": 3})
    assert idle.direct is None and idle.evidence() == "cuFile's own counters counted no reads"
    odd = observation(5000, {}, {"reads": 64, "nvfs_reads": 32, "posix_reads": 2})  # routes that do not add up
    assert odd.direct is None
    unread = cufile_stats.Observation({"error": "libcufile.so.0 has no statistics API"}, {"gpus": {}})
    assert unread.direct is None and unread.evidence() == "cuFile's own counters not read (libcufile.so.0 has no statistics API)"


def test_without_a_gpu_the_counters_are_not_read_and_say_why():
    read = _native.cufile_stats()
    assert read["error"] and read["bytes"] == b"" and read["version"] == 0
    assert set(cufile_stats.snapshot()) == {"error"}


PLANTED = {"nvidia_fs": {"loaded": False, "version": None}, "cufile_json": {"use_pci_p2pdma": True},
           "cuda": {"p2pdma_supported": True}}


def test_cufiles_own_counters_observe_p2pdma_where_nvidia_fs_cannot(monkeypatch, pattern_file):
    """P2PDMA's reads never reach nvidia-fs, so without cuFile's counters such a run is at best
    'inferred'; with them it is observed, and POSIX reads counted there are compatibility mode."""
    from gdsbench.job.spec import JobSpec
    from gdsbench.system.targets import target_for

    monkeypatch.setattr(gpu, "status", lambda: PLANTED)
    spec = JobSpec(path=pattern_file, mode="gds", engine="cufile")
    target = target_for(pattern_file)
    p2p = observation(5112, {}, {"reads": 64, "p2p_reads": 64})
    label = gpu_path.data_path(spec, target, None, nvfs.observe(None, 64 * MiB), p2p)
    assert label.startswith(f"cuFile reads into GPU memory, {nvfs.OBSERVED}: cuFile counted 64 reads")
    assert short_data_path(label) == "gpudirect"
    posix = observation(5112, {}, {"reads": 64, "posix_reads": 64})
    label = gpu_path.data_path(spec, target, None, None, posix)
    assert "COMPATIBILITY mode" in label and short_data_path(label) == "cufile_compat"
    unread = cufile_stats.Observation({"error": "stats off"}, {"error": "stats off"})
    label = gpu_path.data_path(spec, target, None, None, unread)
    assert nvfs.OBSERVED not in label and "cuFile's own counters not read (stats off)" in label
    # whatever decides instead (here nvidia-fs's counters), why cuFile's did not is said too
    monkeypatch.setattr(gpu, "status", lambda: dict(PLANTED, nvidia_fs={"loaded": True, "version": "2.20"}))
    before = {"Reads": {"n": 0, "readMiB": 0}, "io_stats": True}
    counted_by_nvfs = nvfs.Observation(before, {"Reads": {"n": 64, "readMiB": 64}, "io_stats": True}, 64 * MiB)
    label = gpu_path.data_path(spec, target, None, counted_by_nvfs, unread)
    assert nvfs.OBSERVED in label and "); cuFile's own counters not read (stats off); GPU buffers" in label
    monkeypatch.setenv("CUFILE_FORCE_COMPAT_MODE", "1")
    label = gpu_path.data_path(spec, target, None, None, unread)
    assert "compatibility mode is forced" in label and label.endswith("not read (stats off)")
    # read only where gdsbench's own cuFile served the run in this process, on a real GPU
    assert gpu_path.cufile_counts_here(spec, True) and not gpu_path.cufile_counts_here(spec, False)
    assert not gpu_path.cufile_counts_here(JobSpec(path=pattern_file, mode="kvikio", engine="kvikio"), True)
    assert not gpu_path.cufile_counts_here(JobSpec(path=pattern_file, mode="gds", gpu_backend="sim"), True)
