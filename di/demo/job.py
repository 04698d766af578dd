"""The public entry points: :func:`kineto_job` and :func:`write_kineto_job`."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

from di.demo.plan import build_plan
from di.demo.render import render_rank
from di.demo.simulate import simulate


def kineto_job(
    *,
    ranks: int = 4,
    steps: int = 6,
    ops_per_step: int = 40,
    seed: int = 0,
    straggler: int | None = 1,
    render_ranks: list[int] | None = None,
) -> list[bytes]:
    """Generate one Kineto-shaped Chrome JSON document per rank of a simulated job.

    Args:
        ranks: world size (one process and one GPU per rank, 8 GPUs per node).
        steps: profiled iterations, ``ProfilerStep#0`` .. ``#steps-1``.
        ops_per_step: top-level PyTorch ops per step before the allreduce.
        seed: random seed; the same arguments give byte-identical documents.
        straggler: the rank doing more CPU work per step, or None for a balanced job.
        render_ranks: ranks whose documents are built (default all, in rank order);
            every rank is still simulated, so the collectives come out the same.

    Returns:
        UTF-8 JSON documents, one per rendered rank. With the defaults each holds
        1,629 events (6,516 for the job); an event costs about 260 bytes.

    Raises:
        ValueError: a count is below 1, or ``straggler``/``render_ranks`` is no rank.
    """
    return [bytes(doc) for _, doc in _documents(ranks, steps, ops_per_step, seed, straggler, render_ranks)]


def is_job_folder(path: Path) -> bool:
    """True when the folder ``path`` holds only ``rank-N.json[.gz]`` files, as :func:`write_kineto_job` writes."""
    import re

    name = re.compile(r"rank-\d+\.json(\.gz)?")
    return path.is_dir() and all(name.fullmatch(p.name) for p in path.iterdir() if not p.name.startswith("."))


def write_kineto_job(
    directory: str | Path,
    *,
    compress: bool = False,
    ranks: int = 4,
    steps: int = 6,
    ops_per_step: int = 40,
    seed: int = 0,
    straggler: int | None = 1,
    render_ranks: list[int] | None = None,
) -> list[Path]:
    """Write the documents of :func:`kineto_job` (same arguments) as ``rank-N.json``.

    Args:
        directory: created if missing.
        compress: write ``rank-N.json.gz`` instead (gzip level 6, no timestamp, so the
            bytes are reproducible).

    Returns:
        The written paths, one per rendered rank.
    """
    from di.output import atomic_write

    out = Path(directory)
    paths = []
    for rank, doc in _documents(ranks, steps, ops_per_step, seed, straggler, render_ranks):
        path = out / (f"rank-{rank}.json" + (".gz" if compress else ""))
        with atomic_write(path) as raw:
            if compress:
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                    gz.write(doc)
            else:
                raw.write(doc)
        paths.append(path)
    return paths


def _documents(
    ranks: int, steps: int, ops: int, seed: int, straggler: int | None, render: list[int] | None
) -> Iterator[tuple[int, memoryview]]:
    _check(ranks, steps, ops, straggler, render)
    plan = build_plan(ops, ranks)
    tl = simulate(plan, ranks, steps, seed, straggler)
    for r in range(ranks) if render is None else render:
        yield r, render_rank(plan, tl, r)


def _check(ranks: int, steps: int, ops: int, straggler: int | None, render: list[int] | None) -> None:
    for name, value in (("ranks", ranks), ("steps", steps), ("ops_per_step", ops)):
        if value < 1:
            raise ValueError(f"kineto_job: {name} must be >= 1, got {value}")
    if straggler is not None and not 0 <= straggler < ranks:
        raise ValueError(f"kineto_job: straggler {straggler} is not a rank in 0..{ranks - 1}")
    bad = [r for r in render or [] if not 0 <= r < ranks]
    if bad:
        raise ValueError(f"kineto_job: render_ranks {bad} are not ranks in 0..{ranks - 1}")
