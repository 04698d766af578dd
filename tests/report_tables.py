"""Reading the numbers off a ``di report`` page (its tables' ``data-v`` and ``data-key`` values)."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any


def _value(v: str | None, text: str) -> Any:
    if v is None or v == "":
        return text.strip() if text.strip() not in ("—", "") else None
    try:
        return int(v)
    except ValueError:
        return float(v)


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[dict[str, Any]]] = {}
        self.keys: dict[str, Any] = {}
        self._table: str | None = None
        self._cols: list[str] = []
        self._row: list[Any] | None = None
        self._cell: tuple[str | None, list[str], str | None] | None = None
        self._key: tuple[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table, self._cols = a.get("data-table") or "", []
            self.tables[self._table] = []
        elif tag == "th" and self._table is not None:
            self._cols.append(a.get("data-col") or "")
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = (a.get("data-v"), [], a.get("title"))  # a long text is cut in the cell, whole in its title
        elif "data-key" in a:
            self._key = (a["data-key"] or "", a.get("data-v"))

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None and self._row is not None:
            v, parts, title = self._cell
            self._row.append(_value(v, title if title is not None else "".join(parts)))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            if self._row:
                self.tables[self._table].append(dict(zip(self._cols, self._row)))
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag in ("dd", "span", "div") and self._key is not None:
            key, v = self._key
            self.keys[key] = _value(v, "")
            self._key = None


def read_page(text: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """(tables by data-table name as lists of {column: value}, data-key values)."""
    p = _Tables()
    p.feed(text)
    return p.tables, p.keys


def run_report(files: list[Path], tmp: Path) -> str:
    """The page ``di report FILES`` writes (in a fresh process, as a user runs it)."""
    out = tmp / "r.html"
    done = subprocess.run(
        [sys.executable, "-m", "di", "report", *map(str, files), "-o", str(out), "--force"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out.read_text()


def section_hints(page: str, section: str) -> list[str]:
    """The hints above the first table of the page's section ``section`` (its id)."""
    part = page[page.index(f'<section id="{section}"') :]
    part = part[: part.index("</section>")]
    return re.findall(r"<li>(.*?)</li>", part[: part.index("<table")])
