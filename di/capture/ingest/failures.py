"""Ranks that ended abnormally, and which of them failed first.

A rank ended abnormally when a process of it did not reach the ``exited`` state in its
shard header. Each such rank is said in a warning: still running when a failed rank's
``di record`` ingested, ended by the launcher after another rank failed, or ended on its
own (signal, exit code, or killed or crashed). :func:`first_failed` names the ranks that
failed first from how and when the launcher form's ``di record`` saw each rank end.
"""

from __future__ import annotations

import signal
from typing import Any

from di.capture import shard

LAUNCHER_KILLS = (signal.SIGKILL, signal.SIGTERM)  # how launchers end the ranks that are left
FIRST_END_GAP_S = 0.02  # a rank named first by time alone ended this long before every other


def first_failed(ends: dict[int, dict[str, Any]], bad: list[int]) -> list[int]:
    """The ranks that failed first, of the abnormally ended ``bad``, from the watcher's ``ends``
    ({rank: {"after_s", and "signal" or "exit_code" where it was read}}); [] when it is not known.

    By cause first: a rank that ended with an exit code or a signal other than a launcher's kill
    (SIGKILL, SIGTERM) failed on its own, while the launcher killed the rest. By time only when one
    rank ended more than ``FIRST_END_GAP_S`` before every other: the kernel reports a killed
    process's end after it has closed its files, and the launcher, woken by those, may kill and see
    end another rank within the same few milliseconds, so a closer order says nothing.
    """
    if len(ends) < 2 or len(ends) != len(bad):  # a rank not seen ending (gone before it was watched) may be first
        return []
    own = sorted(
        r for r, e in ends.items() if e.get("exit_code") or ("signal" in e and e["signal"] not in LAUNCHER_KILLS)
    )
    if own:
        return own if len(own) < len(bad) else []
    order = sorted(ends, key=lambda r: ends[r]["after_s"])
    return [order[0]] if ends[order[1]]["after_s"] - ends[order[0]]["after_s"] > FIRST_END_GAP_S else []


def abnormal_ranks(
    procs: list[shard.ProcessShard], ranks: dict[tuple[str, int], int], run_info: dict[str, Any], warnings: list[str]
) -> tuple[list[int], list[int]]:
    """Ranks whose processes did not exit normally (header state), each said in a warning, and
    those of them that failed first, when that is known (:func:`first_failed`).

    ``run_info["unreported_ranks"]``: ranks whose per-rank ``di record`` had not reported an exit
    when the recording was ingested (by a failed rank's ``di record``; the launcher then ends them).
    ``run_info["rank_ends"]``: when and how the launcher form's ``di record`` saw each rank's process
    end (:mod:`di.capture.child`).
    """
    unreported = run_info.get("unreported_ranks") or []
    bad = sorted({ranks[p.key] for p in procs if p.key in ranks and p.header["state"] != "exited"})
    ends = {int(r): e for r, e in (run_info.get("rank_ends") or {}).items() if int(r) in bad}
    first = first_failed(ends, bad)
    for rank in bad:
        states = {p.lib: p.header["state"] for p in procs if ranks.get(p.key) == rank}
        n = sum(int(r.size) for p in procs if ranks.get(p.key) == rank for r in p.threads.values())
        how = _how_ended(rank, ends, first, unreported)
        warnings.append(f"rank {rank} {how}; last state {states}): its {n} records up to that point are loaded")
    return bad, first


def _how_ended(rank: int, ends: dict[int, dict[str, Any]], first: list[int], unreported: list[int]) -> str:
    """How ``rank`` ended, as the warning says it (an open parenthesis the caller closes)."""
    end = ends.get(rank, {})
    if rank in unreported:
        return "was still running when a failed rank's di record ingested the recording (the launcher then ends it"
    if first and rank not in first:
        return (
            f"was ended by the launcher after rank {', '.join(map(str, first))} failed (seen ending "
            f"{end['after_s'] - ends[first[0]]['after_s']:+.3f} s from it; no fault of its own"
        )
    cause = (
        f"signal {end['signal']}"
        if "signal" in end
        else f"exit code {end['exit_code']}"
        if "exit_code" in end
        else "killed or crashed"
    )
    return f"ended abnormally{' first' if first else ''} ({cause}"
