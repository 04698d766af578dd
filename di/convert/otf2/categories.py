"""OTF2 region paradigm and role <-> the canonical ``cat`` vocabulary, collective ops.

Reading: :func:`region_cats` maps (paradigm, role, region name, on a GPU
location) to one ``cat``, as an expression over a table of regions; ``src_cat`` keeps ``"<paradigm>/<role>"`` in lower
case (e.g. ``"mpi/point2point"``). Writing: :func:`region_kind` picks the
paradigm and role closest to a ``cat``. Regions di writes carry their exact
``cat``, ``src_cat`` and instant flag in the region description
(:func:`describe` / :func:`parse_description`), so a round trip restores them.
"""

from __future__ import annotations

from typing import Any

import polars as pl

__all__ = ["region_cats", "region_kind", "describe", "parse_description", "COLLECTIVE_OPS", "collective_op_code"]

_SYNC_ROLES = (
    "BARRIER",
    "IMPLICIT_BARRIER",
    "CRITICAL",
    "CRITICAL_SBLOCK",
    "ATOMIC",
    "ORDERED",
    "ORDERED_SBLOCK",
    "TASK_WAIT",
    "FLUSH",
    "THREAD_WAIT",
)
_COLL_ROLES = ("COLL_ONE2ALL", "COLL_ALL2ONE", "COLL_ALL2ALL", "COLL_OTHER", "BARRIER")
_ACCEL = ("CUDA", "OPENCL", "HIP", "OPENACC", "OPENMP_TARGET", "KOKKOS")
_THREADS = ("OPENMP", "PTHREAD", "OMPSS", "WINTHREAD", "QTTHREAD", "ACETHREAD", "TBBTHREAD", "MTAPI")
_MPI_P2P_PREFIXES = ("MPI_Wait", "MPI_Test", "MPI_Request", "MPI_Start", "MPI_Cancel", "MPI_Probe", "MPI_Iprobe")
_MPI_COLL_NAMES = ("MPI_Init", "MPI_Finalize", "MPI_Comm_split", "MPI_Comm_dup", "MPI_Comm_create", "MPI_Cart_create")
DESCRIPTION_PREFIX = "di:"


def region_cats(paradigm: pl.Expr, role: pl.Expr, name: pl.Expr, gpu: bool) -> pl.Expr:
    """The canonical ``cat`` of OTF2 regions (paradigm and role as OTF2 enum names, String expressions) on a GPU
    location (``gpu``) or a CPU one: one expression over a table of regions, however many."""
    lower = name.fill_null("").str.to_lowercase()
    has = lower.str.contains
    accel = (
        pl.when(role.is_in(_SYNC_ROLES) | has("synchron", literal=True) | has("wait", literal=True))
        .then(pl.lit("sync"))
        .when(pl.lit(not gpu))
        .then(pl.lit("cuda_api"))  # host-side calls, copies and kernel launches included (as Kineto's cuda_runtime)
        .when(
            has("memcpy", literal=True)
            | (role == "DATA_TRANSFER")
            | ((paradigm == "OPENACC") & (has("data", literal=True) | has("update", literal=True)))
        )
        .then(pl.lit("memcpy"))
        .when(has("memset", literal=True))
        .then(pl.lit("memset"))
        .when(role.is_in(("FUNCTION", "KERNEL", "UNKNOWN")))
        .then(pl.lit("kernel"))
        .otherwise(pl.lit("other"))
    )
    named = name.fill_null("")
    mpi = (
        pl.when((role == "POINT2POINT") | pl.any_horizontal([named.str.starts_with(p) for p in _MPI_P2P_PREFIXES]))
        .then(pl.lit("mpi_p2p"))
        .when(role.is_in(_COLL_ROLES) | pl.any_horizontal([named.str.starts_with(p) for p in _MPI_COLL_NAMES]))
        .then(pl.lit("mpi_coll"))
        .otherwise(pl.lit("other"))
    )
    return (
        pl.when(role.is_in(("FILE_IO", "FILE_IO_METADATA")))
        .then(pl.lit("io"))
        .when(paradigm.is_in(_ACCEL))
        .then(accel)
        .when(paradigm == "MPI")
        .then(mpi)
        .when(paradigm.is_in(_THREADS))
        .then(pl.when(role.is_in(_SYNC_ROLES)).then(pl.lit("sync")).otherwise(pl.lit("compute")))
        .when(paradigm == "USER")
        .then(pl.when(role == "ARTIFICIAL").then(pl.lit("other")).otherwise(pl.lit("user")))
        .when(paradigm.is_in(("COMPILER", "SAMPLING")))
        .then(pl.lit("compute"))
        .otherwise(pl.lit("kernel" if gpu else "other"))
    )


_KINDS = {
    "kernel": ("CUDA", "KERNEL"),
    "memcpy": ("CUDA", "DATA_TRANSFER"),
    "memset": ("CUDA", "DATA_TRANSFER"),
    "cuda_api": ("CUDA", "WRAPPER"),
    "sync": ("CUDA", "IMPLICIT_BARRIER"),
    "mpi_p2p": ("MPI", "POINT2POINT"),
    "mpi_coll": ("MPI", "COLL_ALL2ALL"),
    "nccl": ("CUDA", "COLL_ALL2ALL"),
    "io": ("USER", "FILE_IO"),
    "user": ("USER", "FUNCTION"),
    "step": ("USER", "CODE"),
    "python": ("USER", "FUNCTION"),
    "compute": ("COMPILER", "FUNCTION"),
    "other": ("UNKNOWN", "UNKNOWN"),
}
_OP_ROLES = {
    "barrier": "BARRIER",
    "broadcast": "COLL_ONE2ALL",
    "scatter": "COLL_ONE2ALL",
    "reduce": "COLL_ALL2ONE",
    "gather": "COLL_ALL2ONE",
}


def region_kind(cat: str, src_cat: str | None, op: str | None = None) -> tuple[str, str]:
    """(paradigm, role) enum names for a region di writes.

    A ``src_cat`` of the form ``"<paradigm>/<role>"`` naming OTF2 enums (as
    this reader makes it) is used as is; else the ``cat`` decides, with the collective ``op``
    choosing among the collective roles.
    """
    if src_cat and "/" in src_cat:
        import _otf2

        paradigm, role = src_cat.upper().split("/", 1)
        if hasattr(_otf2, f"PARADIGM_{paradigm}") and hasattr(_otf2, f"REGION_ROLE_{role}"):
            return paradigm, role
    paradigm, role = _KINDS.get(cat, ("UNKNOWN", "UNKNOWN"))
    if op and cat in ("mpi_coll", "nccl"):
        role = _OP_ROLES.get(op, "COLL_ALL2ALL")
    return paradigm, role


def describe(cat: str, src_cat: str | None, instant: bool) -> str:
    """Region description that records di's own category (read by :func:`parse_description`)."""
    import orjson

    return DESCRIPTION_PREFIX + orjson.dumps({"cat": cat, "src_cat": src_cat, "instant": instant}).decode()


def parse_description(text: str | None) -> dict[str, Any] | None:
    """The dict :func:`describe` wrote, or None for any other description (one whose ``cat`` is no category of
    the model, or whose ``src_cat`` is no string)."""
    if not text or not text.startswith(DESCRIPTION_PREFIX):
        return None
    import orjson

    try:
        got = orjson.loads(text[len(DESCRIPTION_PREFIX) :])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(got, dict) or not isinstance(got.get("src_cat"), (str, type(None))):
        return None
    from di import schema

    # a category the model lacks (a damaged or foreign description): the region's paradigm and role decide instead
    return got if got.get("cat") in schema.polars_schema("events")["cat"].categories.to_list() else None


COLLECTIVE_OPS = {
    "BARRIER": "barrier",
    "BCAST": "broadcast",
    "GATHER": "gather",
    "GATHERV": "gather",
    "SCATTER": "scatter",
    "SCATTERV": "scatter",
    "ALLGATHER": "allgather",
    "ALLGATHERV": "allgather",
    "ALLTOALL": "alltoall",
    "ALLTOALLV": "alltoall",
    "ALLTOALLW": "alltoall",
    "ALLREDUCE": "allreduce",
    "REDUCE": "reduce",
    "REDUCE_SCATTER": "reduce_scatter",
    "REDUCE_SCATTER_BLOCK": "reduce_scatter",
}
"""OTF2 CollectiveOp name -> canonical op; any other is ``other``."""

_OP_CODES = {
    "barrier": 0,
    "broadcast": 1,
    "gather": 2,
    "scatter": 4,
    "allgather": 6,
    "alltoall": 8,
    "allreduce": 11,
    "reduce": 12,
    "reduce_scatter": 13,
}


def collective_op_code(op: str | None, otf2_name: str | None = None) -> int:
    """OTF2_CollectiveOp value for a canonical op (the original OTF2 op name wins when known)."""
    import _otf2

    if otf2_name and hasattr(_otf2, f"COLLECTIVE_OP_{otf2_name}"):
        return int(getattr(_otf2, f"COLLECTIVE_OP_{otf2_name}").value)
    return _OP_CODES.get(op or "", 8)  # ops OTF2 has no code for (send, recv, other) are written as ALLTOALL
