"""Every record gdsbench writes, and every committed result, names the gdsbench commit that made it
and the other tools' versions as each reports itself (gdsbench/system/provenance.py)."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from gdsbench.system import provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEX = set("0123456789abcdef")


def head() -> str:
    return subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def names_this_checkout(made: dict) -> bool:
    return made["version"] and made["commit"] == head() and isinstance(made["dirty"], bool)


def test_the_checkout_gdsbench_runs_from_is_named_with_its_commit_and_whether_its_sources_changed():
    made = provenance.gdsbench()
    assert names_this_checkout(made)
    assert provenance.label(made).startswith(f"gdsbench {made['version']} at {made['commit'][:12]}")
    assert provenance.label({**made, "dirty": True}).endswith("with its sources changed")


def test_outside_a_checkout_it_says_so_or_takes_the_commit_given(monkeypatch):
    monkeypatch.setattr(provenance, "_git", lambda *a: None)
    provenance.gdsbench.cache_clear()
    try:
        monkeypatch.delenv(provenance.COMMIT_VARIABLE, raising=False)
        made = provenance.gdsbench()
        assert made["commit"] is None and made["checkout"] == "not a checkout"
        assert provenance.label(made) == f"gdsbench {made['version']} (not a checkout)"
        monkeypatch.setenv(provenance.COMMIT_VARIABLE, "abc123")
        provenance.gdsbench.cache_clear()
        made = provenance.gdsbench()
        assert made["commit"] == "abc123" and "GDSBENCH_COMMIT" in made["checkout"]
        assert "GDSBENCH_COMMIT" in provenance.label(made)
    finally:
        provenance.gdsbench.cache_clear()


def test_tools_report_themselves_absent_ones_are_none_and_an_unknown_name_is_an_error():
    found = provenance.tool_versions(["python", "fio", "nginx"], commands={"nginx": ["/nonexistent/nginx", "-v"]})
    assert found["python"].startswith("Python 3.") and found["fio"].startswith("fio-") and found["nginx"] is None
    with pytest.raises(KeyError, match="no way known"):
        provenance.tool_versions(["nosuchtool"])


def test_run_json_sweep_points_and_metrics_name_the_commit(gdsbench, tmp_path, pattern_file):
    res = gdsbench("run", pattern_file, "--runtime", "100ms", "--json", "--metrics", tmp_path / "m.prom")
    assert res.code == 0, res.err
    record = json.loads(res.out)["provenance"]
    assert names_this_checkout(record["gdsbench"]) and record["tools"]["python"].startswith("Python")
    assert f'commit="{head()}"' in (tmp_path / "m.prom").read_text()  # gdsbench_build_info

    res = gdsbench("sweep", pattern_file, "--bs", "4K", "--runtime", "100ms", "--results", tmp_path / "r", "--no-report")
    assert res.code == 0, res.err
    (run,) = (tmp_path / "r").iterdir()
    assert names_this_checkout(json.loads((run / "run.json").read_text())["provenance"]["gdsbench"])
    rows = [json.loads(line) for line in (run / "points.jsonl").read_text().splitlines()]
    assert rows and all(r["made_by"] == provenance.label() for r in rows)


def test_train_checkpoint_and_their_summary_json_name_the_commit(gdsbench, tmp_path):
    shape = ["--workload", "unet3d", "--files", "8", "--record-bytes", "64K", "--record-stdev", "0", "--batch", "2",
             "--compute-time", "1ms"]
    assert gdsbench("prepare", tmp_path / "ds", *shape).code == 0
    res = gdsbench("train", tmp_path / "ds", *shape, "--accelerators", "1", "--epochs", "1", "--results", tmp_path / "t",
                   "--json")
    assert res.code == 0, res.err
    assert all(r["made_by"] == provenance.label() for r in json.loads(res.out))
    (run,) = (tmp_path / "t").iterdir()
    assert names_this_checkout(json.loads((run / "run.json").read_text())["provenance"]["gdsbench"])
    assert names_this_checkout(json.loads((run / "summary.json").read_text())["gdsbench"]["provenance"]["gdsbench"])

    res = gdsbench("checkpoint", tmp_path / "ck", "--model", "llama3-8b", "--dp", "1", "--layers", "1", "--vocab", "1024",
                   "--scale", "0.01", "--checkpoints", "1", "--results", tmp_path / "c", "--json")
    assert res.code == 0, res.err
    assert all(r["made_by"] == provenance.label() for r in json.loads(res.out))


def test_a_benchmark_table_names_its_commit_and_the_tools_compared(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        from common import write_outputs
    finally:
        sys.path.pop(0)
    md, js = write_outputs("t", "a table", "| a |\n|---|", ["a note"], {"rows": []}, directory=str(tmp_path),
                           tools=("fio",))
    text = open(md).read()
    assert f"Made by {provenance.label()}; python: Python 3." in text and "fio: fio-" in text
    made = json.load(open(js))["provenance"]
    assert names_this_checkout(made["gdsbench"]) and made["tools"]["fio"].startswith("fio-")


def test_a_benchmark_whose_checkout_changed_during_its_run_says_so(tmp_path, monkeypatch):
    """The gdsbench commands a script runs read the sources as each starts: a commit or an edit
    during the run is named, beside the commit the run started at."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import common
    finally:
        sys.path.pop(0)
    before = {"version": "0.1.0", "commit": "0" * 40, "dirty": False}
    monkeypatch.setattr(common, "STARTED", before)
    md, js = common.write_outputs("t", "a table", "| a |\n|---|", [], {}, directory=str(tmp_path))
    made = json.load(open(js))["provenance"]["gdsbench"]
    assert made["commit"] == "0" * 40 and names_this_checkout(made["changed_during_run"])
    assert f"Made by gdsbench 0.1.0 at {'0' * 12}, then {provenance.label()} before it ended" in open(md).read()


def committed_provenance(path: str) -> dict | None:
    if path.endswith(".json"):
        return json.load(open(path)).get("provenance")
    return None


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "results", "benchmarks", "*.json"))),
                         ids=os.path.basename)
def test_every_committed_benchmark_table_names_its_commit(path):
    made = committed_provenance(path)
    assert made and set(made["gdsbench"]["commit"]) <= HEX and len(made["gdsbench"]["commit"]) == 40, \
        f"{path}: no commit named; write it through benchmarks/common.py's write_outputs"
    md = path[:-len(".json")] + ".md"
    assert "\nMade by gdsbench " in open(md).read(), f"{md}: no 'Made by' line"


@pytest.mark.parametrize("run", sorted(glob.glob(os.path.join(ROOT, "results", "device", "*"))), ids=os.path.basename)
def test_every_gpu_run_names_the_commit_it_ran(run):
    made = json.load(open(os.path.join(run, "provenance.json")))
    assert len(made["gdsbench"]["commit"]) == 40, f"{run}: its provenance.json names no commit"


def test_no_benchmark_page_without_the_script_that_made_it():
    scripts = {os.path.splitext(n)[0] for n in os.listdir(os.path.join(ROOT, "benchmarks"))}
    for md in glob.glob(os.path.join(ROOT, "results", "benchmarks", "*.md")):
        command = next(line for line in open(md) if line.startswith("Measured "))
        script = command.split("benchmarks/", 1)[1].split(".py", 1)[0] if "benchmarks/" in command else None
        assert script in scripts, f"{md}: made by a script not committed under benchmarks/ ({command.strip()})"


def test_validate_s_record_names_the_commit(gdsbench, tmp_path, pattern_file):
    profile = tmp_path / "p.toml"
    profile.write_text('[profile]\nname = "t"\n[run]\nruntime = "100ms"\nramp = "50ms"\nrepeats = 1\n'
                       'integrity_bytes = "4M"\n[points.storage_seq]\nbs = "1M"\nqd = 1\nthreads = 1\n')
    res = gdsbench("validate", pattern_file, "--profile", profile, "--json")
    assert res.code == 0, res.err
    assert names_this_checkout(json.loads(res.out)["provenance"]["gdsbench"])
