"""CUPTI's enumerations as text, for every producer that reads CUPTI records: ``di record``'s own CUPTI
capture and Nsight Systems exports (whose ``ENUM_CUDA_MEMCPY_OPER`` table holds the same values).

The names are those Nsight Systems shows; each producer keeps its own word for "unknown" (0)."""

from __future__ import annotations

MEMCPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM HtoD",
    12: "UVM DtoH",
    13: "UVM DtoD",
}
"""CUpti_ActivityMemcpyKind values 1..13 (0: unknown): source to destination, H host, D device, A CUDA array,
P peer device; 11-13 unified-memory migrations."""
