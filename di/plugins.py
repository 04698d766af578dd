"""Plugins: Python entry points that add connectors, analyses and report panels.

A package declares them in its ``pyproject.toml``::

    [project.entry-points."di.report_panels"]
    memcpy_bandwidth = "di_memcpy_panel:panel"

Groups and the object each entry point names:

- ``di.connectors``: a :class:`di.convert.registry.Connector` (name, extensions,
  sniff, read, write): a new format for ``di convert``/``info``/``analyze``.
- ``di.analyses``: a function ``(trace: Trace, result: Analysis) -> dict[str, polars.DataFrame]``;
  ``di analyze --csv`` writes each frame as ``NAME_KEY.csv``.
- ``di.report_panels``: a function ``(ctx: di.viewers.report.ReportContext) -> Section | None``
  (see :mod:`di.viewers.report`).

Nothing is imported until a command needs a group (``import di`` stays light).
A plugin that fails to import, or names an object of the wrong kind, is
reported (``di plugins``, the report's "Panels not shown", a CLI warning) and
skipped; it never stops di.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GROUPS = ("di.connectors", "di.analyses", "di.report_panels")


@dataclass(frozen=True)
class Plugin:
    """One entry point: ``name = value`` in ``group`` from distribution ``dist``;
    ``obj`` once loaded, or ``error`` (one line) when it could not be."""

    group: str
    name: str
    value: str
    dist: str
    obj: Any = None
    error: str | None = None


@dataclass(frozen=True)
class Loaded:
    """The plugins of one group: those that loaded and those that failed."""

    ok: list[Plugin] = field(default_factory=list)
    failed: list[Plugin] = field(default_factory=list)


def _check(group: str, obj: Any) -> str | None:
    if group == "di.connectors":
        from di.convert.registry import Connector

        return None if isinstance(obj, Connector) else f"not a di.convert.registry.Connector but {type(obj).__name__}"
    return None if callable(obj) else f"not callable ({type(obj).__name__})"


_cache: dict[str, Loaded] = {}


def load_group(group: str, *, refresh: bool = False) -> Loaded:
    """Import every entry point of ``group`` (cached per process unless ``refresh``)."""
    if group not in GROUPS:
        raise ValueError(f"unknown plugin group {group!r}; known: {', '.join(GROUPS)}")
    if group in _cache and not refresh:
        return _cache[group]
    from importlib.metadata import entry_points

    out = Loaded()
    seen: set[tuple[str, str]] = set()
    for ep in entry_points(group=group):
        if (ep.name, ep.value) in seen:  # the same distribution found twice on sys.path
            continue
        seen.add((ep.name, ep.value))
        dist = ep.dist.name if ep.dist is not None else "?"
        try:
            obj = ep.load()
            problem = _check(group, obj)
        except Exception as exc:  # any error of a third-party import is that plugin's, not di's
            obj, problem = None, f"{type(exc).__name__}: {exc}".splitlines()[0]
        plugin = Plugin(group, ep.name, ep.value, dist, None if problem else obj, problem)
        (out.failed if problem else out.ok).append(plugin)
    _cache[group] = out
    return out


def all_plugins(*, refresh: bool = False) -> list[Plugin]:
    """Every plugin of every group, loaded ones first within a group."""
    found: list[Plugin] = []
    for g in GROUPS:
        loaded = load_group(g, refresh=refresh)
        found += loaded.ok + loaded.failed
    return found


def run_analyses(trace: Any, result: Any) -> tuple[dict[str, Any], list[str]]:
    """Run every ``di.analyses`` plugin on a trace and its :class:`di.engine.Analysis`.

    Returns:
        ({"PLUGIN_KEY": polars.DataFrame}, problems): the frames of the plugins that
        ran, and one line per plugin that failed to load, raised or returned
        something other than a dict of DataFrames.
    """
    import polars as pl

    loaded = load_group("di.analyses")
    frames: dict[str, Any] = {}
    problems = [f"plugin {p.name} ({p.value}) skipped: {p.error}" for p in loaded.failed]
    for p in loaded.ok:
        try:
            out = p.obj(trace, result)
            if not isinstance(out, dict) or not all(isinstance(v, pl.DataFrame) for v in out.values()):
                raise TypeError(f"returned {type(out).__name__}, not a dict of polars DataFrames")
        except Exception as exc:  # a plugin's bug must not take di analyze down
            problems.append(f"analysis plugin {p.name} failed: {type(exc).__name__}: {exc}")
            continue
        frames.update({f"{p.name}_{k}": v for k, v in out.items()})
    return frames, problems
