"""torch.profiler (Kineto) traces written during a recording -> the same job trace.

Which traces: those a process exported under the GPU hook (its capture header's
``kineto_traces``, :mod:`di.capture.torch_hook`) and any file in
``raw/kineto/`` (``$DI_KINETO_DIR``, for programs that write there themselves).
Each loads through the connectors (:func:`di.load`), which puts Kineto times on Unix-epoch ns
(``baseTimeNanoseconds`` + ``ts``); they then go to the job clock as CUPTI times
do: ``t - (realtime - monotonic)`` of the writing process, then its rank's
clock map. A trace from ``raw/kineto/`` keeps the rank its content names and
takes the clock of the recorded process with that rank, if any.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from di.capture import clock
from di.trace import Trace

SUFFIXES = (".json", ".json.gz")


def _found(
    raw: Path, infos: list[tuple[dict[str, Any], int, int, clock.ClockMap]]
) -> list[tuple[Path, int | None, Any]]:
    """(path, rank or None, (skew, clock map) or None) for every trace to merge, each path once."""
    out: dict[Path, tuple[Path, int | None, Any]] = {}
    for header, rank, skew, cmap in infos:
        for text in header.get("kineto_traces", []):
            p = Path(text)
            out.setdefault(p.resolve(), (p, rank, (skew, cmap)))
    kdir = raw / "kineto"
    if kdir.is_dir():
        for p in sorted(kdir.rglob("*")):
            if p.is_file() and p.name.endswith(SUFFIXES):
                out.setdefault(p.resolve(), (p, None, None))
    return list(out.values())


def merge_kineto(trace: Trace, raw: Path, infos: list[tuple[dict[str, Any], int, int, clock.ClockMap]]) -> Trace:
    """``trace`` with the recording's Kineto traces added on the job clock (see the module docstring)."""
    from di.capture.gpu_ingest import append_part
    from di.convert.registry import load_paths
    from di.errors import DIError

    by_rank = {rank: (skew, cmap) for _h, rank, skew, cmap in infos}
    for path, rank, clk in _found(raw, infos):
        if not path.is_file():
            trace = trace.with_meta(
                {
                    **trace.meta,
                    "warnings": [
                        *trace.meta.get("warnings", []),
                        f"{path}: torch.profiler trace named by the program is gone; not merged",
                    ],
                }
            )
            continue
        try:
            part = load_paths(path)
        except DIError as exc:
            trace = trace.with_meta(
                {**trace.meta, "warnings": [*trace.meta.get("warnings", []), f"{path}: not merged ({exc})"]}
            )
            continue
        if rank is None:
            rank = part.ranks[0] if len(part.ranks) == 1 else None
            clk = by_rank.get(rank) if rank is not None else None
        if clk is not None and part.meta.get("clock", {}).get("domain") == "unix_epoch":
            skew, cmap = clk
            shift = [
                (pl.col(c) - skew)
                .map_batches(lambda s, m=cmap: pl.Series(m.apply(s.to_numpy())), return_dtype=pl.Int64)
                .alias(c)
                for c in ("start_ns", "end_ns")
            ]
            part = Trace.build(meta=part.meta, **{**part.tables(), "events": part.events.with_columns(shift)})
        loc0 = trace.locations.height
        locs = part.locations.with_columns(
            pl.col("loc") + loc0, (pl.col("source") + len(trace.meta.get("sources", []))).cast(pl.Int32)
        )
        if rank is not None:
            locs = locs.with_columns(
                rank=pl.lit(rank, pl.Int32), process=pl.format("rank {} torch.profiler", pl.lit(rank))
            )
        events = part.events.with_columns(pl.col("loc") + loc0)
        colls = (
            part.collectives.with_columns(rank=pl.lit(rank, pl.Int32))
            if rank is not None and "rank" in part.collectives.columns
            else part.collectives
        )
        sources = [
            {**s, "rank": rank if rank is not None else s.get("rank"), "path": str(path)}
            for s in part.meta.get("sources", [])
        ]
        warnings = list(part.meta.get("warnings", []))
        if part.samples.height:
            warnings.append(
                f"{path}: its {part.samples.height} counter samples ({part.series.height} series) are not merged"
            )
        trace = append_part(trace, locs, events, part.flows, colls, sources=sources, warnings=warnings)
    return trace
