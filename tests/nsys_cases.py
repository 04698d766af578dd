"""Hand-built Nsight Systems SQLite exports for the nsys connector's tests.

:func:`build` writes a small export whose answer is known by construction:
the tables and columns named here follow Nsight Systems' export schema
(StringIds, NVTX_EVENTS, CUPTI_ACTIVITY_KIND_*, TARGET_INFO_*, META_DATA_*).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

SESSION_START_NS = 1_700_000_000_000_000_000
PID, TID = 4242, 4243
GTID = (PID << 24) | TID
GPID = PID << 24

STRINGS = {
    1: "cudaLaunchKernel_v7000",
    2: "cudaStreamSynchronize_v3020",
    3: "gemm_kernel",
    4: "void gemm_kernel<float>(float*)",
    5: "cuLaunchKernel",
    6: "ProfilerStep#7",
    7: "main thread",
    8: "read",
    9: "ncclDevKernel_AllReduce_Sum_f32",
    10: "forward",
}


def _table(con: sqlite3.Connection, name: str, cols: list[str], rows: list[tuple[Any, ...]]) -> None:
    con.execute(f'CREATE TABLE "{name}" ({", ".join(cols)})')
    if rows:
        con.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(cols))})', rows)


def build(
    path: Path,
    *,
    meta_table: str = "META_DATA_EXPORT",
    schema_version: str = "3.13.2",
    env: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
    kernel_cols: tuple[str, ...] = (),
    nvtx_stream_names: bool = False,
) -> Path:
    """Write a small export to ``path``: 2 kernels (one NCCL, one a graph node), 1 memset, 3 runtime calls,
    1 driver call, 1 stream sync record, NVTX (a push/pop range, a step range, a start/end range, a mark,
    an NCCL-domain range, one range never ended), 1 OSRT read. ``drop``: tables left out;
    ``kernel_cols``: kernel columns left out; ``nvtx_stream_names``: stream 13 named "comm stream" with NVTX."""
    con = sqlite3.connect(path)
    _table(con, "StringIds", ["id INTEGER PRIMARY KEY", "value TEXT"], list(STRINGS.items()))
    _table(
        con,
        meta_table,
        ["name TEXT", "value TEXT"],
        [("EXPORT_PRODUCT_VERSION", "2099.1"), ("EXPORT_SCHEMA_VERSION", schema_version)],
    )
    _table(
        con,
        "TARGET_INFO_SESSION_START_TIME",
        ["utcEpochNs INTEGER", "utcTime TEXT", "localTime TEXT"],
        [(SESSION_START_NS, "", "")],
    )
    _table(
        con,
        "TARGET_INFO_SYSTEM_ENV",
        ["globalVid INTEGER", "devStateName TEXT", "name TEXT", "nameEnum INTEGER", "value TEXT"],
        [(0, "Local", "Hostname", 619, "node7")],
    )
    _table(
        con,
        "META_DATA_CAPTURE",
        ["name TEXT", "value TEXT"],
        [
            ("PROCESS_0:COMMAND", "train"),
            *[("PROCESS_0:ENVIRONMENT_VARIABLE", f'{k}="{v}"') for k, v in (env or {}).items()],
        ],
    )
    _table(con, "PROCESSES", ["globalPid INTEGER", "pid INTEGER", "name TEXT"], [(GPID, PID, "python")])
    _table(con, "ThreadNames", ["nameId INTEGER", "priority INTEGER", "globalTid INTEGER"], [(7, 0, GTID)])
    _table(con, "TARGET_INFO_GPU", ["vmId INTEGER", "id INTEGER", "name TEXT"], [(0, 0, "NVIDIA H100")])
    _table(
        con,
        "TARGET_INFO_CUDA_STREAM",
        ["streamId", "hwId", "vmId", "processId", "contextId", "priority", "flag"],
        [(7, 0, 0, PID, 1, 0, 3), (13, 0, 0, PID, 1, 4294967291, 2)],  # the null stream; non-blocking, priority -5
    )
    _table(
        con,
        "TARGET_INFO_NVTX_CUDA_STREAM",
        ["name", "hwId", "vmId", "processId", "deviceId", "contextId", "streamId"],
        [("comm stream", 0, 0, PID, 0, 1, 13)] if nvtx_stream_names else [],
    )
    kcols = [
        c
        for c in (
            "start",
            "end",
            "deviceId",
            "contextId",
            "streamId",
            "correlationId",
            "globalPid",
            "demangledName",
            "shortName",
            "gridX",
            "gridY",
            "gridZ",
            "blockX",
            "blockY",
            "blockZ",
            "registersPerThread",
            "staticSharedMemory",
            "dynamicSharedMemory",
            "graphNodeId",
        )
        if c not in kernel_cols
    ]
    full = {
        "start": [1000, 3000],
        "end": [2000, 5000],
        "deviceId": [0, 0],
        "contextId": [1, 1],
        "streamId": [7, 13],
        "correlationId": [11, 12],
        "globalPid": [GPID, GPID],
        "demangledName": [4, 9],
        "shortName": [3, 9],
        "gridX": [2, 1],
        "gridY": [1, 1],
        "gridZ": [1, 1],
        "blockX": [128, 64],
        "blockY": [1, 1],
        "blockZ": [1, 1],
        "registersPerThread": [32, 40],
        "staticSharedMemory": [0, 16],
        "dynamicSharedMemory": [1024, 0],
        "graphNodeId": [None, 99],
    }
    tables = {
        "CUPTI_ACTIVITY_KIND_KERNEL": (kcols, list(zip(*[full[c] for c in kcols]))),
        "CUPTI_ACTIVITY_KIND_MEMSET": (
            [
                "start",
                "end",
                "deviceId",
                "contextId",
                "streamId",
                "correlationId",
                "globalPid",
                "value",
                "bytes",
                "memKind",
            ],
            [(5500, 5600, 0, 1, 7, 14, GPID, 0, 4096, 2)],
        ),
        "CUPTI_ACTIVITY_KIND_RUNTIME": (
            ["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue"],
            [
                (500, 900, 0, GTID, 11, 1, 0),
                (2500, 2900, 0, GTID, 12, 1, 0),
                (5200, 5300, 0, GTID, 14, 1, 0),
                (6000, 8000, 0, GTID, 13, 2, 0),
            ],
        ),
        "CUPTI_ACTIVITY_KIND_DRIVER": (
            ["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue"],
            [(8100, 8200, 1, GTID, 15, 5, 0)],
        ),
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (
            ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid", "syncType", "eventId"],
            [(6000, 7900, 0, 1, 13, 13, GPID, 3, 4294967295)],
        ),
        "NVTX_EVENTS": (
            [
                "start",
                "end",
                "eventType",
                "rangeId",
                "category",
                "color",
                "text",
                "globalTid",
                "endGlobalTid",
                "textId",
                "domainId",
            ],
            [
                (400, 9000, 59, None, None, None, None, GTID, None, 6, 0),
                (450, 5400, 59, None, None, None, "forward", GTID, None, None, 0),
                (600, None, 34, None, None, None, "checkpoint", GTID, None, None, 0),
                (100, 100, 75, None, None, None, "NCCL", GTID, None, None, 5),
                (2950, 4000, 59, None, None, None, "ncclAllReduce", GTID, None, None, 5),
                (300, 9500, 60, 1, None, None, "epoch", GTID, GTID, None, 0),
                (9600, None, 59, None, None, None, "never ended", GTID, None, None, 0),
            ],
        ),
        "OSRT_API": (
            ["start", "end", "eventClass", "globalTid", "nameId", "returnValue", "nestingLevel", "callchainId"],
            [(9100, 9200, 27, GTID, 8, 64, 0, 0)],
        ),
    }
    for name, (cols, rows) in tables.items():
        if name not in drop:
            _table(con, name, cols, rows)
    con.commit()
    con.close()
    return path


PID2, TID2 = 5151, 5151
GTID2 = (PID2 << 24) | TID2
MPI_STRINGS = {
    20: "MPI_Send",
    21: "MPI_Recv",
    22: "MPI_Allreduce",
    23: "MPI_Wait",
    24: "MPI_Irecv",
    25: "MPI_Isend",
    26: "MPI_Barrier",
    27: "MPI_Init",
    28: "MPI_Comm_rank",
}
MPICH_WORLD = 0x44000000
"""MPICH's MPI_COMM_WORLD handle (the same on every rank)."""
ANY_SOURCE = -2
"""MPICH's MPI_ANY_SOURCE."""

# The 2-rank exchange of :func:`add_mpi`, ns since the session start, per rank:
# (table, start, end, name id, remote rank, tag, size, request, root)
EXCHANGE = {
    0: [
        ("MPI_OTHER_EVENTS", 100, 500, 27, None, None, None, None, None),  # MPI_Init
        ("MPI_OTHER_EVENTS", 510, 520, 28, None, None, None, None, None),  # MPI_Comm_rank
        ("MPI_P2P_EVENTS", 1000, 1100, 20, 1, 7, 1024, None, None),  # Send to 1, tag 7
        ("MPI_P2P_EVENTS", 2000, 2010, 24, 1, 8, 2048, 0xA1, None),  # Irecv from 1, tag 8
        ("MPI_START_WAIT_EVENTS", 2020, 3500, 23, None, None, None, 0xA1, None),  # Wait for it
        ("MPI_COLLECTIVES_EVENTS", 4000, 5000, 22, None, None, 4096, None, None),  # Allreduce
        ("MPI_COLLECTIVES_EVENTS", 6000, 6200, 26, None, None, None, None, None),  # Barrier
        ("MPI_P2P_EVENTS", 6900, 6950, 20, 1, 9, 64, None, None),  # Send to 1, tag 9
    ],
    1: [
        ("MPI_OTHER_EVENTS", 100, 500, 27, None, None, None, None, None),
        ("MPI_P2P_EVENTS", 600, 1150, 21, 0, 7, 1024, None, None),  # Recv from 0, tag 7: waits 600 -> 1000
        ("MPI_P2P_EVENTS", 3000, 3010, 25, 0, 8, 2048, 0xB1, None),  # Isend to 0, tag 8
        ("MPI_START_WAIT_EVENTS", 3020, 3030, 23, None, None, None, 0xB1, None),
        ("MPI_COLLECTIVES_EVENTS", 4600, 5000, 22, None, None, 4096, None, None),
        ("MPI_COLLECTIVES_EVENTS", 6100, 6200, 26, None, None, None, None, None),
        ("MPI_P2P_EVENTS", 7000, 7100, 21, ANY_SOURCE, 9, 64, None, None),  # Recv from MPI_ANY_SOURCE, tag 9
    ],
}
"""Known answer: messages 0 -> 1 (Send, Recv; 1024 B, tag 7), 1 -> 0 (Isend + Wait, Irecv + Wait; 2048 B,
tag 8) and 0 -> 1 (Send, a Recv from MPI_ANY_SOURCE; 64 B, tag 9); collectives Allreduce and Barrier on both; wait states: rank 1's Recv waits 400 ns for rank 0 (late
sender), rank 0's Wait 980 ns for rank 1 (late sender: 3000 - 2020), rank 0 waits 600 ns in the Allreduce
(wait_nxn) and 100 ns in the Barrier (wait_barrier), both for rank 1."""


def add_mpi(
    path: Path,
    ranks: dict[int, int],
    *,
    handles: dict[int, int] | None = None,
    communicators: bool = False,
    old_columns: bool = False,
) -> Path:
    """Add what ``nsys profile --trace=mpi`` writes to an export of :func:`build`, with the columns of Nsight
    Systems' schema reference: MPI_RANKS (``ranks``: globalTid -> rank) and each rank's calls of
    :data:`EXCHANGE` (of rank 0 or 1: the rank modulo 2) on its thread. ``handles``: the communicator handle each rank records (default MPICH's
    world); ``communicators``: write MPI_COMMUNICATORS (commUid 77 for the world); ``old_columns``: the
    collectives' sizes as collSendSize/collRecvSize."""
    con = sqlite3.connect(path)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(MPI_STRINGS.items()))
    _table(con, "MPI_RANKS", ["globalTid INTEGER", "rank INTEGER"], [(g, r) for g, r in ranks.items()])
    base = ["start INTEGER", "end INTEGER", "globalTid INTEGER", "textId INTEGER"]
    sizes = ["collSendSize INTEGER", "collRecvSize INTEGER"] if old_columns else ["size INTEGER", "recvSize INTEGER"]
    cols = {
        "MPI_P2P_EVENTS": base
        + ["commHandle INTEGER", "tag INTEGER", "remoteRank INTEGER", "size INTEGER", "requestHandle INTEGER"],
        "MPI_COLLECTIVES_EVENTS": base + ["commHandle INTEGER", "rootRank INTEGER", *sizes, "requestHandle INTEGER"],
        "MPI_START_WAIT_EVENTS": base + ["requestHandle INTEGER"],
        "MPI_OTHER_EVENTS": base,
    }
    rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in cols}
    comm_rows = []
    for gtid, rank in ranks.items():
        handle = (handles or {}).get(rank, MPICH_WORLD)
        comm_rows.append((rank, 50, handle, None, rank, 2, "0,1", 0, "0,1", 77))
        for table, start, end, name, remote, tag, size, request, root in EXCHANGE[rank % 2]:
            head = (start, end, gtid, name)
            if table == "MPI_P2P_EVENTS":
                rows[table].append((*head, handle, tag, remote, size, request))
            elif table == "MPI_COLLECTIVES_EVENTS":
                rows[table].append((*head, handle, root, size, size, request))
            elif table == "MPI_START_WAIT_EVENTS":
                rows[table].append((*head, request))
            else:
                rows[table].append(head)
    for table, c in cols.items():
        _table(con, table, c, sorted(rows[table]))
    if communicators:
        _table(
            con,
            "MPI_COMMUNICATORS",
            [
                "rank INTEGER",
                "timestamp INTEGER",
                "commHandle INTEGER",
                "parentHandle INTEGER",
                "localRank INTEGER",
                "size INTEGER",
                "groupRoot INTEGER",
                "groupRootUid INTEGER",
                "members TEXT",
                "commUid INTEGER",
            ],
            comm_rows,
        )
    con.commit()
    con.close()
    return path


GRAPH_STRINGS = {30: "cudaGraphLaunch_v10000", 31: "cudaGraphInstantiate_v12000", 32: "cudaGraphAddKernelNode_v10000"}
GRAPH_ID, GRAPH_EXEC = 5, 6


def add_graphs(path: Path) -> Path:
    """Add a CUDA graph to an export of :func:`build`: its definition (CUDA_GRAPH_EVENTS, one node in
    CUDA_GRAPH_NODE_EVENTS), one launch traced per node (2 kernels with graphId and graphNodeId, correlation
    id 40) and one traced whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, correlation id 41), each from a
    cudaGraphLaunch call."""
    con = sqlite3.connect(path)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(GRAPH_STRINGS.items()))
    _table(
        con,
        "CUDA_GRAPH_EVENTS",
        ["start", "end", "eventClass", "globalTid", "nameId", "graphId", "originalGraphId", "graphExecId"],
        [(9700, 9800, 0, GTID, 31, GRAPH_ID, None, GRAPH_EXEC)],
    )
    _table(
        con,
        "CUDA_GRAPH_NODE_EVENTS",
        ["start", "end", "eventClass", "globalTid", "nameId", "graphNodeId", "originalGraphNodeId"],
        [(9650, 9660, 0, GTID, 32, 99, None)],
    )
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, "
        "returnValue) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(9900, 9950, 0, GTID, 40, 30, 0), (10900, 10950, 0, GTID, 41, 30, 0)],
    )
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN graphId INTEGER")
    con.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
        "globalPid, demangledName, shortName, graphNodeId, graphId) VALUES (?, ?, 0, 1, 7, 40, ?, 4, 3, ?, ?)",
        [(10000, 10100, GPID, 99, GRAPH_ID), (10100, 10200, GPID, 100, GRAPH_ID)],
    )
    _table(
        con,
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        ["start", "end", "deviceId", "contextId", "streamId", "correlationId", "globalPid", "graphId", "graphExecId"],
        [(11000, 11500, 0, 1, 7, 41, GPID, GRAPH_ID, GRAPH_EXEC)],
    )
    con.commit()
    con.close()
    return path
