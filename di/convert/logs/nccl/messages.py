"""The distinct messages of the NCCL lines (the text after ``NCCL LEVEL``): one id per distinct message, the kinds
of line each is (COLL, TUNING, communicator init, version, topology), and the lines a kind picks, so that each
search and parse runs once per distinct message."""

from __future__ import annotations

import polars as pl

from di.convert.logs.text import distinct_ids, lead_in


def _message_ids(p: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """``p`` (:func:`_prefixed`'s lines) with ``mid``, the id of its message, and the distinct messages (row ``mid``).

    Messages repeat (each rank prints the same topology and TUNING lines; a COLL line repeats its call's words where
    the opCount is 0, NCCL 2.26+, and the buffers are reused): every search and parse of a message kind runs once per
    distinct message, and the lines take the result by ``mid``."""
    msg = p.get_column("msg")
    # lines read once per distinct text (:func:`_prefixed`): the messages of those texts are told apart
    if "lid" in p.columns and p.height:
        lid = p.get_column("lid")
        lfirst = lid.is_first_distinct().arg_true()
        slot = pl.zeros(lid.max() + 1, pl.UInt32, eager=True).scatter(
            lid[lfirst], pl.int_range(len(lfirst), eager=True)
        )
        ids, firsts = distinct_ids(msg[lfirst])
        ids, firsts = ids[slot[lid]], lfirst[firsts]
    else:
        ids, firsts = distinct_ids(msg)
    # where the hashes told them apart, ids go in order of first line: the distinct messages lie in the order of the
    # text (the searches over them run several times faster than over messages in hash order)
    if not firsts.is_sorted():
        order = firsts.arg_sort()
        renumber = pl.zeros(len(order), pl.UInt32, eager=True).scatter(order, pl.int_range(len(order), eager=True))
        ids, firsts = renumber[ids], firsts[order]
    return p.hstack([ids.rename("mid")]), msg[firsts]


def _gathered(flags: pl.Series, at: pl.Series) -> pl.Series:
    """``flags[at]`` (Boolean): gathered as bytes, about a third of the CPU of a gather of bits (and by indexing:
    ``gather`` converts and checks the indices first)."""
    return flags.cast(pl.UInt8)[at] != 0


MESSAGE_TEXTS = {"coll": ": opCount ", "tune": " Bytes -> Algo ", "init": "Init ", "version": "CCL version "}
"""The texts that pick a distinct message for each kind of line's parse (COLL, TUNING, communicator init and version
lines): a message of a kind holds its text anywhere."""


def _message_kinds(msgs: pl.Series) -> dict[str, pl.Series]:
    """One bool per distinct message for each :data:`MESSAGE_TEXTS` kind, and ``topology``: the message begins with
    ``Channel ``, ``Ring `` or ``Tree``. The texts are found in one pass of all four (each one searched on its own
    costs about as much as the pass); the starts by comparing the strings' inline first bytes (:func:`lead_in`)."""
    texts = list(MESSAGE_TEXTS.values())
    found = msgs.str.extract_many(texts, overlapping=True).rename("found").to_frame()  # every occurrence of each
    m = pl.col("msg")
    topology = lead_in(m, "Channel ", "Channel!") | lead_in(m, "Ring ", "Ring!") | lead_in(m, "Tree", "Tref")
    picks = found.select(
        *(pl.col("found").list.contains(pl.lit(text)).alias(kind) for kind, text in MESSAGE_TEXTS.items()),
        msgs.rename("msg").to_frame().select(topology.alias("topology")).to_series(),
    )
    return {name: picks.get_column(name) for name in picks.columns}


def _picked(p: pl.DataFrame, pick: pl.Series, *columns: str) -> tuple[pl.DataFrame, pl.Series]:
    """The lines of ``p`` (with ``mid``; only its ``columns`` and ``mid`` where given) whose distinct message ``pick``
    (one bool per message) picks, and for each the row of its message among the picked ones (``msgs.filter(pick)``)."""
    keep = _gathered(pick, p.get_column("mid"))
    rows = pl.DataFrame([col.filter(keep) for col in (p[[*columns, "mid"]] if columns else p).iter_columns()])
    slot = pick.cast(pl.UInt32).cum_sum() - 1  # a picked message's row among the picked ones
    return rows, slot[rows.get_column("mid")]


def _matching(p: pl.DataFrame, msgs: pl.Series, pick: pl.Series, pattern: str, required: str) -> pl.DataFrame:
    """The lines whose message ``pick`` picks (see :func:`_picked`), with ``pattern``'s named groups as columns; those
    where ``required`` did not match dropped. The regex runs once per distinct message."""
    rows, at = _picked(p, pick)
    groups = msgs.filter(pick).str.extract_groups(pattern).struct.unnest()
    return rows.hstack([col[at] for col in groups.iter_columns()]).drop_nulls(required)
