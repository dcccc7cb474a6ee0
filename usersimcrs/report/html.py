"""One self-contained HTML page: inline CSS, tables as HTML, plots as base64 PNG data URIs.

Nothing is loaded from outside (no scripts, fonts or style sheets), so the file reads offline and
can be mailed or archived as is. Every plot and table also lands in the report folder as a file,
and the page names that file (``data-file``) next to the embedded copy.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from usersimcrs.core.storage import write_atomic
from usersimcrs.report.tables import html_table, write_table

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1200px;
color:#1d232a;padding:0 1rem;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.25rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem;
margin-top:2.2rem}h3{font-size:1.05rem;margin-top:1.4rem}
.meta{color:#57606a;font-size:.9rem}
table.data{border-collapse:collapse;font-size:.82rem;margin:.6rem 0 1rem}
table.data th,table.data td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left}
table.data th{background:#f6f8fa}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #eaeef2}
figcaption{font-size:.85rem;color:#57606a}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:.5rem .8rem;font-size:.88rem}
.verdict{background:#ddf4ff;border:1px solid #54aeff;padding:.5rem .8rem;font-size:.95rem}
nav a{margin-right:1rem;font-size:.9rem}
details.section{margin-top:1.6rem;border-top:1px solid #d0d7de}
details.section>summary{cursor:pointer;list-style:revert}
details.section>summary h2{display:inline;border:none;font-size:1.15rem;margin:0}
"""


@dataclass
class Report:
    """Collects sections; `write` saves the page, its PNGs (plots/) and tables (tables/)."""

    title: str
    subtitle: str = ""
    blocks: list[str] = field(default_factory=list)
    plots: dict[str, bytes] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    sections: list[tuple[str, str]] = field(default_factory=list)
    _folded_open: bool = False

    def section(self, title: str, *, folded: bool = False) -> None:
        """Start a section; a `folded` one is a <details> block the reader opens (no script needed)."""
        anchor = "s" + str(len(self.sections) + 1)
        self.sections.append((anchor, title))
        self._close_fold()
        if folded:
            self.blocks.append(
                f'<details class="section" id="{anchor}"><summary><h2>{html.escape(title)}</h2></summary>'
            )
            self._folded_open = True
        else:
            self.blocks.append(f'<h2 id="{anchor}">{html.escape(title)}</h2>')

    def _close_fold(self) -> None:
        if self._folded_open:
            self.blocks.append("</details>")
            self._folded_open = False

    def heading(self, title: str) -> None:
        self.blocks.append(f"<h3>{html.escape(title)}</h3>")

    def text(self, text: str, *, note: bool = False, verdict: bool = False) -> None:
        css = ' class="note"' if note else (' class="verdict"' if verdict else "")
        self.blocks.append(f"<p{css}>{html.escape(text)}</p>")

    def table(self, name: str, table: pd.DataFrame, *, caption: str = "", digits: int = 3) -> None:
        """Add a table (kept for tables/<name>.csv and .md)."""
        name = _unique(name, self.tables)
        self.tables[name] = table
        cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
        self.blocks.append(
            f'<figure class="table" id="table-{name}" data-file="tables/{name}.csv">{cap}'
            f"{html_table(table, digits=digits)}</figure>"
        )

    def plot(self, name: str, png: bytes, *, caption: str = "") -> None:
        """Add a plot (kept for plots/<name>.png) embedded as a data URI."""
        name = _unique(name, self.plots)
        self.plots[name] = png
        data = base64.b64encode(png).decode("ascii")
        cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
        self.blocks.append(
            f'<figure class="plot" id="plot-{name}" data-file="plots/{name}.png">'
            f'<img alt="{html.escape(caption or name)}" src="data:image/png;base64,{data}">{cap}</figure>'
        )

    def render(self) -> str:
        nav = " ".join(f'<a href="#{a}">{html.escape(t)}</a>' for a, t in self.sections)
        sub = f'<p class="meta">{html.escape(self.subtitle)}</p>' if self.subtitle else ""
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(self.title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{html.escape(self.title)}</h1>{sub}<nav>{nav}</nav>\n"
            + "\n".join(self.blocks)
            + ("\n</details>" if self._folded_open else "")
            + "\n</body></html>\n"
        )

    def write(self, folder: str | Path, *, page: str | Path | None = None) -> Path:
        """Write plots/ and tables/ under `folder`, and the page (default folder/report.html)."""
        folder = Path(folder)
        for name, png in self.plots.items():
            write_atomic(folder / "plots" / f"{name}.png", png)
        for name, table in self.tables.items():
            write_table(table, folder / "tables", name)
        _remove_stale(folder / "plots", {f"{n}.png" for n in self.plots})
        _remove_stale(folder / "tables", {f"{n}{ext}" for n in self.tables for ext in (".csv", ".md")})
        target = Path(page) if page else folder / "report.html"
        write_atomic(target, self.render())  # each file whole or not at all (a full disk leaves no 0-byte page)
        return target


def _remove_stale(folder: Path, written: set[str]) -> None:
    """Drop plots and tables an earlier report wrote here but this one did not (the page names every file)."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.is_file() and path.suffix in (".png", ".csv", ".md") and path.name not in written:
            path.unlink()


def _unique(name: str, taken: dict) -> str:
    base = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name) or "item"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    return candidate
