"""OTF2 region paradigm and role <-> the canonical ``cat`` vocabulary, collective ops.

Reading: :func:`region_cat` maps (paradigm, role, region name, on a GPU
location) to one ``cat``; ``src_cat`` keeps ``"<paradigm>/<role>"`` in lower
case (e.g. ``"mpi/point2point"``). Writing: :func:`region_kind` picks the
paradigm and role closest to a ``cat``. Regions di writes carry their exact
``cat``, ``src_cat`` and instant flag in the region description
(:func:`describe` / :func:`parse_description`), so a round trip restores them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["region_cat", "region_kind", "describe", "parse_description", "COLLECTIVE_OPS", "collective_op_code"]

_SYNC_ROLES = {
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
}
_COLL_ROLES = {"COLL_ONE2ALL", "COLL_ALL2ONE", "COLL_ALL2ALL", "COLL_OTHER", "BARRIER"}
_ACCEL = {"CUDA", "OPENCL", "HIP", "OPENACC", "OPENMP_TARGET", "KOKKOS"}
_THREADS = {"OPENMP", "PTHREAD", "OMPSS", "WINTHREAD", "QTTHREAD", "ACETHREAD", "TBBTHREAD", "MTAPI"}
_MPI_P2P_PREFIXES = ("MPI_Wait", "MPI_Test", "MPI_Request", "MPI_Start", "MPI_Cancel", "MPI_Probe", "MPI_Iprobe")
_MPI_COLL_NAMES = ("MPI_Init", "MPI_Finalize", "MPI_Comm_split", "MPI_Comm_dup", "MPI_Comm_create", "MPI_Cart_create")
DESCRIPTION_PREFIX = "di:"


def region_cat(paradigm: str, role: str, name: str, gpu: bool) -> str:
    """The canonical ``cat`` of an OTF2 region (paradigm/role as OTF2 enum names)."""
    lower = name.lower()
    if role in ("FILE_IO", "FILE_IO_METADATA"):
        return "io"
    if paradigm in _ACCEL:
        if role in _SYNC_ROLES or "synchron" in lower or "wait" in lower:
            return "sync"
        if not gpu:
            return "cuda_api"  # host-side calls, copies and kernel launches included (as Kineto's cuda_runtime)
        if (
            "memcpy" in lower
            or role == "DATA_TRANSFER"
            or (paradigm == "OPENACC" and ("data" in lower or "update" in lower))
        ):
            return "memcpy"
        if "memset" in lower:
            return "memset"
        return "kernel" if role in ("FUNCTION", "KERNEL", "UNKNOWN") else "other"
    if paradigm == "MPI":
        if role == "POINT2POINT" or name.startswith(_MPI_P2P_PREFIXES):
            return "mpi_p2p"
        if role in _COLL_ROLES or name.startswith(_MPI_COLL_NAMES):
            return "mpi_coll"
        return "other"
    if paradigm in _THREADS:
        return "sync" if role in _SYNC_ROLES else "compute"
    if paradigm == "USER":
        return "other" if role == "ARTIFICIAL" else "user"
    if paradigm in ("COMPILER", "SAMPLING"):
        return "compute"
    if gpu:
        return "kernel"
    return "other"


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
