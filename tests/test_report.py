"""Reports and tier comparison: every chart drawn, a valid offline page, exact ratios."""

import json
import os
import shutil
import struct
from html.parser import HTMLParser

import pytest

from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size
from gdsbench.reporting import charts, compare, report
from gdsbench.results import analysis
from gdsbench.results.store import POINTS_JSONL, RUN_FILE, load
from gdsbench.sweep.grid import SweepSpec
from gdsbench.sweep.session import run, start

CHARTS = ["bandwidth_vs_block_size", "throughput_latency", "latency_vs_queue_depth", "heatmap", "timeline"]


@pytest.fixture(scope="module")
def null_run(tmp_path_factory) -> str:
    results = str(tmp_path_factory.mktemp("runs"))
    spec = SweepSpec(grid={"bs": ["4K", "64K"], "qd": [1, 2, 4]}, fixed={"engine": "null", "runtime": "30ms"},
                     repeat=2, name="base")
    store, grid, plans = start(spec, results)
    run(store, grid, plans, show_progress=False)
    return store.path


def png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


class Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.sources.append(dict(attrs)["src"])


def check_page(path: str, images: int) -> str:
    text = open(path).read()
    assert text.startswith("<!doctype html>") and text.rstrip().endswith("</html>")
    parser = Images()
    parser.feed(text)
    assert len(parser.sources) == images
    assert all(s.startswith("data:image/png;base64,") for s in parser.sources)  # opens offline
    assert "http://" not in text and "https://" not in text
    return text


def test_report_draws_every_chart_and_a_page(null_run, tmp_path):
    built = report.build(null_run, str(tmp_path / "report"))
    assert sorted(built.charts) == sorted(CHARTS)
    for name, path in built.charts.items():
        assert os.path.getsize(path) > 10_000, name
        assert png_size(path) == charts.PIXELS, name
    text = check_page(built.html_path, len(CHARTS))
    for heading in ("Summary", "Bandwidth heatmap", "Points (medians over repeats)", "Environment"):
        assert heading in text
    what = dict(built.summary)
    # the headline names the best point whose repeats agree, whichever that was on this machine
    summary = analysis.summarize(load(null_run))
    best, _ = analysis.best_point(summary, "bandwidth_bytes_per_s")
    assert f"bs={format_size(best['bs_bytes'])} qd={int(best['qd'])}" in what["best bandwidth"]
    flagged = summary[summary["flagged"].astype(bool)]
    if (flagged["bandwidth_bytes_per_s"] > best["bandwidth_bytes_per_s"]).any():
        assert "passed over" in what["best bandwidth"]
    assert "flagged (repeats > 5% apart)" in what


def test_report_command(gdsbench, null_run):
    res = gdsbench("report", null_run, "--point", "1")
    assert res.code == 0 and "report:" in res.out
    assert os.path.exists(os.path.join(null_run, "report", "report.html"))
    res = gdsbench("report", null_run, "--point", "99")
    assert res.code == 2 and "--point 99" in res.err


def faster_copy(run_dir: str, dest: str, factor: float, p99_factor: float, hostname: str | None = None) -> str:
    """A copy of a run with every point `factor` times faster and p99 divided by p99_factor."""
    shutil.copytree(run_dir, dest)
    rows = [json.loads(line) for line in open(os.path.join(dest, POINTS_JSONL))]
    with open(os.path.join(dest, POINTS_JSONL), "w") as f:
        for r in rows:
            r["bandwidth_bytes_per_s"] *= factor
            r["iops"] *= factor
            r["lat_p99_ns"] /= p99_factor
            f.write(json.dumps(r) + "\n")
    info = json.load(open(os.path.join(dest, RUN_FILE)))
    info["name"] = "flash"
    info["run_id"] = os.path.basename(dest)
    if hostname:
        info["environment"]["host"]["hostname"] = hostname
    json.dump(info, open(os.path.join(dest, RUN_FILE), "w"))
    return dest


def test_compare_arithmetic(null_run, tmp_path):
    flash = faster_copy(null_run, str(tmp_path / "flash"), factor=6.0, p99_factor=12.0)
    c = compare.compare([null_run, flash])
    assert c.keys == ["bs_bytes", "qd"] and len(c.table) == 6
    for col in ("bandwidth_bytes_per_s ratio flash", "iops ratio flash"):
        assert c.table[col].to_numpy() == pytest.approx(6.0)
    assert c.table["lat_p99_ns ratio flash"].to_numpy() == pytest.approx(1 / 12)
    assert c.table["lat_p50_ns ratio flash"].to_numpy() == pytest.approx(1.0)
    assert c.headlines[0].startswith("flash/base: 6.0x bandwidth at 64 KiB, best to best")
    assert "6.0x IOPS at 4 KiB, best to best" in c.headlines[0] and "12x lower p99" in c.headlines[0]
    assert "6.0x to 6.0x over matched points" in c.headlines[0]
    assert c.differences == []
    page = compare.write(c, str(tmp_path / "page"))
    check_page(page, 2)


def test_compare_warns_about_differences(null_run, tmp_path):
    other = faster_copy(null_run, str(tmp_path / "other"), 2.0, 1.0, hostname="elsewhere")
    c = compare.compare([null_run, other])
    assert any(d.startswith("hostname:") and "elsewhere (flash)" in d for d in c.differences)


def test_compare_needs_common_points(null_run, tmp_path):
    spec = SweepSpec(grid={"bs": ["8K", "16K"]}, fixed={"engine": "null", "runtime": "20ms"}, name="odd")
    store, grid, plans = start(spec, str(tmp_path))
    run(store, grid, plans, show_progress=False)
    with pytest.raises(UsageError, match="no point in common"):
        compare.compare([null_run, store.path])


def test_compare_command(gdsbench, null_run, tmp_path):
    flash = faster_copy(null_run, str(tmp_path / "flash"), 3.0, 2.0)
    res = gdsbench("compare", null_run, flash, "--out", tmp_path / "cmp")
    assert res.code == 0, res.err
    assert res.out.startswith("flash/base: 3.0x bandwidth") and "page:" in res.out
    assert os.path.exists(tmp_path / "cmp" / "compare.html")


def test_compare_runs_that_swept_neither_block_size_nor_queue_depth(tmp_path):
    runs = []
    for name in ("one", "two"):
        spec = SweepSpec(grid={"threads": [1, 2]}, fixed={"engine": "null", "runtime": "20ms"}, name=name)
        store, grid, plans = start(spec, str(tmp_path))
        run(store, grid, plans, show_progress=False)
        runs.append(store.path)
    c = compare.compare(runs)
    assert c.keys == ["threads"] and len(c.table) == 2 and c.headlines[0].startswith("two/one: ")


def test_compare_single_point_runs(tmp_path):
    runs = []
    for name in ("a", "b"):
        store, grid, plans = start(SweepSpec(grid={}, fixed={"engine": "null", "runtime": "20ms", "bs": "8K",
                                                             "qd": "2"}, name=name), str(tmp_path))
        run(store, grid, plans, show_progress=False)
        runs.append(store.path)
    assert len(compare.compare(runs).table) >= 1


def test_the_headline_sets_best_against_best_and_gives_the_range_over_matched_points():
    """The case that misled: at QD1 the fast tier's best 1 MiB point met the slow tier's worst.
    By hand: best to best 4.85 / 1.42 = 3.4x; matched 4.85/0.76 = 6.4x, 3.0/1.2 = 2.5x, 3.4/1.42 = 2.4x."""
    import pandas as pd

    from gdsbench.reporting.compare import Run, headline

    def run(label, bandwidths):
        summary = pd.DataFrame({"bs_bytes": [1 << 20] * 3, "qd": [1, 4, 32],
                                "bandwidth_bytes_per_s": [b * 2**30 for b in bandwidths],
                                "iops": [b * 1024 for b in bandwidths], "lat_p99_ns": [1e6, 2e6, 8e6]})
        return Run(label, pd.DataFrame(), summary)

    disk, shm = run("disk", [0.76, 1.2, 1.42]), run("shm", [4.85, 3.0, 3.4])
    merged = disk.summary.merge(shm.summary, on=["bs_bytes", "qd"], suffixes=(" disk", " shm"))
    for f in ("bandwidth_bytes_per_s", "iops", "lat_p99_ns"):
        merged[f"{f} ratio shm"] = merged[f"{f} shm"] / merged[f"{f} disk"]
    text = headline(disk, shm, merged, ["qd"])
    assert text.startswith("shm/disk: 3.4x bandwidth at 1 MiB, best to best (4.85 GiB/s at qd=1 vs 1.42 GiB/s at "
                           "qd=32; 2.4x to 6.4x over matched points)"), text


def test_the_knee_does_not_depend_on_the_grid():
    """By hand: IOPS 10k, 24k, 36k, 40k at QD 1, 4, 16, 64: the peak is 40k, 90% of it 36k, first reached at QD16.
    The old rule (latency growing faster than throughput between neighbours) put it at QD1."""
    import pandas as pd

    from gdsbench.results.analysis import knee

    curve = pd.DataFrame({"qd": [1, 4, 16, 64], "iops": [10e3, 24e3, 36e3, 40e3],
                          "lat_p50_ns": [100e3, 166e3, 444e3, 1600e3]})
    assert knee(curve, "iops") == 2
    fine = pd.DataFrame({"qd": [1, 2, 4, 8, 16, 32, 64], "iops": [10e3, 17e3, 24e3, 30e3, 36e3, 38e3, 40e3]})
    assert fine["qd"].iloc[knee(fine, "iops")] == 16  # a finer grid, the same knee


def test_one_repeat_shows_no_spread_and_says_how_to_get_one(tmp_path, null_run):
    from gdsbench.reporting import report

    spec = SweepSpec(grid={"qd": [1, 4]}, fixed={"engine": "null", "bs": "4K", "runtime": "400ms"}, repeat=1, name="one")
    store, grid, plans = start(spec, str(tmp_path))
    run(store, grid, plans, show_progress=False)
    built = report.build(store.path)
    page = open(built.html_path).read()
    assert "n/a (1 repeat)" in page and "--repeat 3" in built.summary["spread between repeats"]
    assert "swung" in built.summary["spread between repeats"]  # the within-run signal stands in
    assert "knee rule" in built.summary and "What was measured" in page
    two = report.build(null_run)  # with repeats, the spread between them is shown
    assert "flagged (repeats > 5% apart)" in two.summary


def test_the_last_sliver_of_a_timeline_is_not_a_spike():
    """10 intervals of 100 ms at 1 GB/s, then a 0.86 ms sliver holding 4 MB (a 4.7 GB/s 'spike')."""
    from gdsbench.results.analysis import timeline_spread

    samples = [100_000_000] * 10 + [4_000_000]
    elapsed = 10 * 100_000_000 + 860_000
    assert timeline_spread(samples, 100_000_000, elapsed) == 0.0  # the sliver is left out
    # a last interval of 60 ms is kept, as a rate over its own width: 60 MB in 60 ms is 1 GB/s like the rest
    assert timeline_spread([100_000_000] * 9 + [60_000_000], 100_000_000, 9 * 100_000_000 + 60_000_000) == 0.0
    assert timeline_spread([100_000_000] * 9 + [30_000_000], 100_000_000, 9 * 100_000_000 + 60_000_000) > 0  # 0.5 GB/s


def _tier(label, bandwidths, spreads, repeats=3):
    import pandas as pd

    from gdsbench.reporting.compare import Run

    summary = pd.DataFrame({"bs_bytes": [1 << 20] * len(bandwidths), "qd": [1, 4, 32][:len(bandwidths)],
                            "bandwidth_bytes_per_s": [b * 2**30 for b in bandwidths],
                            "iops": [b * 1024 for b in bandwidths], "lat_p99_ns": [1e6, 2e6, 8e6][:len(bandwidths)],
                            "repeats": repeats, "spread": spreads, "flagged": [s > 0.05 for s in spreads]})
    return Run(label, pd.DataFrame(), summary)


def _headline(a, b):
    from gdsbench.reporting.compare import headline

    merged = a.summary.merge(b.summary, on=["bs_bytes", "qd"], suffixes=(f" {a.label}", f" {b.label}"))
    for f in ("bandwidth_bytes_per_s", "iops", "lat_p99_ns"):
        merged[f"{f} ratio {b.label}"] = merged[f"{f} {b.label}"] / merged[f"{f} {a.label}"]
    return headline(a, b, merged, ["qd"])


def test_a_headline_passes_over_flagged_points_and_says_so():
    """The fast tier's best point (QD1, 4.85) spread 40%: the headline uses its best unflagged
    point (QD32, 3.4 GiB/s: 3.4 / 1.42 = 2.4x) and says one was passed over."""
    disk = _tier("disk", [0.76, 1.2, 1.42], [0.01, 0.02, 0.01])
    shm = _tier("shm", [4.85, 3.0, 3.4], [0.40, 0.02, 0.03])
    text = _headline(disk, shm)
    assert text.startswith("shm/disk: 2.4x bandwidth at 1 MiB, best to best (3.40 GiB/s at qd=32"), text
    assert "shm: 1 flagged point(s) that measured more passed over" in text and "1 flagged left out" in text
    # every point flagged: the best of them, and the headline says how far its repeats spread
    noisy = _headline(_tier("disk", [0.76, 1.2, 1.42], [0.22, 0.3, 12.98]), _tier("shm", [4.85, 3.0, 3.4], [0.4, 0.5, 0.6]))
    assert "FLAGGED: its repeats spread 1298%" in noisy and "FLAGGED: its repeats spread 40%" in noisy
    assert "every one flagged" in noisy
    once = _headline(_tier("disk", [1.42], [float("nan")], repeats=1), _tier("shm", [4.85], [float("nan")], repeats=1))
    assert "1 repeat: spread not measured" in once


def test_a_curve_still_rising_at_its_deepest_queue_has_no_knee():
    import pandas as pd

    from gdsbench.results.analysis import knee, still_rising

    rising = pd.DataFrame({"qd": [1, 4, 16, 32], "iops": [10e3, 30e3, 60e3, 90e3]})
    assert knee(rising, "iops") is None and still_rising(rising, "iops")
    flat = pd.DataFrame({"qd": [1, 4, 16, 32], "iops": [10e3, 30e3, 60e3, 62e3]})
    assert knee(flat, "iops") == 2 and not still_rising(flat, "iops")


# ---- damaged runs: one line, no traceback, and what can be read is kept ----

def one_line_error(res, *fragments):
    assert res.code == 2 and "Traceback" not in res.err, (res.code, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gdsbench: error: "), res.err
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def damaged_copy(run_dir: str, dest, changes: dict[int, dict]) -> str:
    """A copy of a run with fields of some lines of points.jsonl (0-based) set to the given values."""
    shutil.copytree(run_dir, dest)
    path = os.path.join(dest, POINTS_JSONL)
    rows = [json.loads(line) for line in open(path)]
    for i, fields in changes.items():
        rows[i].update(fields)
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return str(dest)


@pytest.fixture(scope="module")
def train_and_checkpoint_runs(tmp_path_factory) -> dict[str, str]:
    from gdsbench import cli

    root = tmp_path_factory.mktemp("kinds")
    shape = ["--workload", "unet3d", "--record-bytes", "64K", "--batch", "2", "--read-threads", "2",
             "--compute-time", "5ms"]
    assert cli.main(["prepare", str(root / "ds"), "--files", "20", *shape]) == 0
    assert cli.main(["train", str(root / "ds"), *shape, "--accelerators", "1,2", "--steps", "6",
                     "--results", str(root / "train")]) == 0
    assert cli.main(["checkpoint", str(root / "ck"), "--model", "llama3-8b", "--dp", "2", "--layers", "1", "--vocab",
                     "1024", "--scale", "0.01", "--checkpoints", "1", "--results", str(root / "checkpoint")]) == 0
    return {kind: str(next((root / kind).iterdir())) for kind in ("train", "checkpoint")}


def test_a_damaged_point_is_skipped_with_a_line_naming_it(gdsbench, null_run, tmp_path):
    bad = damaged_copy(null_run, tmp_path / "bad", {0: {"bandwidth_bytes_per_s": None}, 1: {"lat_p99_ns": "oops"}})
    res = gdsbench("report", bad, "--out", tmp_path / "page")
    assert res.code == 0 and "Traceback" not in res.err, res.err
    assert f"{bad}/points.jsonl line 1: skipped, not a point record (bandwidth_bytes_per_s: null, not a number)" in res.out
    assert f"{bad}/points.jsonl line 2: skipped, not a point record (lat_p99_ns: \"oops\", not a number)" in res.out
    assert len(load(bad)) == len(load(null_run)) - 2  # the good points are all there
    res = gdsbench("compare", null_run, bad, "--out", tmp_path / "cmp")
    assert res.code == 0 and "gdsbench: warning: " + f"{bad}/points.jsonl line 1: skipped" in res.err, res.err


@pytest.mark.parametrize("kind, field", [("train", "au_percent"), ("checkpoint", "duration_s")])
def test_a_damaged_train_or_checkpoint_record_is_skipped(gdsbench, train_and_checkpoint_runs, tmp_path, kind, field):
    bad = damaged_copy(train_and_checkpoint_runs[kind], tmp_path / "bad", {0: {field: None}})
    res = gdsbench("report", bad, "--out", tmp_path / "page")
    assert res.code == 0, res.err
    assert res.err.strip() == (f"gdsbench: warning: {bad}/points.jsonl line 1: skipped, not a point record "
                               f"({field}: null, not a number)")
    assert "Left out" in open(tmp_path / "page" / "report.html").read()


def test_a_run_json_without_its_plan_still_reports(gdsbench, null_run, tmp_path):
    copy = shutil.copytree(null_run, tmp_path / "copy")
    info = json.load(open(copy / RUN_FILE))
    del info["points"], info["skipped"]
    json.dump(info, open(copy / RUN_FILE, "w"))
    res = gdsbench("report", copy, "--out", tmp_path / "page")
    assert res.code == 0, res.err
    assert "points: 6 measured (run.json does not list the points planned), 2 repeat(s) each" in res.out


@pytest.mark.parametrize("name", [RUN_FILE, POINTS_JSONL])
def test_an_unreadable_run_file_is_one_line(gdsbench, null_run, tmp_path, monkeypatch, name):
    copy = shutil.copytree(null_run, tmp_path / "copy")
    path = str(copy / name)
    os.chmod(path, 0)
    real_open = open

    def no_access(file, *args, **kwargs):  # what chmod 000 does to anyone but root
        if str(file) == path:
            raise PermissionError(13, "Permission denied", path)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_access)
    one_line_error(gdsbench("report", copy, "--out", tmp_path / "page"), f"{path}: cannot read it (Permission denied)",
                   f"chmod u+r {path}")


def test_a_run_not_found_is_named_once(gdsbench, null_run, tmp_path):
    one_line_error(gdsbench("report", tmp_path / "nothing"), f"(looked for run.json in {tmp_path / 'nothing'});")
    (tmp_path / "points_only").mkdir()
    shutil.copy(os.path.join(null_run, POINTS_JSONL), tmp_path / "points_only")
    one_line_error(gdsbench("report", tmp_path / "points_only"), f"no run.json in {tmp_path / 'points_only'}, though "
                   "its points are there (points.jsonl)", "restore run.json")


def test_compare_of_partly_different_grids_says_what_it_left_out(gdsbench, null_run, tmp_path):
    spec = SweepSpec(grid={"qd": [2, 4, 8]}, fixed={"engine": "null", "bs": "4K", "runtime": "20ms"}, name="other")
    store, grid, plans = start(spec, str(tmp_path))
    run(store, grid, plans, show_progress=False)
    res = gdsbench("compare", null_run, store.path, "--out", tmp_path / "cmp")
    assert res.code == 0, res.err
    assert ("gdsbench: note: compared the 2 point(s) every run measured; left out for want of a match: 4 of base's 6 "
            "points, 1 of other's 3 points (the grids differ: bs 4 KiB, 64 KiB (base) vs 4 KiB (other); "
            "qd 1, 2, 4 (base) vs 2, 4, 8 (other))") in res.err.splitlines()


def test_a_headline_marks_a_best_point_the_other_run_did_not_measure():
    """disk measured QD 1 and 4, shm QD 4 and 32: shm's best (QD32) has no match in disk's grid."""
    disk, shm = _tier("disk", [0.76, 1.2], [0.01, 0.01]), _tier("shm", [3.0, 4.0], [0.01, 0.01])
    shm.summary["qd"] = [4, 32]
    text = _headline(disk, shm)
    assert text.startswith("shm/disk: 3.3x bandwidth at 1 MiB, best to best (4 GiB/s at qd=32 (a point disk did "
                           "not measure) vs 1.20 GiB/s at qd=4; 2.5x to 2.5x over matched points)"), text


def _latency_tier(label, iops, p99_us):
    import pandas as pd

    from gdsbench.reporting.compare import Run

    summary = pd.DataFrame({"bs_bytes": [4096] * 3, "qd": [1, 4, 32], "iops": iops,
                            "bandwidth_bytes_per_s": [i * 4096 for i in iops], "lat_p99_ns": [u * 1e3 for u in p99_us],
                            "repeats": 3, "spread": 0.01, "flagged": False})
    return Run(label, pd.DataFrame(), summary)


def test_the_p99_clause_says_its_words_and_ratios_one_way():
    """The case that misled: disk's p99 is 2x, 10x and 23x shm's at QD 1, 4, 32 (matched points), and the
    headline said "153x higher p99 ... (0.043x to 0.5x lower over matched points)". Now both figures are
    N times higher or lower with N >= 1, and where the best-IOPS points differ in depth (shm's best at QD4,
    disk's at QD32: 4.6 ms vs 30 µs, 153x) the like-for-like matched range leads."""
    import re

    shm = _latency_tier("shm", [300e3, 900e3, 800e3], [20, 30, 200])
    disk = _latency_tier("disk", [10e3, 40e3, 90e3], [40, 300, 4600])
    text = _headline(shm, disk)
    p99 = text[text.index("IOPS at 4 KiB"):].split("; ", 2)[-1]  # the clause after the IOPS one
    assert p99 == ("2.0x to 23x higher p99 over matched points (153x higher at those best-IOPS points, which differ "
                   "in depth: 4.60 ms vs 30 µs)"), text
    assert all(float(n) >= 1 for n in re.findall(r"([\d.]+)x", p99)) and "lower" not in p99
    # the same best point on both sides (QD32): the best-to-best figure leads, in the same words as the range
    shm = _latency_tier("shm", [300e3, 700e3, 900e3], [20, 30, 200])
    text = _headline(shm, disk)
    assert text.endswith("23x higher p99 at those best-IOPS points (4.60 ms vs 200 µs; 2.0x to 23x higher over "
                         "matched points)"), text
    # the other way round, disk as the first run: shm's p99 is lower by the same factors
    assert _headline(disk, shm).endswith("23x lower p99 at those best-IOPS points (200 µs vs 4.60 ms; 2.0x to 23x "
                                         "lower over matched points)")
    # tiers that trade places over the matched points: one range, from one side to the other
    mixed = _latency_tier("mixed", [10e3, 40e3, 1e6], [10, 300, 4600])
    assert "23x higher to 2.0x lower over matched points" in _headline(shm, mixed)


@pytest.mark.parametrize("kind", ["train", "checkpoint"])
def test_point_is_refused_for_a_train_or_checkpoint_run(gdsbench, train_and_checkpoint_runs, kind):
    one_line_error(gdsbench("report", train_and_checkpoint_runs[kind], "--point", "5"), "--point 5",
                   f"is a {kind} run", "drop --point")


def test_out_never_overwrites_files_gdsbench_did_not_write(gdsbench, null_run, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.html").write_text("my own page")
    flash = faster_copy(null_run, str(tmp_path / "flash"), 2.0, 1.0)
    for args in (("report", null_run), ("compare", null_run, flash)):
        one_line_error(gdsbench(*args, "--out", mine), f"--out {mine}: holds files gdsbench did not write",
                       "give a new or empty directory")
    assert (mine / "report.html").read_text() == "my own page" and os.listdir(mine) == ["report.html"]
    for args in (("report", null_run), ("compare", null_run, flash)):  # its own folder, again and again
        assert gdsbench(*args, "--out", tmp_path / args[0]).code == 0
        assert gdsbench(*args, "--out", tmp_path / args[0]).code == 0
    old = shutil.copytree(null_run, tmp_path / "old")  # a run's report/ from before the marker
    (old / "report").mkdir(exist_ok=True)
    (old / "report" / "report.html").write_text("an old report")
    if (old / "report" / ".gdsbench-report").exists():
        os.unlink(old / "report" / ".gdsbench-report")
    assert gdsbench("report", old).code == 0 and (old / "report" / ".gdsbench-report").exists()


def test_compare_leads_with_a_short_headline_and_says_once_how_tiers_differ(gdsbench, null_run, tmp_path):
    """Two tiers compared on purpose: one short line a person quotes, the clause behind each figure
    under it, and what makes them tiers (storage, engine, O_DIRECT, data path) said once, as a note."""
    other = faster_copy(null_run, str(tmp_path / "flash"), 3.0, 2.0)
    info = json.load(open(os.path.join(other, RUN_FILE)))
    info["environment"]["targets"] = {"s3://bucket/key": {"kind": "s3", "protocol": "s3"}}  # null_run reads no target
    json.dump(info, open(os.path.join(other, RUN_FILE), "w"))
    res = gdsbench("compare", null_run, other, "--out", tmp_path / "cmp")
    assert res.code == 0, res.err
    first, *rest = res.out.splitlines()
    assert first.startswith("flash/base: 3.0x bandwidth at 64 KiB, 3.0x IOPS at 4 KiB, 2.0x lower p99") and len(first) < 160
    assert rest[0].startswith("  3.0x bandwidth at 64 KiB, best to best (")
    tiers = [line for line in res.err.splitlines() if "tiers differ" in line]
    assert len(tiers) == 1 and "storage kind:" in tiers[0]
    assert not any("runs differ: storage" in line for line in res.err.splitlines())
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert '<p class="headline">flash/base: 3.0x bandwidth at 64 KiB, 3.0x IOPS' in page


def test_a_comparison_of_many_tiers_gives_each_its_own_colour_and_a_subtitle_that_fits(tmp_path, monkeypatch):
    """Five tiers of one curve each (the protocol page: one sweep per tier, queue depth 1): four line styles
    cannot tell five apart, so each tier is a colour too; the subtitle naming them all is wrapped."""
    spec = SweepSpec(grid={"bs": ["4K", "64K"]}, fixed={"engine": "null", "runtime": "20ms"}, repeat=1, name="one")
    store, grid, plans = start(spec, str(tmp_path / "runs"))
    run(store, grid, plans, show_progress=False)
    runs = [store.path] + [faster_copy(store.path, str(tmp_path / f"tier{k}"), factor=k + 2.0, p99_factor=1.0)
                           for k in range(4)]
    drawn, draw = {}, charts.bandwidth_vs_block_size

    def capture(curves, path, title, sub, styles):
        drawn.update(styles=[styles[name] for name, _ in curves], sub=sub)
        return draw(curves, path, title, sub, styles)

    monkeypatch.setattr(charts, "bandwidth_vs_block_size", capture)
    compare.write(compare.compare(runs), str(tmp_path / "page"))
    colours = [style["color"] for style in drawn["styles"]]
    assert len(colours) == 5 and len(set(colours)) == 5
    assert all(len(line) <= charts.CHART_LINE for line in drawn["sub"].splitlines())
