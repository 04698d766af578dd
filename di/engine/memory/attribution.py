"""What an allocator event happened in: its operator, module and phase of the training step (:func:`attribution`).

Definitions in :mod:`di.engine.memory`: the op is the outermost CPU operator (cat ``compute``) enclosing the event,
the module the innermost ``nn.Module: NAME`` region, the phase one of :data:`PHASES`.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from di.engine.classify import name_codes
from di.engine.phases import BACKWARD_PREFIX, MODULE_PREFIX, OPTIMIZER_PREFIX
from di.engine.steps import NO_STEP
from di.engine.window import EventFrame
from di.nesting import enclosing, names_at, parent_rows

PHASES = ("forward", "backward", "optimizer", "other")
"""The phases of a training step an allocation is given to (see :mod:`di.engine.memory`)."""


def attribution(frame: EventFrame, rows: np.ndarray, steps: np.ndarray) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(op, module, phase) of each event row (-1 or NaN: none; ``steps``: each one's step), see
    :mod:`di.engine.memory`."""
    ev = frame.trace.events
    rows = np.asarray(rows, dtype=np.float64)
    at = np.where(np.isnan(rows), -1, rows).astype(np.int64)
    names = ev.get_column("name")
    parent = parent_rows(ev)
    is_op = (ev.get_column("cat") == "compute").to_numpy() & ~frame.on_gpu
    op = enclosing(parent, at, is_op, outermost=True)
    module, backward, optimizer = (
        enclosing(parent, at, name_codes(names, ["^" + re.escape(prefix)]) == 0, outermost=False)
        for prefix in (MODULE_PREFIX, BACKWARD_PREFIX, OPTIMIZER_PREFIX)
    )
    in_step = np.nan_to_num(np.asarray(steps, dtype=np.float64), nan=NO_STEP) != NO_STEP
    phase = np.where(optimizer >= 0, 2, np.where(backward >= 0, 1, np.where(in_step, 0, 3)))
    phases = pl.Series("phase", PHASES, pl.String).gather(phase).alias("phase")
    return names_at(names, op).alias("op"), names_at(names, module).alias("module"), phases
