"""One self-contained HTML page (images embedded, no network) from sections,
shared by `gdsbench report` and `gdsbench compare`."""

from __future__ import annotations

import base64
import contextlib
import html
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gdsbench.job.errors import UsageError

STYLE = """
body { font-family: system-ui, sans-serif; font-size: 16px; line-height: 1.4; margin: 1.5em auto; max-width: 1100px;
       padding: 0 12px; color: #222; overflow-wrap: anywhere; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }
/* what scrolls sideways shows a shadow at the edge where more is hidden (the shadows scroll away
   with the content: background-attachment local over scroll) */
.scroll { overflow-x: auto; max-width: 100%;
  background: linear-gradient(to right, #fff 30%, #fff0), linear-gradient(to left, #fff 30%, #fff0) 100% 0,
    radial-gradient(farthest-side at 0 50%, #0003, #0000), radial-gradient(farthest-side at 100% 50%, #0003, #0000) 100% 0;
  background-repeat: no-repeat; background-size: 40px 100%, 40px 100%, 14px 100%, 14px 100%;
  background-attachment: local, local, scroll, scroll; }
/* a chart keeps a width its text can be read at (its labels are drawn for about 990 px): on a
   phone it scrolls sideways, as a wide table does, and links to its full-size PNG */
.chart img { min-width: 760px; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
td, th { overflow-wrap: normal; }  /* a table scrolls sideways (.scroll): never break inside a word */
th { background: #f3f3f3; } .headline { font-size: 1.2em; font-weight: 600; margin: 1em 0; }
.notice { border-left: 4px solid #c60; background: #fff6ec; padding: 0.4em 0.8em; margin: 0.5em 0; }
.rule { color: #555; font-size: 0.9em; }
.warn { color: #a40; } img { max-width: 100%; height: auto; }
"""


MARKER = ".gdsbench-report"  # in every folder gdsbench writes pages into: a folder it may write again


@dataclass
class Report:
    """What a page module's build() returns, for every kind of run."""
    html_path: str
    charts: dict[str, str]  # name -> PNG path
    # what -> value, in page order: `gdsbench report` prints them, the answer first (a sweep's best points, a
    # train run's verdict on AU, a checkpoint run's mean duration and throughput)
    summary: dict[str, str] = field(default_factory=dict)


@contextlib.contextmanager
def writing_pages(out_dir: str, flag: str = "--out", chosen: bool = True):
    """Make out_dir, and turn a failure to write in it (no space, read-only,
    not a directory) into one line naming it: the runs' points are never at stake.
    A folder the user chose (chosen) that holds files gdsbench did not write (no
    MARKER) is refused: gdsbench never overwrites a file it did not create."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"{flag} {out_dir}: is a file; give a directory for the pages")
    try:
        if chosen and os.path.isdir(out_dir) and os.listdir(out_dir) and not os.path.exists(
                os.path.join(out_dir, MARKER)):
            raise UsageError(f"{flag} {out_dir}: holds files gdsbench did not write (it has no {MARKER}), and "
                             "gdsbench never overwrites files of yours; give a new or empty directory")
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, MARKER), "w") as f:
            f.write("pages written by gdsbench: it may write here again\n")
        yield out_dir
    except OSError as e:
        raise UsageError(f"{flag} {out_dir}: cannot write the pages there: {e.strerror}; the runs' points are "
                         "unchanged") from None


def run_pages(run_dir: str, out_dir: str | None):
    """writing_pages for a run's page: out_dir, or the run's own report/ (a folder inside the run is
    gdsbench's, marked or not: runs made before MARKER existed have a report/ without it)."""
    out = out_dir or os.path.join(run_dir, "report")
    inside = os.path.realpath(out).startswith(os.path.join(os.path.realpath(run_dir), ""))
    return writing_pages(out, "--out" if out_dir else "the report", chosen=not inside)


def left_out(problems: Sequence[str]) -> list[tuple[str, str]]:
    """A page's section naming the saved lines it leaves out (unreadable or damaged), where there are any."""
    if not problems:
        return []
    return [("Left out: saved lines that could not be read",
             "".join(f"<p class='notice'>{esc(p)}</p>" for p in problems))]


def esc(text: object) -> str:
    return html.escape(str(text))


def image(png_path: str, alt: str) -> str:
    """The chart embedded (the page stands alone), linked to its PNG file beside the page for full size."""
    with open(png_path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    return (f'<div class="scroll chart"><a href="{esc(os.path.basename(png_path))}"><img alt="{esc(alt)}" '
            f'src="data:image/png;base64,{data}"></a></div>')


_QUANTITY = re.compile(r"^([-\d.,]+) ([A-Za-zµ/%]+)$")


def cell(value: object) -> str:
    """A table cell's text; a quantity ("3.12 GiB/s") never wraps between number and unit."""
    text = esc(value)
    return _QUANTITY.sub(r"\1&nbsp;\2", text)


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A table that scrolls sideways on a narrow screen instead of squeezing its columns."""
    head = f"<tr>{''.join(f'<th>{esc(h)}</th>' for h in header)}</tr>" if any(header) else ""
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table>{head}{body}</table></div>'


def write_page(path: str, title: str, sections: Sequence[tuple[str, str]]) -> None:
    """sections: (heading, html body); a heading of '' adds the body without one."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'>"
             f"<title>{esc(title)}</title>",
             f"<style>{STYLE}</style></head><body><h1>{esc(title)}</h1>"]
    for heading, body in sections:
        if heading:
            parts.append(f"<h2>{esc(heading)}</h2>")
        parts.append(body)
    parts.append("</body></html>")
    with open(path, "w") as f:
        f.write("\n".join(parts))
