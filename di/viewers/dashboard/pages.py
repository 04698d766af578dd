"""What the dashboard renders on request: one run's report, the diff of two runs, an error page.

Each is a complete HTML document made by the viewers that already exist
(:func:`di.viewers.report.build_report` with the ``di.report_panels``
plugins, :func:`di.viewers.diff.page.build_page`), shown by the dashboard's
page in a frame. Rendered pages are kept in memory per run signature
(:class:`PageCache`), so opening a report again costs nothing until the run changes.
"""

from __future__ import annotations

import html
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from di.viewers.dashboard.runs import Run

KEEP_PAGES = 16
"""Rendered pages kept in memory (least recently used dropped first)."""


def report_page(run: Run, *, max_input_size: Any = None) -> str:
    """The HTML report of ``run`` (all panels, plugins' included; the whole trace as window).

    Raises:
        DIError, OSError, ValueError: the run cannot be read.
    """
    import di
    from di.analysis_parts import without_analysis
    from di.viewers.report import build_report

    trace = without_analysis(di.load(run.path, max_input_size=max_input_size))
    result = di.analyze(trace, per_step=True)
    page, _problems = build_report(trace, result, inputs=[run.name])  # problems are on the page ("Panels not shown")
    return page


def diff_page(a: Run, b: Run, *, max_input_size: Any = None) -> str:
    """The ``di diff`` page of A and B (deltas are B - A).

    Raises:
        DIError, OSError, ValueError: a run cannot be read.
    """
    import di
    from di.viewers.diff import diff
    from di.viewers.diff.page import build_page

    ta, tb = (di.load(r.path, max_input_size=max_input_size) for r in (a, b))
    return build_page(diff(ta, tb), names=(a.name, b.name))


def error_page(title: str, text: str) -> str:
    """A small self-contained page saying what failed."""
    from di.viewers.report.page import Section, render_page

    return render_page(
        title, "di dashboard", [Section("error", "Could not render", f'<p class="error">{html.escape(text)}</p>')]
    )


class PageCache:
    """Rendered pages by key (run names and signatures); one render per key at a time."""

    def __init__(self, keep: int = KEEP_PAGES) -> None:
        self.keep = keep
        self._pages: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self._lock = threading.Lock()
        self._busy: dict[tuple[Any, ...], threading.Lock] = {}

    def get(self, key: tuple[Any, ...], render: Callable[[], str]) -> str:
        with self._lock:
            if key in self._pages:
                self._pages.move_to_end(key)
                return self._pages[key]
            lock = self._busy.setdefault(key, threading.Lock())
        with lock:  # a second request for the same page waits for the first render
            with self._lock:
                if key in self._pages:
                    return self._pages[key]
            page = render()
            with self._lock:
                self._pages[key] = page
                while len(self._pages) > self.keep:
                    self._pages.popitem(last=False)
                self._busy.pop(key, None)
            return page
