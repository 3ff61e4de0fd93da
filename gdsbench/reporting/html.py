"""One self-contained HTML page (images embedded, no network) from sections,
shared by `gdsbench report` and `gdsbench compare`."""

from __future__ import annotations

import base64
import contextlib
import html
import os
from collections.abc import Iterable, Sequence

from gdsbench.job.errors import UsageError

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } .headline { font-size: 1.2em; font-weight: 600; margin: 1em 0; }
.warn { color: #a40; } img { max-width: 100%; }
"""


@contextlib.contextmanager
def writing_pages(out_dir: str, flag: str = "--out"):
    """Make out_dir, and turn a failure to write in it (no space, read-only,
    not a directory) into one line naming it: the runs' points are never at stake."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"{flag} {out_dir}: is a file; give a directory for the pages")
    try:
        os.makedirs(out_dir, exist_ok=True)
        yield out_dir
    except OSError as e:
        raise UsageError(f"{flag} {out_dir}: cannot write the pages there: {e.strerror}; the runs' points are "
                         "unchanged") from None


def esc(text: object) -> str:
    return html.escape(str(text))


def image(png_path: str, alt: str) -> str:
    with open(png_path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def write_page(path: str, title: str, sections: Sequence[tuple[str, str]]) -> None:
    """sections: (heading, html body); a heading of '' adds the body without one."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title>",
             f"<style>{STYLE}</style></head><body><h1>{esc(title)}</h1>"]
    for heading, body in sections:
        if heading:
            parts.append(f"<h2>{esc(heading)}</h2>")
        parts.append(body)
    parts.append("</body></html>")
    with open(path, "w") as f:
        f.write("\n".join(parts))
