"""gdsbench validate: a clean run passes with every GPU check skipped and a
reason; each planted fault (a corrupted byte, a floor above the storage, a
really slower disk against a saved baseline, a cufile.json forcing compat
mode where GDS is required) gives exit 1 and a FAIL on the right check."""

import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from gdsbench import prepare
from gdsbench.validate import platform, profile
from gdsbench.validate.measure import nvfs_change, nvfs_counters

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
    assert found["path.cpu"]["status"] == "PASS" and "O_DIRECT" in found["path.cpu"]["measured"]
    assert found["performance.storage_seq"]["status"] == "PASS"
    assert found["performance.storage_rand"]["status"] == "PASS"
    assert found["platform.o_direct"]["status"] == "PASS"
    no_gpu = not platform.PCI_DEVICES.exists() or not any(
        (d / "vendor").read_text().strip() == "0x10de" for d in platform.PCI_DEVICES.iterdir())
    if no_gpu:
        for name in ("platform.nvidia_driver", "platform.cuda_runtime", "platform.nvidia_fs", "path.gds",
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


def test_nvidia_fs_counters_are_diffed_as_evidence(tmp_path, monkeypatch):
    stats = tmp_path / "stats"
    stats.write_text("GDS Version: 1.9.0.20\nReads\t\t: n=10 ok=10 err=0 readMiB=40 io_state_err=0\n"
                     "Mmap\t\t: n=2 ok=2 err=0 munmap=2\n")
    monkeypatch.setattr("gdsbench.validate.measure.NVFS_STATS", stats)
    before = nvfs_counters()
    stats.write_text("Reads\t\t: n=26 ok=26 err=0 readMiB=104 io_state_err=0\nMmap\t\t: n=2 ok=2 err=0 munmap=2\n")
    assert nvfs_change(before, nvfs_counters()).endswith("Reads n +16, Reads ok +16, Reads readMiB +64")
    assert "not present" in nvfs_change(None, None)


def test_a_link_trained_below_its_maximum_warns():
    slow = {"pci_address": "0000:41:00.0", "pcie_link_speed": "16.0 GT/s PCIe", "pcie_link_width": "16",
            "pcie_max_link_speed": "32.0 GT/s PCIe", "pcie_max_link_width": "16"}
    assert platform.link_check("platform.pcie_link_gpu", "GPU", slow).status == "WARN"
    assert platform.link_check("platform.pcie_link_gpu", "GPU", {**slow, "pcie_link_speed": "32.0 GT/s PCIe"}).status == "PASS"
    narrow = {**slow, "pcie_link_speed": "32.0 GT/s PCIe", "pcie_link_width": "8"}
    assert platform.link_check("platform.pcie_link_gpu", "GPU", narrow).status == "WARN"


def test_a_gpu_read_is_called_gpudirect_only_where_nothing_says_otherwise(monkeypatch, pattern_file):
    from gdsbench.system import gpu
    from gdsbench.system.target import inspect
    from gdsbench.validate.measure import went_gpudirect

    target = inspect(pattern_file)
    monkeypatch.setattr(gpu, "gds_is_direct", lambda status, t: (True, "nvidia-fs loaded (planted)"))
    assert not went_gpudirect("cuFile reads in COMPATIBILITY mode (not GPUDirect) (nvidia-fs is not loaded)", target)
    assert not went_gpudirect("kvikio reads into GPU memory (kvikio compatibility mode: POSIX reads, NOT GPUDirect)", target)
    assert went_gpudirect("kvikio reads into GPU memory (kvikio through cuFile (GPUDirect unless cuFile itself runs "
                          "in its compatibility mode))", target)
    monkeypatch.setattr(gpu, "gds_is_direct", lambda status, t: (False, "no nvidia-fs (planted)"))
    assert not went_gpudirect("cuFile GPUDirect Storage reads into GPU memory", target)


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
