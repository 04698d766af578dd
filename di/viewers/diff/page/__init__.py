"""The self-contained HTML page of a :class:`di.viewers.diff.Diff`, built with the report's page helpers.

Everything is inline (:func:`di.viewers.report.page.render_page`: CSS, the
sort script, SVG), nothing is fetched. Numeric cells carry their exact value
in ``data-v`` (ns, bytes and floating-point operations as integers; memory is shown in MiB, 2^20 bytes, work in
TFLOP, 10^12 operations) as in ``di report``, so the page can be checked against ``di diff --json``.

This module assembles the page; its sections come from one module per analysis:
:mod:`~di.viewers.diff.page.summary` (step time and the biggest changes), :mod:`~di.viewers.diff.page.names`
(kernels, launch stacks and operators by name), :mod:`~di.viewers.diff.page.collectives` (collectives and
communicators), :mod:`~di.viewers.diff.page.counters`, :mod:`~di.viewers.diff.page.breakdown` (breakdown, overlap,
GPU idle), :mod:`~di.viewers.diff.page.phases`, :mod:`~di.viewers.diff.page.memory`,
:mod:`~di.viewers.diff.page.flops` and :mod:`~di.viewers.diff.page.critical_path`;
:mod:`~di.viewers.diff.page.cells` holds what they share.
"""

from __future__ import annotations

import time

from di.viewers.diff import Diff
from di.viewers.diff.page.breakdown import breakdown_section, gpu_idle_section
from di.viewers.diff.page.cells import ROWS
from di.viewers.diff.page.collectives import collectives_section, communicators_section
from di.viewers.diff.page.counters import counters_section
from di.viewers.diff.page.critical_path import critical_path_section
from di.viewers.diff.page.flops import flops_section
from di.viewers.diff.page.memory import memory_section
from di.viewers.diff.page.names import NAMED, kernels_section, named_section, stacks_section
from di.viewers.diff.page.phases import phases_section
from di.viewers.diff.page.summary import MIB, changes_section, summary_section
from di.viewers.report.page import render_page

__all__ = ["MIB", "NAMED", "ROWS", "build_page"]


def build_page(d: Diff, *, names: tuple[str, str] = ("A", "B")) -> str:
    """The HTML document; ``names``: how A and B are shown."""
    sections = [
        s
        for s in (
            summary_section(d, names),
            changes_section(d),
            kernels_section(d),
            stacks_section(d),
            named_section(d.ops, "ops", "Operators (CPU) by name"),
            collectives_section(d),
            counters_section(d),
            communicators_section(d),
            breakdown_section(d),
            phases_section(d),
            gpu_idle_section(d),
            memory_section(d),
            flops_section(d),
            critical_path_section(d),
        )
        if s is not None
    ]
    title = f"di diff: {names[0]} → {names[1]}"
    return render_page(
        title,
        f"A = {names[0]} · B = {names[1]} · window {d.window} · Δ = B - A · di diff {time.strftime('%Y-%m-%d %H:%M')}",
        sections,
    )
