"""scripts/figures: every measured figure in README.md and docs/ is tied to the committed result it
quotes, and the check fails, naming the page, the figure and the source, once they differ."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_figures():
    loader = importlib.machinery.SourceFileLoader("figures_script", os.path.join(ROOT, "scripts", "figures"))
    spec = importlib.util.spec_from_loader("figures_script", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


figures = load_figures()


def check(root, capsys, *flags) -> tuple[int, str]:
    code = figures.main(["--check", *flags], root=str(root))
    captured = capsys.readouterr()
    return code, captured.err + captured.out


def test_every_figure_in_the_docs_matches_its_committed_source(capsys):
    code, out = check(ROOT, capsys)
    assert code == 0, out
    assert "all match their sources" in out


TABLE = """# a benchmark

| job | ratio (CI) | p50 |
|---|---|---|
| psync 4K | **1.044** (0.923-1.053) | 27.8 µs |
| io_uring 4K | **1.152** (1.030-1.230) | 181 µs |
| null 4K | **3.025** (2.671-3.142) | 30 ns |
"""

PAGE = """# A page

The psync row came out at 1.04<!--= t.md row="psync 4K" col="ratio (CI)" --> of fio's
(interval down to 0.923<!--= t.md row="psync 4K" col="ratio (CI)" n=2 -->), its p50
0.0278 ms<!--= t.md row="psync 4K" col=p50 -->; the O_DIRECT rows
1.044<!--= t.md row~"4K$" col="ratio (CI)" min --> to 3.0<!--= t.md row~"4K$" col="ratio (CI)" max -->,
3<!--= t.md count --> rows. The run read 1.5 GiB/s<!--= t.json path=runs/name=b/bandwidth --> in
2<!--= t.json path=runs count --> runs; the page says 7.4x<!--= p.html re="([\\d.]+x) lower p99" -->.
A parameter, 5 ms<!--~-->, is no measurement.

<!--table t.md cols="job|p50"-->
| job | p50 |
|---|---|
| psync 4K | 27.8 µs |
| io_uring 4K | 181 µs |
| null 4K | 30 ns |
<!--/table-->
"""


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "results" / "benchmarks").mkdir(parents=True)
    (tmp_path / "results" / "benchmarks" / "t.md").write_text(TABLE)
    (tmp_path / "results" / "benchmarks" / "t.json").write_text(json.dumps(
        {"runs": [{"name": "a", "bandwidth": 1e9}, {"name": "b", "bandwidth": 1.5 * 2**30}]}))
    (tmp_path / "results" / "p.html").write_text("<p><b>7.4x lower p99</b> at the best points</p>")
    (tmp_path / "README.md").write_text("# r\n")
    (tmp_path / "docs" / "page.md").write_text(PAGE)
    return tmp_path


def test_each_kind_of_tie_matches_as_printed(tree, capsys):
    code, out = check(tree, capsys)
    assert code == 0, out
    assert "9 figures and 1 tables tied" in out


@pytest.mark.parametrize("old, new, figure", [
    ("**1.044** (0.923-1.053)", "**1.064** (0.923-1.053)", "1.04"),  # a cell, rounded as printed
    ("(0.923-1.053)", "(0.823-1.053)", "0.923"),  # the second number in a cell
    ("27.8 µs", "29.8 µs", "0.0278 ms"),  # another unit
    ("**3.025**", "**3.125**", "3.0"),  # the max of several rows
])
def test_a_changed_source_figure_fails_the_check_naming_page_figure_and_source(tree, capsys, old, new, figure):
    source = tree / "results" / "benchmarks" / "t.md"
    source.write_text(source.read_text().replace(old, new, 1))
    code, out = check(tree, capsys)
    assert code == 1
    line = next(line for line in out.splitlines() if f": {figure} quotes" in line)
    assert line.startswith("docs/page.md:") and "results/benchmarks/t.md" in line


def test_a_changed_json_value_regex_and_copied_table_fail_too(tree, capsys):
    (tree / "results" / "benchmarks" / "t.json").write_text(json.dumps(
        {"runs": [{"name": "a", "bandwidth": 1e9}, {"name": "b", "bandwidth": 1.7 * 2**30}, {"name": "c"}]}))
    (tree / "results" / "p.html").write_text("<p>7.9x lower p99</p>")
    md = tree / "results" / "benchmarks" / "t.md"
    md.write_text(md.read_text().replace("30 ns", "31 ns"))
    code, out = check(tree, capsys)
    assert code == 1
    assert "1.5 GiB/s quotes results/benchmarks/t.json path=runs/name=b/bandwidth, which is now 1.7 GiB/s" in out
    assert "2 quotes results/benchmarks/t.json path=runs: count, which is now 3" in out
    assert "7.4x quotes results/p.html" in out
    assert "row 'null 4K', column 'p50' reads '30 ns', the source '31 ns'" in out


def test_rewriting_takes_every_figure_and_table_from_its_source(tree, capsys):
    md = tree / "results" / "benchmarks" / "t.md"
    md.write_text(md.read_text().replace("**1.044**", "**1.064**").replace("30 ns", "31 ns"))
    assert figures.main([], root=str(tree)) == 0
    page = (tree / "docs" / "page.md").read_text()
    assert "came out at 1.06<!--=" in page and "| null 4K | 31 ns |" in page
    assert check(tree, capsys)[0] == 0


def test_a_figure_tied_to_nothing_or_a_broken_tie_fails_the_check(tree, capsys):
    page = tree / "docs" / "page.md"
    page.write_text(page.read_text() + "\nIt ran at 2.35 GiB/s on a good day.\n"
                    "And 9.9<!--= t.md row=\"no such row\" col=p50 -->.\n")
    code, out = check(tree, capsys)
    assert code == 1
    assert "docs/page.md:19: 2.35 GiB/s: looks measured but quotes no result" in out
    assert "docs/page.md:20: 9.9: results/benchmarks/t.md, column 'p50': 0 values match" in out


def test_the_committed_tree_fails_when_a_quoted_result_changes(tmp_path, capsys):
    """The real pages against a copy of the real results where the cell the README's first tie to a
    table quotes has changed."""
    for part in ("README.md", "docs", "results"):
        src = os.path.join(ROOT, part)
        if os.path.isdir(src):  # the committed results, not a benchmark's scratch files beside them
            shutil.copytree(src, tmp_path / part, ignore=shutil.ignore_patterns("scratch", "*.dat*", "*.png", "*.parquet"))
        else:
            shutil.copy(src, tmp_path / part)
    readme = (tmp_path / "README.md").read_text()
    ties = [figures.shlex.split(m["selector"]) for m in figures.MARK_RE.finditer(readme)]
    words = next(w for w in ties if w[0].endswith(".md") and "/" not in w[0] and not set(w) & set(figures.AGGREGATES)
                 and any(x.startswith("row=") for x in w) and any(x.startswith("col=") for x in w))
    options = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    source = tmp_path / "results" / "benchmarks" / words[0]
    header, rows = figures.markdown_tables(source.read_text())[0]
    cell = next(r for r in rows if figures.plain(r[0]) == options["row"])[header.index(options["col"])]
    number = figures.parse_cell(cell).text_number
    changed = cell.replace(number, number.replace(number[-1], str((int(number[-1]) + 5) % 10)), 1)
    source.write_text(source.read_text().replace(f"| {cell} |", f"| {changed} |"))
    code, out = check(tmp_path, capsys)
    assert code == 1
    assert any(line.startswith("README.md:") and f"quotes results/benchmarks/{words[0]}" in line
               for line in out.splitlines()), out
