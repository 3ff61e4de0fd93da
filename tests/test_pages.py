"""The report and compare pages in a real browser (headless Chromium, driven
by playwright), at a desktop width and at phone width, as a storage engineer
would open them. Marked `browser`: skipped with the reason where no browser
or playwright is installed (`apt-get install chromium`, `pip install
playwright`); run them alone with `pytest -m browser`."""

import os
import shutil

import pytest

from gdsbench import cli
from gdsbench.reporting import compare, report
from gdsbench.sweep.grid import SweepSpec
from gdsbench.sweep.session import run, start

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
WIDTHS = {"desktop": (1400, 900), "phone": (390, 844)}
MIN_BODY_PX = 12


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install playwright)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """A report and a comparison of two small runs (null engine, two tiers by name)."""
    results = str(tmp_path_factory.mktemp("runs"))
    dirs = []
    for name, runtime in (("slow", "40ms"), ("fast", "60ms")):
        spec = SweepSpec(grid={"bs": ["4K", "64K"], "qd": [1, 4, 16]}, fixed={"engine": "null", "runtime": runtime},
                         name=name)
        store, grid, plans = start(spec, results)
        run(store, grid, plans, show_progress=False)
        dirs.append(store.path)
    rep = report.build(dirs[0]).html_path
    cmp = compare.write(compare.compare(dirs), os.path.join(results, "cmp"))
    # a train run of 1 and 2 accelerators on a small dataset, with the prediction beside it
    shape = ["--workload", "unet3d", "--record-bytes", "64K", "--record-stdev", "16K", "--batch", "2",
             "--read-threads", "2", "--compute-time", "5ms"]
    dataset = os.path.join(results, "ds")
    assert cli.main(["prepare", dataset, "--files", "60", *shape]) == 0
    assert cli.main(["train", dataset, *shape, "--accelerators", "1,2", "--steps", "10", "--predict",
                     "--probe-seconds", "0.3", "--name", "pages", "--results", os.path.join(results, "train")]) == 0
    run_dir = os.path.join(results, "train", os.listdir(os.path.join(results, "train"))[0])
    return {"report": rep, "compare": cmp, "train": os.path.join(run_dir, "report", "report.html")}


def open_page(browser, path, size):
    phone = size[0] < 600  # as a phone lays out a page: without a viewport tag, 980 px wide, shrunk to fit
    page = browser.new_page(viewport={"width": size[0], "height": size[1]}, is_mobile=phone, has_touch=phone,
                            device_scale_factor=3 if phone else 1)
    problems = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("request", lambda r: problems.append(f"external request: {r.url}")
            if not r.url.startswith(("file:", "data:")) else None)
    page.goto(f"file://{path}")
    page.wait_for_load_state("load")
    return page, problems


@pytest.mark.parametrize("which", ["report", "compare", "train"])
@pytest.mark.parametrize("width", list(WIDTHS))
def test_page_loads_clean_and_is_readable(browser, pages, which, width):
    page, problems = open_page(browser, pages[which], WIDTHS[width])
    broken = page.evaluate("[...document.images].filter(i => !i.complete || i.naturalWidth === 0).length")
    assert broken == 0, "an image did not load"
    assert not problems, problems
    # the size text is drawn at on the screen: its CSS size, times the shrink of a page laid out wider than it
    smallest = page.evaluate("""() => {
        const shrink = screen.width / document.documentElement.clientWidth;
        let min = 1e9;
        for (const el of document.querySelectorAll('p, li, td, th, h1, h2')) {
            if (!el.innerText.trim()) continue;
            min = Math.min(min, parseFloat(getComputedStyle(el).fontSize) * Math.min(shrink, 1));
        }
        return min; }""")
    assert smallest >= MIN_BODY_PX, f"text drawn at {smallest:.1f} CSS px"
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 1, f"the page is {overflow} px wider than the screen: something does not wrap or scroll"
    page.close()


@pytest.mark.parametrize("which", ["report", "compare", "train"])
def test_on_a_phone_charts_keep_a_readable_width_and_what_scrolls_says_so(browser, pages, which):
    """A chart's labels are drawn for about 990 px: shrunk to a phone's width they were about 4 px.
    It keeps at least 760 px and scrolls sideways, and everything that scrolls shows an edge shadow."""
    page, problems = open_page(browser, pages[which], WIDTHS["phone"])
    widths = page.evaluate("[...document.querySelectorAll('img')].map(i => i.getBoundingClientRect().width)")
    assert widths and min(widths) >= 760, widths
    scrollers = page.evaluate("""[...document.querySelectorAll('img, table')].map(el => {
        const box = el.closest('.scroll');
        return box ? getComputedStyle(box).backgroundImage : 'none'; })""")
    assert all("gradient" in s for s in scrollers), scrollers
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 1 and not problems, (overflow, problems)
    page.close()


def test_screenshots(browser, pages, tmp_path):
    """Both pages at both widths, full page (kept under results/ by benchmarks/pages.py)."""
    for which in pages:
        for width, size in WIDTHS.items():
            page, _ = open_page(browser, pages[which], size)
            out = tmp_path / f"{which}-{width}.png"
            page.screenshot(path=str(out), full_page=True)
            assert out.stat().st_size > 10_000
            page.close()
