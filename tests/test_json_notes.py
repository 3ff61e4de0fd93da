"""predict --json and train --json carry every note the commands say on stderr (a DLIO YAML's keys
not emulated, where the dataset and the workload disagree, the page cache), and predict --json
names the gdsbench and libraries that made it, as run --json does."""

import glob
import json
import os

import pytest

YAML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mlcommons-storage-v2.0", "unet3d_h100.yaml")
SHAPE = ["--record-bytes", "64K", "--record-stdev", "16K", "--batch", "2", "--read-threads", "2", "--compute-time", "5ms"]
NOTE = "gdsbench: note: "


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory):
    """40 samples of about 64 KiB: read as unet3d_h100.yaml's workload (168 files), the shapes disagree."""
    from gdsbench import cli

    path = str(tmp_path_factory.mktemp("notes") / "ds")
    assert cli.main(["prepare", path, "--files", "40", "--workload", "unet3d", *SHAPE]) == 0
    return path


def said(err: str) -> list[str]:
    return [line[len(NOTE):] for line in err.splitlines() if line.startswith(NOTE)]


def test_predict_json_carries_the_notes_it_prints_and_its_provenance(small_dataset, gdsbench):
    args = ["predict", small_dataset, "--workload", YAML, *SHAPE, "--buffered", "--allow-cached", "--probe-seconds",
            "0.2"]
    text = gdsbench(*args)
    assert text.code == 0, text.err
    notes = said(text.err)
    assert any("was prepared with --files 40 (the workload's: 168)" in n for n in notes)  # the note that was on stderr only
    assert any(n.startswith(f"{YAML}: model.name: not emulated") for n in notes)  # the YAML's
    assert any("--allow-cached; its pages are dropped" in n for n in notes)  # the page cache's, now said here too
    res = gdsbench(*args, "--json")
    assert res.code == 0, res.err
    p = json.loads(res.out)
    assert p["notes"] == notes == said(res.err)
    made = p["provenance"]
    assert made["gdsbench"]["version"] and "commit" in made["gdsbench"] and {"python", "libcurl"} <= set(made["tools"])


def test_train_json_rows_and_run_json_carry_the_notes_it_prints(small_dataset, gdsbench, tmp_path):
    args = ["train", small_dataset, "--workload", YAML, *SHAPE, "--epochs", "1", "--steps", "4"]
    text = gdsbench(*args, "--results", tmp_path / "text")
    assert text.code == 0, text.err
    notes = said(text.err)
    assert any("was prepared with --files 40 (the workload's: 168)" in n for n in notes)
    res = gdsbench(*args, "--accelerators", "1,2", "--results", tmp_path / "json", "--json")
    assert res.code == 0, res.err
    rows = json.loads(res.out)
    assert len(rows) == 2 and all(row["notes"] == notes for row in rows) and notes == said(res.err)
    (run_json,) = glob.glob(str(tmp_path / "json" / "*" / "run.json"))
    with open(run_json) as f:
        assert json.load(f)["notes"] == notes  # once per run, where the run is saved
    points = os.path.join(os.path.dirname(run_json), "points.jsonl")
    with open(points) as f:
        assert all("notes" not in json.loads(line) for line in f)  # a point keeps its figures only


def test_train_predict_json_rows_carry_the_prediction_s_caveats_and_flags(small_dataset, gdsbench, tmp_path):
    res = gdsbench("train", small_dataset, "--workload", YAML, *SHAPE, "--epochs", "1", "--steps", "4", "--predict",
                   "--probe-seconds", "0.2", "--results", tmp_path, "--json")
    assert res.code == 0, res.err
    (row,) = json.loads(res.out)
    (run_json,) = glob.glob(str(tmp_path / "*" / "run.json"))
    with open(run_json) as f:
        prediction = json.load(f)["prediction"]
    assert prediction["warnings"]  # --steps 4: at least 'only 4 steps per epoch'
    assert row["notes"] == said(res.err) + [f"prediction: out of its depth: {w}" for w in prediction["warnings"]]
    assert prediction["notes"] == said(res.err)
    (at,) = [a for a in prediction["au"] if a["accelerators"] == row["accelerators"]]
    assert row["predicted_au_flags"] == at["flags"] and row["predicted_au_percent"] == at["au_percent"]
