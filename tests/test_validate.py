"""gdsbench validate: a clean run passes with every GPU check skipped and a
reason; each planted fault (a corrupted byte, a floor above the storage, a
really slower disk against a saved baseline, a cufile.json forcing compat
mode where GDS is required) gives exit 1 and a FAIL on the right check."""

import hashlib
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from gdsbench import prepare
from gdsbench.system import gpu, gpu_path, nvfs
from gdsbench.validate import judge, platform, profile
from gdsbench.validate.checks import Check
from gdsbench.validate.measure import gpudirect_verdict

MiB = 1 << 20
FAST = """
[profile]
name = "test"
{profile}
[run]
runtime = "{runtime}"
ramp = "100ms"
repeats = 2
integrity_bytes = "64M"

[points.storage_seq]
bs = "1M"
qd = 2
threads = 1
{extra}
"""


def write_profile(tmp_path, profile_lines: str = "", extra: str = "", runtime: str = "300ms", name="p.toml") -> str:
    path = tmp_path / name
    path.write_text(FAST.format(profile=profile_lines, extra=extra, runtime=runtime))
    return str(path)


def checks(out: str) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(out)["checks"]}


def test_a_clean_run_passes_gpu_checks_skip_with_a_reason_and_the_junit_parses(gdsbench, tmp_path, pattern_file):
    junit = tmp_path / "validate.xml"
    r = gdsbench("validate", pattern_file, "--profile", write_profile(tmp_path), "--json", "--junit", junit)
    assert r.code == 0, r.err
    record = json.loads(r.out)
    found = checks(r.out)
    assert found["integrity.cpu"]["status"] == "PASS" and "intact" in found["integrity.cpu"]["measured"]
    # true by construction, or held to nothing: INFO, never a PASS
    assert found["path.cpu"]["status"] == "INFO" and "O_DIRECT" in found["path.cpu"]["measured"]
    assert found["performance.storage_seq"]["status"] == "INFO"
    rand = found["performance.storage_rand"]
    assert rand["status"] == "INFO" and "measured only" in rand["measured"]
    assert found["platform.o_direct"]["status"] == "PASS"
    assert all(c["threshold"] for c in record["checks"] if c["status"] == "PASS")
    no_gpu = not platform.PCI_DEVICES.exists() or not any(
        (d / "vendor").read_text().strip() == "0x10de" for d in platform.PCI_DEVICES.iterdir())
    if no_gpu:
        for name in ("platform.nvidia_driver", "platform.gpus", "platform.cuda_runtime", "platform.nvidia_fs", "path.gds",
                     "path.bounce", "integrity.kvikio", "performance.h2d", "performance.gds"):
            assert found[name]["status"] == "SKIP" and found[name]["fix"] == "no NVIDIA GPU on the PCI bus", name
    assert record["summary"]["FAIL"] == 0 and record["exit_code"] == 0
    assert len(record["measurements"]["storage_seq"]["runs"]) == 2

    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(record["checks"]) == int(suite.get("tests"))
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert len(skipped) == record["summary"]["SKIP"] == int(suite.get("skipped"))
    assert all(c.find("skipped").get("message") for c in skipped)
    assert suite.get("failures") == "0"


def test_the_table_shows_each_check_and_the_exit_code(gdsbench, tmp_path, pattern_file):
    r = gdsbench("validate", pattern_file, "--profile", write_profile(tmp_path))
    assert r.code == 0
    assert "PASS  integrity.cpu" in r.out
    assert "validate: " in r.out.splitlines()[-1] and "0 FAIL" in r.out and r.out.rstrip().endswith("exit 0")


def test_a_corrupted_byte_fails_integrity_with_its_offset(gdsbench, tmp_path):
    path = str(tmp_path / "rot.dat")
    prepare(path, 16 * MiB)
    with open(path, "r+b") as f:  # one byte, in the middle of block 1000
        f.seek(1000 * 4096 + 100)
        f.write(b"\xff")
    r = gdsbench("validate", path, "--profile", write_profile(tmp_path), "--json")
    assert r.code == 1
    bad = checks(r.out)["integrity.cpu"]
    assert bad["status"] == "FAIL"
    assert "1 of 4096 blocks wrong, first at offset 4096000" in bad["measured"]
    assert "--verify" in bad["evidence"] and bad["fix"]


def test_a_floor_above_the_storage_fails_and_names_the_profile_line(gdsbench, tmp_path, pattern_file):
    floor = write_profile(tmp_path, extra="[limits.storage_seq]\ngbps = { min = 1000.0 }  # 1 TB/s\n")
    r = gdsbench("validate", pattern_file, "--profile", floor, "--json")
    assert r.code == 1
    fail = checks(r.out)["performance.storage_seq.gbps"]
    assert fail["status"] == "FAIL" and "FAIL below 1,000 GB/s" in fail["threshold"]
    line = open(floor).read().splitlines().index("gbps = { min = 1000.0 }  # 1 TB/s") + 1
    assert f"{floor} line {line}" in fail["evidence"] + fail["fix"]
    assert "O_DIRECT" in fail["evidence"]  # the path the figure was measured on


def test_a_fraction_warn_band_and_ceiling(gdsbench, tmp_path, pattern_file):
    limits = ("[limits.storage_rand]\np99_us = { max = 0.001 }\n"  # a p99 ceiling no disk meets: FAIL
              "[limits.storage_seq]\ngbps = { fraction_of = [\"storage_rand\"], warn_below = 1000.0 }\n")
    r = gdsbench("validate", pattern_file, "--profile", write_profile(tmp_path, extra=limits), "--json")
    found = checks(r.out)
    assert r.code == 1 and found["performance.storage_rand.p99_us"]["status"] == "FAIL"
    ratio = found["performance.storage_seq.gbps"]
    assert ratio["status"] == "WARN" and "of min(storage_rand" in ratio["measured"] and ratio["value"] > 1


def test_cufile_json_forcing_compat_fails_where_the_profile_requires_gds(gdsbench, tmp_path, pattern_file, monkeypatch):
    config = tmp_path / "cufile.json"
    config.write_text('{\n  // cuFile allows comments\n  "properties": {\n    "allow_compat_mode": true,\n'
                      '    "force_compat_mode": true\n  }\n}\n')
    monkeypatch.setenv("CUFILE_ENV_PATH_JSON", str(config))
    strict = write_profile(tmp_path, "require_gds = true")
    r = gdsbench("validate", pattern_file, "--profile", strict, "--json")
    assert r.code == 1
    forced = checks(r.out)["platform.cufile_json"]
    assert forced["status"] == "FAIL" and forced["threshold"] == "GPUDirect required"
    assert forced["evidence"] == f'{config} line 5: "force_compat_mode": true' and "false" in forced["fix"]
    # the same file under a profile that does not require GDS: a WARN, exit 0
    r = gdsbench("validate", pattern_file, "--profile", write_profile(tmp_path, name="lenient.toml"), "--json")
    assert r.code == 0 and checks(r.out)["platform.cufile_json"]["status"] == "WARN"


def test_a_really_slower_disk_fails_against_a_saved_baseline(gdsbench, tmp_path, disk_file, throttle):
    path, _ = disk_file
    p = write_profile(tmp_path, runtime="1s")
    first = gdsbench("validate", path, "--profile", p, "--json")
    assert first.code == 0, first.err
    baseline = tmp_path / "baseline.json"
    baseline.write_text(first.out)
    cmd = [sys.executable, "-m", "gdsbench", "validate", path, "--profile", p, "--baseline", str(baseline), "--json"]
    slow = subprocess.run(throttle.wrap(cmd), capture_output=True, text=True, timeout=120)
    assert slow.returncode == 1, slow.stderr
    drop = checks(slow.stdout)["performance.storage_seq.gbps.baseline"]
    assert drop["status"] == "FAIL" and "lower than" in drop["measured"] and drop["value"] < -0.15
    assert str(baseline) in drop["evidence"]


def test_the_slower_tier_counts_what_reached_the_disk(disk_file, throttle):
    """The throttle's read counter (the benchmarks' disk bytes a run) sees a direct read's bytes, and
    only those of processes inside it."""
    path, _ = disk_file
    before = throttle.read_bytes()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M", "count=4", "iflag=direct", "status=none"], check=True)
    assert throttle.read_bytes() == before  # read outside the cgroup
    subprocess.run(throttle.wrap(["dd", f"if={path}", "of=/dev/null", "bs=1M", "count=4", "iflag=direct",
                                  "status=none"]), check=True, timeout=60)
    assert 4 * MiB <= throttle.read_bytes() - before < 5 * MiB  # dd's own pages, were they evicted, count too


def test_a_directory_gets_a_test_file_that_is_removed_afterwards(gdsbench, tmp_path):
    folder = tmp_path / "mnt"
    folder.mkdir()
    r = gdsbench("validate", folder, "--profile", write_profile(tmp_path), "--json")
    assert r.code == 0, r.err
    record = json.loads(r.out)
    assert checks(r.out)["integrity.cpu"]["status"] == "PASS"
    assert any("removed afterwards" in n for n in record["notes"])
    assert list(folder.iterdir()) == []


def test_a_users_file_is_only_read_and_integrity_uses_a_file_beside_it(gdsbench, tmp_path):
    user = tmp_path / "model.bin"
    user.write_bytes(os.urandom(8 * MiB))
    before = hashlib.sha256(user.read_bytes()).hexdigest(), user.stat().st_mtime_ns
    r = gdsbench("validate", user, "--profile", write_profile(tmp_path), "--json")
    assert r.code == 0, r.err
    assert checks(r.out)["integrity.cpu"]["status"] == "PASS"
    assert (hashlib.sha256(user.read_bytes()).hexdigest(), user.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin", "p.toml"]


@pytest.mark.parametrize("args, code, message", [
    (["/nonexistent/x.dat"], 2, "does not exist"),
    (["--profile", "/nonexistent.toml"], 3, "not a shipped profile"),
    (["--frobnicate"], 3, "unrecognized arguments"),
    (["--baseline", "{tmp}/p.toml"], 3, "not JSON"),
])
def test_exit_codes_as_gds_diag(gdsbench, tmp_path, pattern_file, args, code, message):
    (tmp_path / "p.toml").write_text("not json")
    r = gdsbench("validate", *[a.replace("{tmp}", str(tmp_path)) for a in args],
                 *([pattern_file] if "x.dat" not in args[0] else []))
    assert r.code == code and message in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize("body, line, words", [
    ("[points.storage_seq]\nthreads = 100000\n", 2, "--threads 100000: must be between 1 and 1024"),
    ("[run]\nquick_runtime = \"0s\"\n", 2, "quick_runtime: 0 must be more than 0"),
    ("[profile]\nmax_spread = nan\n", 2, "max_spread: nan is not a finite number"),
    ("[points.storage_seq]\nbs = \"0\"\n", 2, "--bs 0 B: must be between 1 byte"),
    ("[limits.storage_seq]\ngbps = { min = 5, max = 1 }\n", 2, "min = 5 is above max = 1"),
    ("[node]\npcie_gen = 9\n", 2, "pcie_gen: 9: give a PCIe generation"),
    ("[profile]\nname = 'x'\nmax_sprad = 0.1\n", 3, "max_sprad: unknown key"),
    ("[run]\nrepeats = 0\n", 2, "repeats: 0 is below 1"),
    ("[run]\nruntime = 'fast'\n", 2, "runtime"),
    ("[limits.storage_seq]\nthroughput = { min = 1 }\n", 2, "unknown figure"),
    ("[limits.bounce]\n\ngbps = { fraction_of = ['nvme'], min = 0.9 }\n", 3, "fraction_of must list"),
    ("[points.gds]\nqd = 'deep'\n", 2, "is not a whole number"),
    ("[profile]\nrequire_gds = = true\n", 2, "not valid TOML"),
])
def test_profile_errors_name_the_line(gdsbench, tmp_path, pattern_file, body, line, words):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    r = gdsbench("validate", pattern_file, "--profile", path)
    assert r.code == 3 and words in r.err and f"line {line}" in r.err, r.err


def test_shipped_profiles_load_and_name_their_sources():
    names = profile.shipped()
    assert {"default", "h200-gen5-nvme", "disk-tier"} <= set(names)
    default = profile.load(None)
    assert not default.require_gds and all(lim.fraction_of for lim in default.limits)  # no absolute speeds
    assert profile.load("h200-gen5-nvme").require_gds
    for name, path in names.items():
        text = open(path).read()
        if name != "default":
            assert "workloads.md" in text or "results/device" in text, f"{name}: no source for its figures"


# ---- the platform readers, on planted sysfs and procfs data ----


def test_acs_control_is_found_in_the_extended_capability_chain():
    config = bytearray(4096)
    config[0x100:0x104] = (0x0001 | 1 << 16 | 0x148 << 20).to_bytes(4, "little")  # AER, next at 0x148
    config[0x148:0x14C] = (0x000D | 1 << 16).to_bytes(4, "little")  # ACS, last
    config[0x14E:0x150] = (0b0001_1101).to_bytes(2, "little")  # SV, RR, CR, UF
    assert platform.acs_control(bytes(config)) == 0b0001_1101
    assert platform.acs_control(bytes(256)) is None  # no extended space readable (not root)


def test_the_bridges_between_gpu_and_nvme_behind_one_switch(tmp_path, monkeypatch):
    root = tmp_path / "devices" / "pci0000:00" / "0000:00:01.0" / "0000:01:00.0"
    gpu, nvme = root / "0000:02:00.0" / "0000:03:00.0", root / "0000:02:01.0" / "0000:04:00.0"
    gpu.mkdir(parents=True)
    nvme.mkdir(parents=True)
    bus = tmp_path / "bus"
    bus.mkdir()
    for d in (gpu, nvme):
        (bus / d.name).symlink_to(d)
    monkeypatch.setattr(platform, "PCI_DEVICES", bus)
    assert platform.bridges_between("0000:03:00.0", "0000:04:00.0") == ["0000:01:00.0", "0000:02:00.0", "0000:02:01.0"]


# A labelled stand-in for /proc/driver/nvidia-fs/stats (the format NVIDIA's GDS troubleshooting
# guide shows), so the verdicts are tested where no nvidia-fs exists.
NVFS_STANDIN = """GDS Version: 1.9.0.20 (a test stand-in, not a real nvidia-fs)
NVFS statistics(ver: 4.0)
IO stats: {io}, peer IO stats: Disabled
Reads                           : n={n} ok={n} err=0 readMiB={mib} io_state_err=0
Reads                           : Bandwidth(MiB/s)=0 Avg-Latency(usec)=0
Mmap                            : n=2 ok=2 err=0 munmap=2
"""


def plant_nvfs(tmp_path, monkeypatch, io="Enabled", n=10, mib=40):
    stats = tmp_path / "nvfs-stats"
    stats.write_text(NVFS_STANDIN.format(io=io, n=n, mib=mib))
    monkeypatch.setattr(nvfs, "STATS", stats)
    return stats


def test_nvidia_fs_counters_show_whether_a_read_went_direct(tmp_path, monkeypatch):
    stats = plant_nvfs(tmp_path, monkeypatch)
    before = nvfs.counters()
    assert before["Reads"] == {"n": 10, "ok": 10, "err": 0, "readMiB": 40, "io_state_err": 0} and before["io_stats"]
    stats.write_text(NVFS_STANDIN.format(io="Enabled", n=26, mib=104))
    seen = nvfs.observe(before, 64 * MiB)
    assert seen.direct is True and "counted 64 MiB of reads for 64 MiB read" in seen.evidence()
    assert "Reads n +16" in seen.evidence()
    assert nvfs.observe(before, 128 * MiB).direct is False  # it counted half: cuFile read the rest another way
    stats.write_text(NVFS_STANDIN.format(io="Enabled", n=10, mib=40))
    assert nvfs.observe(before, 64 * MiB).direct is False  # nothing went through nvidia-fs
    stats.write_text(NVFS_STANDIN.format(io="Disabled", n=10, mib=40))
    off = nvfs.observe(before, 64 * MiB)
    assert off.direct is None and nvfs.STATS_OFF in off.evidence()  # cannot tell: counters off
    stats.unlink()
    assert nvfs.counters() is None and nvfs.observe(None, 64 * MiB).direct is None


PLANTED_NVFS = {"nvidia_fs": {"loaded": True, "version": "2.20 (planted)"}, "cufile_json": {"force_compat": None}}


@pytest.mark.parametrize("require_gds", [True, False])
def test_gpudirect_passes_only_when_nvidia_fs_counted_the_bytes(monkeypatch, pattern_file, require_gds):
    """The platform alone (nvidia-fs loaded, ext4 on NVMe) once passed "GPUDirect required": now
    only nvidia-fs's counters moving by the bytes read pass, for gds and for kvikio."""
    from gdsbench.job.spec import JobSpec
    from gdsbench.system.targets import target_for

    target = target_for(pattern_file)
    monkeypatch.setattr(gpu, "status", lambda: PLANTED_NVFS)
    monkeypatch.setattr(gpu_path, "gds_is_direct", lambda info, t: (True, "ext4 on nvme0n1 (planted)"))
    spec = JobSpec(path=pattern_file, mode="gds", engine="cufile")
    before = {"Reads": {"n": 0, "readMiB": 0}, "io_stats": True}
    counted = nvfs.Observation(before, {"Reads": {"n": 64, "readMiB": 64}, "io_stats": True}, 64 * MiB)
    silent = nvfs.Observation(before, {"Reads": {"n": 0, "readMiB": 0}, "io_stats": True}, 64 * MiB)
    off = nvfs.Observation(before, {"Reads": {"n": 0, "readMiB": 0}, "io_stats": False}, 64 * MiB)
    kvikio = JobSpec(path=pattern_file, mode="kvikio", engine="kvikio")
    through = "kvikio through cuFile (GPUDirect unless cuFile itself runs in its compatibility mode)"
    labels = {
        "observed": gpu_path.data_path(spec, target, None, counted),
        "fallback": gpu_path.data_path(spec, target, None, silent),
        "stats off": gpu_path.data_path(spec, target, None, off),
        "not read": gpu_path.data_path(spec, target, None, None),
        "kvikio observed": gpu_path.data_path(kvikio, target, through, counted),
        "kvikio fallback": gpu_path.data_path(kvikio, target, through, silent),
    }
    assert nvfs.OBSERVED in labels["observed"] and nvfs.OBSERVED in labels["kvikio observed"]
    assert "COMPATIBILITY" in labels["fallback"] and "COMPATIBILITY" in labels["kvikio fallback"]
    assert nvfs.INFERRED in labels["stats off"] and nvfs.INFERRED in labels["not read"]
    for what, label in labels.items():
        check = gpudirect_verdict("path.gds", label, require_gds, "cmd")
        if "observed" in what:
            assert check.status == "PASS", what
        else:
            assert nvfs.OBSERVED not in label and check.status == ("FAIL" if require_gds else "WARN"), what
    assert "rw_stats_enabled" in gpudirect_verdict("path.gds", labels["stats off"], require_gds, "cmd").fix
    assert "counted 0 MiB of reads for 64 MiB read" in labels["fallback"]  # the counters that did (not) move


def test_pci_p2pdma_is_gpudirect_inferred_never_observed(monkeypatch, tmp_path, pattern_file):
    """CUDA 12.8 on, cuFile reads GPUDirect by the kernel's PCI P2PDMA, with no nvidia-fs, where
    cufile.json asks and cuFile reports it supported. The label may then not say compatibility mode
    (it once did, for any machine without nvidia-fs), but nothing can observe the path either: it is
    inferred, and validate warns. nvidia-fs's counters not moving are no evidence against it."""
    from types import SimpleNamespace

    from gdsbench.job.spec import JobSpec

    config = tmp_path / "cufile.json"
    config.write_text('{\n  "properties": {\n    // the kernel\'s P2PDMA\n    "use_pci_p2pdma": true\n  },\n'
                      '  "block": { "nvme": { "use_pci_p2pdma": true } }\n}\n')
    monkeypatch.setenv("CUFILE_ENV_PATH_JSON", str(config))
    parsed = gpu.cufile_config()
    assert parsed["use_pci_p2pdma"] is True and parsed["nvme_p2pdma"] is True and parsed["lines"]["use_pci_p2pdma"] == 4
    status = {"nvidia_fs": {"loaded": False, "version": None}, "cufile_json": parsed, "gpus": [{"cuda_index": 0}],
              "cuda": {"p2pdma_supported": True}}
    monkeypatch.setattr(gpu, "status", lambda: status)
    nvme = SimpleNamespace(where="/mnt/nvme", mount=SimpleNamespace(fs_type="ext4"),  # a file on ext4 over NVMe
                           describe=lambda: {"driver": "nvme", "block_device": "nvme0n1"})
    direct, why = gpu_path.gds_is_direct(status, nvme)
    assert direct and "PCI P2PDMA (properties.use_pci_p2pdma in cufile.json" in why
    spec = JobSpec(path=pattern_file, mode="gds", engine="cufile")
    label = gpu_path.data_path(spec, nvme, None, nvfs.observe(None, 64 * MiB))
    assert nvfs.INFERRED in label and "COMPATIBILITY" not in label and "registered" in label
    check = platform.nvidia_fs(platform.Facts(status, None, True, profile.ANY_NODE))
    assert check.status == "WARN" and "P2PDMA" in check.measured and "properties.use_pci_p2pdma" in check.evidence
    # nvidia-fs loaded too, its counters still: P2PDMA's reads are not counted there, so not compatibility mode
    status["nvidia_fs"]["loaded"] = True
    still = nvfs.Observation({"Reads": {"readMiB": 0}, "io_stats": True}, {"Reads": {"readMiB": 0}, "io_stats": True},
                             64 * MiB)
    label = gpu_path.data_path(spec, nvme, None, still)
    assert label.startswith("cuFile reads into GPU memory, not observed: PCI P2PDMA") and "COMPATIBILITY" not in label
    # asked for, but cuFile does not report it supported (an older libcufile, a kernel without P2PDMA): compat
    status["nvidia_fs"]["loaded"], status["cuda"]["p2pdma_supported"] = False, False
    assert "cuFile does not report PCI P2PDMA supported" in gpu_path.compat_forced(status)
    # not asked for: compat, saying why
    status["cufile_json"] = dict(parsed, use_pci_p2pdma=False, nvme_p2pdma=None)
    assert "does not ask for PCI P2PDMA" in gpu_path.compat_forced(status)


def node_facts(monkeypatch, gpus, node=profile.ANY_NODE, cuda_error=""):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    status = {"gpus": gpus, "cuda": {"cudart_error": cuda_error, "devices": []}, "nvidia_fs": {}, "cufile_json": {}}
    return platform.Facts(status, None, False, node)


def planted_gpu(i, visible=True, model="NVIDIA H200"):
    return {"pci_address": f"0000:{i:02x}:00.0", "model": model, "cuda_index": i if visible else None,
            "numa_node": 0}


def test_a_gpu_node_without_its_gpus_fails(monkeypatch):
    eight = [planted_gpu(i, visible=i < 5) for i in range(8)]
    c = platform.gpus_visible(node_facts(monkeypatch, eight))
    assert c.status == "FAIL" and c.measured.startswith("3 of 8 GPUs on the PCI bus are not visible to CUDA") and c.fix
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4")  # hidden on purpose: said, not failed
    c = platform.Facts(node_facts(monkeypatch, eight).status, None, False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4")
    assert platform.gpus_visible(c).status == "WARN"
    all_cuda_failed = [planted_gpu(i, visible=False) for i in range(2)]
    c = platform.gpus_visible(node_facts(monkeypatch, all_cuda_failed, cuda_error="cudaGetDeviceCount: no device"))
    assert c.status == "FAIL" and "2 of 2" in c.measured and "no device" in c.evidence
    need = profile.Node(gpus=8, gpu_models=("H100", "H200"))
    c = platform.gpus_visible(node_facts(monkeypatch, [planted_gpu(i) for i in range(4)], need))
    assert c.status == "FAIL" and "the profile requires 8" in c.measured
    c = platform.gpus_visible(node_facts(monkeypatch, [planted_gpu(i, model="NVIDIA L4") for i in range(8)], need))
    assert c.status == "FAIL" and "is not H100 or H200" in c.measured
    assert platform.gpus_visible(node_facts(monkeypatch, [planted_gpu(i) for i in range(8)], need)).status == "PASS"
    c = platform.gpus_visible(node_facts(monkeypatch, [], need))
    assert c.status == "FAIL" and "no NVIDIA GPU on the PCI bus" in c.measured
    c = platform.gpus_visible(node_facts(monkeypatch, []))  # no GPU and none required: SKIP, with the plain reason
    assert c.status == "SKIP" and c.fix == gpu.NO_GPU


def test_a_check_held_to_nothing_is_never_a_pass():
    with pytest.raises(ValueError, match="threshold"):
        Check("platform.x", "PASS", "something")
    assert Check("platform.x", "INFO", "something").status == "INFO"


@pytest.mark.parametrize("content", ["", "x" * 10 * 1024, "proc"])
def test_a_target_too_small_to_measure_is_not_ready(gdsbench, tmp_path, content):
    path = "/proc/self/status" if content == "proc" else str(tmp_path / "small.dat")
    if content != "proc":
        open(path, "w").write(content)
    r = gdsbench("validate", path, "--quick")
    assert r.code == 2 and "too small to measure" in r.err and len(r.err.strip().splitlines()) == 1


def test_gpu_points_are_judged_against_storage_at_their_own_depth():
    h200 = profile.load("h200-gen5-nvme")
    refs = {lim.point: lim.fraction_of for lim in h200.limits if lim.fraction_of}
    assert refs["bounce"] == ("storage_seq", "h2d")  # bounce runs at storage_seq's depth already
    assert refs["gds"] == ("storage_at_gds", "h2d") and refs["kvikio"] == ("storage_at_kvikio", "h2d")
    for name in ("gds", "kvikio"):
        ref, point = h200.points[f"storage_at_{name}"], h200.points[name]
        assert ref.mode == "cpu" and profile.in_flight(ref) == profile.in_flight(point)
        assert (ref.qd, ref.threads) == (point.qd, point.threads)


def test_a_baseline_taken_with_other_settings_is_refused(gdsbench, tmp_path, pattern_file):
    p = write_profile(tmp_path)
    quick = gdsbench("validate", pattern_file, "--profile", p, "--quick", "--json")
    saved = tmp_path / "quick.json"
    saved.write_text(quick.out)
    r = gdsbench("validate", pattern_file, "--profile", p, "--baseline", saved)
    assert r.code == 3 and "not comparable" in r.err and "(--quick)" in r.err and len(r.err.strip().splitlines()) == 1


def test_a_drop_limit_below_the_repeats_spread_is_not_judged():
    from gdsbench.validate.measure import Measurement

    point = profile.POINTS["storage_seq"]
    m = Measurement(point, runs=[{"gbps": 1.0}, {"gbps": 1.3}, {"gbps": 0.9}])  # 40% spread
    base = {"measurements": {"storage_seq": {"settings": point.settings(), "median": {"gbps": 1.1},
                                             "runs": [{"gbps": 1.1}, {"gbps": 1.12}]}}}
    lenient = profile.Profile()  # fail_drop 15%, below the spread
    [check] = judge.baseline_checks("storage_seq", m, base, lenient, "b.json")
    assert check.status == "WARN" and "not judged" in check.measured and "spread 40.0%" in check.measured
    collapsed = Measurement(point, runs=[{"gbps": 0.3}, {"gbps": 0.42}, {"gbps": 0.4}])  # 73% down: beyond the noise
    [check] = judge.baseline_checks("storage_seq", collapsed, base, lenient, "b.json")
    assert check.status == "FAIL"


def test_a_link_trained_below_its_maximum_warns():
    slow = {"pci_address": "0000:41:00.0", "pcie_link_speed": "16.0 GT/s PCIe", "pcie_link_width": "16",
            "pcie_max_link_speed": "32.0 GT/s PCIe", "pcie_max_link_width": "16"}
    assert platform.link_check("platform.pcie_link_gpu", "GPU", slow).status == "WARN"
    assert platform.link_check("platform.pcie_link_gpu", "GPU", {**slow, "pcie_link_speed": "32.0 GT/s PCIe"}).status == "PASS"
    narrow = {**slow, "pcie_link_speed": "32.0 GT/s PCIe", "pcie_link_width": "8"}
    assert platform.link_check("platform.pcie_link_gpu", "GPU", narrow).status == "WARN"


def test_ctrl_c_keeps_the_checks_made_so_far(gdsbench, tmp_path, pattern_file, monkeypatch):
    from gdsbench.validate import measure

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(measure, "measure_once", interrupted)
    junit = tmp_path / "partial.xml"
    r = gdsbench("validate", pattern_file, "--profile", write_profile(tmp_path), "--junit", junit)
    assert r.code == 130 and "INTERRUPTED" in r.out and "PASS  integrity.cpu" in r.out
    assert ET.parse(junit).getroot().find("testsuite/properties/property[@name='interrupted']").get("value") == "true"


def test_the_docs_describe_every_check_a_run_makes(gdsbench, tmp_path, pattern_file):
    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "validate.md")).read()
    r = gdsbench("validate", pattern_file, "--profile", write_profile(tmp_path), "--json")
    for name in checks(r.out):
        group, _, rest = name.partition(".")
        if group in ("platform",):
            assert f"`{name}`" in doc, name
    for flag in ("--profile", "--json", "--junit", "--baseline", "--quick"):
        assert flag in doc


def test_sigterm_ends_validate_like_ctrl_c_and_removes_its_test_file(tmp_path):
    from conftest import wait_for_workers

    folder, junit = tmp_path / "mnt", tmp_path / "v.xml"
    folder.mkdir()
    p = subprocess.Popen([sys.executable, "-m", "gdsbench", "validate", str(folder), "--junit", str(junit)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (folder / "gdsbench-validate.dat").exists():
        time.sleep(0.05)
    wait_for_workers(p.pid)  # prepared, and reading it
    p.terminate()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "INTERRUPTED" in out, err
    assert list(folder.iterdir()) == []  # its test file is gone
    assert ET.parse(junit).getroot().find("testsuite/properties/property[@name='interrupted']").get("value") == "true"


def test_a_test_file_a_killed_validate_left_is_removed_by_the_next(gdsbench, tmp_path):
    folder = tmp_path / "mnt"
    folder.mkdir()
    prepare(str(folder / "gdsbench-validate.dat"), 64 * MiB)  # as a validate killed by SIGKILL leaves it
    r = gdsbench("validate", folder, "--profile", write_profile(tmp_path), "--json")
    assert r.code == 0, r.err
    assert any("a leftover of an earlier validate" in n for n in json.loads(r.out)["notes"])
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("where", ["missing/v.xml", "a directory", "/proc/v.xml"])
def test_an_unwritable_report_path_is_refused_before_anything_runs(gdsbench, tmp_path, pattern_file, where):
    path = tmp_path / where if where != "/proc/v.xml" else where
    if where == "a directory":
        path.mkdir()
    r = gdsbench("validate", pattern_file, "--profile", write_profile(tmp_path), "--junit", path)
    assert r.code == 3 and "--junit" in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert r.out == "" and not os.path.exists(f"{path}.partial")


def test_a_junit_path_replaces_only_a_report_of_validate_s(gdsbench, tmp_path, pattern_file):
    """A typo must not cost a file: --junit over a file validate did not write is refused before
    anything runs and the file is left as it was; over validate's own earlier report, replaced."""
    stranger = tmp_path / "notes.xml"
    stranger.write_bytes(b"<notes>mine</notes>\n")
    r = gdsbench("validate", pattern_file, "--profile", write_profile(tmp_path), "--junit", stranger)
    assert r.code == 3 and "is not a JUnit file gdsbench wrote" in r.err and len(r.err.strip().splitlines()) == 1
    assert r.out == "" and stranger.read_bytes() == b"<notes>mine</notes>\n"
    ours = tmp_path / "v.xml"
    for _ in range(2):  # the second run replaces the first's report
        r = gdsbench("validate", pattern_file, "--profile", write_profile(tmp_path), "--junit", ours)
        assert r.code == 0, r.err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_a_report_that_cannot_be_written_is_not_a_pass(tmp_path, pattern_file):
    profile_path = write_profile(tmp_path)
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "gdsbench", "validate", pattern_file, "--profile", profile_path,
                            "--json"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode != 0 and "could not be written" in p.stderr


def test_writes_are_validated_in_a_file_validate_makes_and_removes(gdsbench, tmp_path):
    data = tmp_path / "data.dat"
    prepare(str(data), 64 * MiB)
    floor = write_profile(tmp_path, extra="[limits.storage_write]\ngbps = { min = 1000.0 }  # 1 TB/s\n")
    r = gdsbench("validate", data, "--profile", floor, "--json")
    assert r.code == 1, r.err  # the floor is far above any disk
    record = json.loads(r.out)
    write = record["measurements"]["storage_write"]
    assert len(write["runs"]) == 2 and write["data_path"] == "io_uring O_DIRECT writes from host memory"
    assert write["settings"]["rw"] == "write" and checks(r.out)["performance.storage_write.gbps"]["status"] == "FAIL"
    assert any("gdsbench-validate-write.dat" in n and "to write into" in n for n in record["notes"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.dat", "p.toml"]  # nothing left behind
    assert prepare(str(data), 64 * MiB).reused  # the file validated was read, never written
