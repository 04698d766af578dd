"""``di dashboard DIR``: a local web app over a folder of runs, served on 127.0.0.1 only.

The parts, each a module:

- :mod:`~di.viewers.dashboard.runs`: which entries of the folder are runs, rescanned on every
  request of the page (cheap: a listing and a ``stat`` per file), summaries computed in the background;
- :mod:`~di.viewers.dashboard.summary`: one run's summary (ranks, GPUs, step time, breakdown,
  bottleneck, critical path) and its cache file in the per-user cache folder, keyed by the run's
  signature (files, bytes, newest mtime);
- :mod:`~di.viewers.dashboard.pages`: the report of one run and the diff of two, rendered on request
  by :mod:`di.viewers.report` (plugins' panels included) and :mod:`di.viewers.diff`;
- :mod:`~di.viewers.dashboard.server`: the HTTP server and its endpoints (Host and Origin checks as ``di view``);
- :mod:`~di.viewers.dashboard.page`: the page itself (inline CSS, JS and SVG; nothing fetched from the network).

Library code: nothing is printed; the CLI prints the URL and the ``ssh -L`` line.
"""

from __future__ import annotations

from di.viewers.dashboard.runs import Run, RunIndex, find_runs
from di.viewers.dashboard.server import DEFAULT_PORT, DashboardServer

__all__ = ["DEFAULT_PORT", "DashboardServer", "Run", "RunIndex", "find_runs"]
