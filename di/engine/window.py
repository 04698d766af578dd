"""Which part of a trace the analyses look at, and the per-event arrays they share.

A window is either a slice of steps in Python slice notation over the sorted
step ids of the job (``steps=:-1`` = all but the last step, which the
profiler usually cuts short and HolisticTraceAnalysis drops by default;
``steps=2:5``, ``steps=3``) or a time range ``time=T0:T1`` relative to the
trace start, with a unit suffix ns (default), us, ms or s; either end may be
left open. A steps window keeps the events that belong to the selected steps
(GPU work by its launching CPU call); a time window keeps what overlaps the
range and clips intervals to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from di.engine.classify import activities, call_only_locations, location_arrays
from di.engine.steps import NO_STEP, event_steps, find_steps
from di.trace import Trace

_UNIT_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_INT64_MIN, _INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


@dataclass(frozen=True)
class Window:
    """A slice of steps (``steps``) or a time range ``[t0_ns, t1_ns)`` relative to the trace start."""

    steps: slice | None = None
    t0_ns: int | None = None
    t1_ns: int | None = None
    text: str = "all"


def parse_window(text: str | None) -> Window:
    """Parse ``steps=SLICE`` or ``time=T0:T1`` (None, empty or ``all``: the whole trace).

    Raises:
        ValueError: the text is neither, naming what was expected.
    """
    if not text or text.strip() == "all":  # "all": what the results call the whole trace
        return Window()
    key, _, value = text.partition("=")
    key = key.strip()
    if key == "steps" and value:
        parts = value.split(":")
        if len(parts) > 3 or not all(re.fullmatch(r"\s*-?\d*\s*", p) for p in parts):
            raise ValueError(f"--window {text!r}: steps takes a Python slice such as :-1, 2:5 or 3")
        nums = [int(p) if p.strip() else None for p in parts]
        if len(nums) == 1:
            i = nums[0]
            if i is None:
                raise ValueError(f"--window {text!r}: empty step index")
            return Window(steps=slice(i, i + 1 if i != -1 else None), text=text)
        return Window(steps=slice(*nums), text=text)
    if key == "time" and ":" in value:
        a, b = value.split(":", 1)
        return Window(t0_ns=_time(a, text), t1_ns=_time(b, text), text=text)
    raise ValueError(f"--window {text!r}: expected steps=SLICE (e.g. steps=:-1) or time=T0:T1 (e.g. time=0.5s:2s)")


def _time(s: str, text: str) -> int | None:
    s = s.strip()
    if not s:
        return None
    m = re.fullmatch(r"(-?\d+(?:\.\d*)?)\s*(ns|us|ms|s)?", s)
    if not m:
        raise ValueError(f"--window {text!r}: {s!r} is not a time such as 1500000, 250us, 2.5ms or 1s")
    from decimal import Decimal

    return int(Decimal(m.group(1)) * _UNIT_NS[m.group(2) or "ns"])


@dataclass(frozen=True)
class EventFrame:
    """Per-event arrays shared by the analyses (one entry per ``events`` row).

    Attributes:
        trace: the trace analysed (never modified).
        rank, device: int64 rank and GPU device (-1 off GPU) of each event's timeline.
        on_gpu: the event is on a GPU stream.
        activity: int8 code, see :mod:`di.engine.classify`.
        step: step id (int64) or NO_STEP.
        selected: inside the window.
        start_ns, end_ns: event times (int64 ns), clipped to a time window.
        steps: the job's steps inside the window (rank, step, label, start_ns, end_ns, source).
        window: the window applied.
        call_only: the event's timeline records only calls, so the time between its
            events is untraced work, not idle (:func:`~di.engine.classify.call_only_locations`).
        memo: what several analyses derive from the frame alike, kept by the one that derives it first
            (:func:`di.engine.launches.launch_calls`); a frame made from this one (``dataclasses.replace``)
            starts with an empty one.
    """

    trace: Trace
    rank: np.ndarray
    device: np.ndarray
    on_gpu: np.ndarray
    activity: np.ndarray
    step: np.ndarray
    selected: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    steps: pl.DataFrame
    window: Window
    call_only: np.ndarray
    memo: dict[Any, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "memo", {})

    @property
    def ranks(self) -> list[int]:
        """Ranks of the job (sorted)."""
        return self.trace.ranks


def prepare(trace: Trace, window: Window | None = None) -> EventFrame:
    """Classify, assign steps and apply the window (O(n log n) in the events)."""
    window = window or Window()
    rank, on_gpu, device = location_arrays(trace)
    steps = find_steps(trace)
    step = event_steps(trace, steps, rank, on_gpu)
    selected, start, end, steps = _select(trace, window, steps, step)
    call_only = call_only_locations(trace)[trace.events.get_column("loc").to_numpy().astype(np.int64)]
    return EventFrame(
        trace, rank, device, on_gpu, activities(trace), step, selected, start, end, steps, window, call_only
    )


def window_events(trace: Trace, window: Window | str | None) -> pl.DataFrame:
    """The events the analyses see in ``window``: rows of ``trace.events`` (as stored, plus ``row``, their
    position) that the window keeps, with ``start_ns``/``end_ns`` clipped to a time window, exactly as
    :func:`prepare` selects them for :func:`di.analyze`. ``window``: a Window, its text, or None / ``"all"``."""
    win = window if isinstance(window, Window) else parse_window(None if window == "all" else window)
    ev = trace.events.with_row_index("row")
    if win.steps is None and win.t0_ns is None and win.t1_ns is None:
        return ev
    rank, on_gpu, _ = location_arrays(trace)
    steps = find_steps(trace)
    selected, start, end, _ = _select(trace, win, steps, event_steps(trace, steps, rank, on_gpu))
    return ev.with_columns(pl.Series("start_ns", start), pl.Series("end_ns", end)).filter(pl.Series(selected))


def time_bounds(trace: Trace, window: Window) -> tuple[int, int]:
    """[lo, hi) in ns of a time window: its ``t0``/``t1`` from the trace's start (``meta.time_range.start_ns``,
    else its first event's start), an open end the int64 limit."""
    start = trace.events.get_column("start_ns")
    base = int(trace.meta.get("time_range", {}).get("start_ns") or (start.min() if start.len() else 0))
    lo = _INT64_MIN if window.t0_ns is None else base + window.t0_ns
    hi = _INT64_MAX if window.t1_ns is None else base + window.t1_ns
    return lo, hi


def _select(
    trace: Trace, window: Window, steps: pl.DataFrame, step: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, pl.DataFrame]:
    """(selected, start_ns, end_ns clipped to a time window, the steps inside the window)."""
    start = trace.events.get_column("start_ns").to_numpy()
    end = trace.events.get_column("end_ns").to_numpy()
    selected = np.ones(start.size, bool)
    if window.steps is not None:
        ids = sorted(steps.get_column("step").unique().to_list())[window.steps]
        selected = np.isin(step, np.asarray(ids, np.int64)) & (step != NO_STEP)
        steps = steps.filter(pl.col("step").is_in(ids))
    elif window.t0_ns is not None or window.t1_ns is not None:
        lo, hi = time_bounds(trace, window)
        selected = (end > lo) & (start < hi) | ((start == end) & (start >= lo) & (start < hi))
        start, end = np.clip(start, lo, hi), np.clip(end, lo, hi)
        steps = steps.filter((pl.col("end_ns") > lo) & (pl.col("start_ns") < hi))
    return selected, start, end, steps
