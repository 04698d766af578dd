"""Wait states (Scalasca's definitions) from messages and collectives.

With E = enter (start_ns) and L = leave (end_ns) of the events involved,
all in int64 ns, each wait is attributed to the rank that waits and to the
rank that caused it:

- ``late_sender``: a receive waits for its sender: min(E_send, L_recv) - E_recv
  when positive; caused by the sender.
- ``late_receiver``: a send that only completed after the receive was posted
  (L_send > E_recv) waited E_recv - E_send when positive; caused by the receiver.
  (An eager send that left before the receive was posted did not wait.)
- ``wait_nxn`` (all-to-all style: allreduce, allgather, alltoall,
  reduce_scatter, other, and rooted ones whose root is unknown) and
  ``wait_barrier``: member p waits max(0, min(E_last, L_p) - E_p) where E_last
  is the latest member's enter; caused by that last member.
- ``late_broadcast`` (broadcast, scatter with a known root): a non-root member
  waits max(0, min(E_root, L_p) - E_p); caused by the root.
- ``early_reduce`` (reduce, gather with a known root): the root waits
  max(0, min(E_first, L_root) - E_root), E_first the earliest non-root enter;
  caused by that first sender.

Members of one collective are the ``collectives`` rows of one ``instance``
(matched across ranks by communicator and sequence at load); for NCCL in
Kineto traces the rows are the collective kernels, so the waits are GPU-side.
A wait belongs to the step (and window) of the waiting event.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine.steps import NO_STEP
from di.engine.window import EventFrame

NXN = ("allreduce", "allgather", "alltoall", "reduce_scatter", "other")
ONE_TO_N = ("broadcast", "scatter")
N_TO_ONE = ("reduce", "gather")
KINDS = ("late_sender", "late_receiver", "wait_nxn", "wait_barrier", "late_broadcast", "early_reduce")
_SCHEMA = {
    "kind": pl.String,
    "rank": pl.Int32,
    "event": pl.Int64,
    "cause_rank": pl.Int32,
    "cause_event": pl.Int64,
    "instance": pl.Int64,
    "step": pl.Int64,
    "start_ns": pl.Int64,
    "wait_ns": pl.Int64,
}


def wait_states(frame: EventFrame) -> pl.DataFrame:
    """Every positive wait: kind, rank (waiting), event, cause_rank, cause_event,
    instance (collectives), step, start_ns (when the wait began), wait_ns."""
    parts = [_messages(frame), _collectives(frame)]
    out = pl.concat([p for p in parts if p.height] or [pl.DataFrame(schema=_SCHEMA)]).cast(_SCHEMA)  # type: ignore[arg-type]
    sel = frame.selected[out.get_column("event").to_numpy()] if out.height else np.zeros(0, bool)
    step = frame.step[out.get_column("event").to_numpy()] if out.height else np.zeros(0, np.int64)
    return (
        out.with_columns(pl.Series("step", step, dtype=pl.Int64).replace(NO_STEP, None))
        .filter(pl.Series(sel) & (pl.col("wait_ns") > 0))
        .select(list(_SCHEMA))
        .sort("start_ns", "rank")
    )


def _messages(frame: EventFrame) -> pl.DataFrame:
    m = frame.trace.messages
    if not m.height:
        return pl.DataFrame(schema=_SCHEMA)
    s = m.get_column("send").to_numpy()
    r = m.get_column("recv").to_numpy()
    es, ls, er, lr = frame.start_ns[s], frame.end_ns[s], frame.start_ns[r], frame.end_ns[r]
    late_sender = np.minimum(es, lr) - er
    late_receiver = np.where(ls > er, er - es, 0)
    n = s.size
    return pl.DataFrame(
        {
            "kind": ["late_sender"] * n + ["late_receiver"] * n,
            "rank": np.concatenate([frame.rank[r], frame.rank[s]]),
            "event": np.concatenate([r, s]),
            "cause_rank": np.concatenate([frame.rank[s], frame.rank[r]]),
            "cause_event": np.concatenate([s, r]),
            "instance": [None] * (2 * n),
            "step": [None] * (2 * n),
            "start_ns": np.concatenate([er, es]),
            "wait_ns": np.concatenate([late_sender, late_receiver]),
        },
        schema=_SCHEMA,
    )


def _collectives(frame: EventFrame) -> pl.DataFrame:
    c = frame.trace.collectives.filter(pl.col("instance").is_not_null() & ~pl.col("op").is_in(["send", "recv"]))
    if not c.height:
        return pl.DataFrame(schema=_SCHEMA)
    c = _with_references(_members(frame, c)).with_columns(_kind().alias("kind"))
    cause = _cause()
    return c.select(
        "kind",
        "rank",
        "event",
        cause.struct.field("r").cast(pl.Int32).alias("cause_rank"),
        cause.struct.field("e").alias("cause_event"),
        "instance",
        pl.lit(None, pl.Int64).alias("step"),
        pl.col("E").alias("start_ns"),
        pl.max_horizontal(_wait().fill_null(0), pl.lit(0)).alias("wait_ns"),
    )


def _members(frame: EventFrame, c: pl.DataFrame) -> pl.DataFrame:
    """The members' instance, event, op and root with their rank, enter (E) and leave (L)."""
    ev = c.get_column("event").to_numpy()
    return c.select("instance", "event", "op", "root").with_columns(
        pl.Series("rank", frame.rank[ev], dtype=pl.Int32),
        pl.Series("E", frame.start_ns[ev]),
        pl.Series("L", frame.end_ns[ev]),
    )


def _with_references(c: pl.DataFrame) -> pl.DataFrame:
    """The members with the members their waits refer to in their instance: the last to enter (E_last, last_rank,
    last_event), the root (E_root, root_event; null where no member is the root) and the first non-root to enter
    (E_first, first_rank, first_event)."""
    last = (
        c.sort("E", "rank")
        .group_by("instance")
        .agg(
            pl.col("E").last().alias("E_last"),
            pl.col("rank").last().alias("last_rank"),
            pl.col("event").last().alias("last_event"),
        )
    )
    roots = c.filter(pl.col("rank") == pl.col("root")).select(
        "instance", pl.col("E").alias("E_root"), pl.col("event").alias("root_event")
    )
    first = (
        c.filter(pl.col("rank") != pl.col("root"))
        .sort("E", "rank")
        .group_by("instance")
        .agg(
            pl.col("E").first().alias("E_first"),
            pl.col("rank").first().alias("first_rank"),
            pl.col("event").first().alias("first_event"),
        )
    )
    return (
        c.join(last, on="instance", how="left")
        .join(roots, on="instance", how="left")
        .join(first, on="instance", how="left")
    )


def _kind() -> pl.Expr:
    """A member's wait kind: the barrier's, a rooted one's where its root is known, else N x N."""
    rooted_known = pl.col("E_root").is_not_null()
    return (
        pl.when(pl.col("op") == "barrier")
        .then(pl.lit("wait_barrier"))
        .when(pl.col("op").is_in(ONE_TO_N) & rooted_known)
        .then(pl.lit("late_broadcast"))
        .when(pl.col("op").is_in(N_TO_ONE) & rooted_known)
        .then(pl.lit("early_reduce"))
        .otherwise(pl.lit("wait_nxn"))
    )


def _wait() -> pl.Expr:
    """A member's wait by its kind (see the module docstring), before it is clipped at 0."""
    return (
        pl.when(pl.col("kind") == "late_broadcast")
        .then(pl.min_horizontal("E_root", "L") - pl.col("E"))
        .when(pl.col("kind") == "early_reduce")
        .then(
            pl.when(pl.col("rank") == pl.col("root")).then(pl.min_horizontal("E_first", "L") - pl.col("E")).otherwise(0)
        )
        .otherwise(pl.min_horizontal("E_last", "L") - pl.col("E"))
    )


def _cause() -> pl.Expr:
    """The member that caused a member's wait, a struct of its rank (r) and event (e)."""
    return (
        pl.when(pl.col("kind") == "late_broadcast")
        .then(pl.struct(r=pl.col("root"), e=pl.col("root_event")))
        .when(pl.col("kind") == "early_reduce")
        .then(pl.struct(r=pl.col("first_rank"), e=pl.col("first_event")))
        .otherwise(pl.struct(r=pl.col("last_rank"), e=pl.col("last_event")))
    )


def summary(waits: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
    """Per rank and kind: time waited (``waited_ns``) and time it caused others to wait (``caused_ns``)."""
    waited = waits.group_by("rank", "kind").agg(pl.col("wait_ns").sum().alias("waited_ns"))
    caused = waits.group_by(pl.col("cause_rank").alias("rank"), "kind").agg(pl.col("wait_ns").sum().alias("caused_ns"))
    grid = pl.DataFrame({"rank": ranks}, schema={"rank": pl.Int32}).join(
        pl.DataFrame({"kind": list(KINDS)}), how="cross"
    )
    return (
        grid.join(waited, on=["rank", "kind"], how="left")
        .join(caused, on=["rank", "kind"], how="left")
        .fill_null(0)
        .sort("rank", "kind")
    )
