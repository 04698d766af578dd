"""Hand-built job traces whose analysis results are known by construction.

``Job`` collects timelines and events in milliseconds and builds a canonical
:class:`di.trace.Trace` through ``Trace.build`` (events sorted, nested,
collectives matched into instances as ``di.merge`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from di.merge import assign_instances
from di.nesting import nest
from di.trace import Trace

MS = 1_000_000


@dataclass
class Job:
    """A trace under construction; times in ms, handles are insertion indices."""

    locs: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    messages: list[tuple[int, int, int | None]] = field(default_factory=list)
    collectives: list[tuple[int, str, str, int | None, int]] = field(default_factory=list)
    flows: list[tuple[int, int, str]] = field(default_factory=list)
    _seq: dict = field(default_factory=dict)

    def thread(self, rank: int) -> int:
        self.locs.append({"rank": rank, "kind": "cpu_thread", "device": None, "stream": None})
        return len(self.locs) - 1

    def stream(self, rank: int, device: int = 0, stream: int = 7, tid: int | None = None) -> int:
        """A GPU stream; ``tid``: its id in the source (an OTF2 location ref, what a ``CUDA_STREAM_REF`` names)."""
        self.locs.append({"rank": rank, "kind": "gpu_stream", "device": device, "stream": stream, "tid": tid})
        return len(self.locs) - 1

    def ev(self, loc: int, start_ms: float, end_ms: float, name: str, cat: str, args: str | None = None) -> int:
        """An event; ``args``: its JSON args text (e.g. Score-P's ``{"CUDA_STREAM_REF":N}``)."""
        self.events.append(
            {
                "loc": loc,
                "start_ns": round(start_ms * MS),
                "end_ns": round(end_ms * MS),
                "name": name,
                "cat": cat,
                "args": args,
            }
        )
        return len(self.events) - 1

    def message(self, send: int, recv: int, send_done: int | None = None) -> None:
        """A matched message; ``send_done``: the call that completed a non-blocking send (its MPI_Wait)."""
        self.messages.append((send, recv, send_done))

    def collective(self, members: list[int], op: str, comm: str = "world", root: int | None = None) -> None:
        for h in members:
            rank = self.locs[self.events[h]["loc"]]["rank"]
            seq = self._seq.get((rank, comm), 0)
            self._seq[(rank, comm)] = seq + 1
            self.collectives.append((h, op, comm, root, seq))

    def flow(self, src: int, dst: int, kind: str = "launch") -> None:
        self.flows.append((src, dst, kind))

    def build(self) -> Trace:
        locations = pl.DataFrame(
            {
                "loc": np.arange(len(self.locs), dtype=np.uint32),
                "rank": [x["rank"] for x in self.locs],
                "kind": [x["kind"] for x in self.locs],
                "device": [x["device"] for x in self.locs],
                "stream": [x["stream"] for x in self.locs],
                "tid": [x.get("tid") for x in self.locs],
                "source": [0] * len(self.locs),
            },
            schema_overrides={"device": pl.Int32, "stream": pl.Int64, "tid": pl.Int64},
        )
        ev = (
            pl.DataFrame(self.events, schema_overrides={"args": pl.String})
            .with_row_index("handle")
            .with_columns(pl.col("loc").cast(pl.UInt32))
        )
        ev = ev.sort("loc", "start_ns", pl.col("end_ns"), descending=[False, False, True], maintain_order=True)
        depth, parent = nest(
            ev.get_column("loc").to_numpy(), ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy()
        )
        ev = ev.with_columns(
            pl.Series("depth", depth), pl.Series("parent", parent).replace(-1, None), pl.lit(False).alias("instant")
        )
        row = np.empty(ev.height, np.int64)
        row[ev.get_column("handle").to_numpy()] = np.arange(ev.height)
        coll = (
            pl.DataFrame(
                {
                    "event": [int(row[h]) for h, *_ in self.collectives],
                    "rank": [self.locs[self.events[h]["loc"]]["rank"] for h, *_ in self.collectives],
                    "op": [c[1] for c in self.collectives],
                    "comm": [c[2] for c in self.collectives],
                    "root": [c[3] for c in self.collectives],
                    "seq": [c[4] for c in self.collectives],
                },
                schema_overrides={"root": pl.Int32, "rank": pl.Int32, "event": pl.Int64, "seq": pl.Int64},
            )
            if self.collectives
            else None
        )
        trace = Trace.build(
            meta={"sources": []},
            locations=locations,
            events=ev.drop("handle"),
            messages=pl.DataFrame(
                {
                    "send": [int(row[s]) for s, _, _ in self.messages],
                    "recv": [int(row[r]) for _, r, _ in self.messages],
                    "send_done": [None if d is None else int(row[d]) for *_, d in self.messages],
                },
                schema_overrides={"send_done": pl.Int64},
            )
            if self.messages
            else None,
            collectives=coll,
            flows={
                "src": [int(row[s]) for s, _, _ in self.flows],
                "dst": [int(row[d]) for _, d, _ in self.flows],
                "kind": [k for *_, k in self.flows],
            }
            if self.flows
            else None,
        )
        trace = type(trace)(**{**trace.tables(), "collectives": assign_instances(trace.collectives)}, meta=trace.meta)
        trace.validate()
        self.row = row
        return trace


def late_allreduce(late_rank: int = 2, late_ms: float | list[float] = 30.0, ranks: int = 4, steps: int = 1) -> Job:
    """``ranks`` ranks compute 100 ms (``late_rank`` 100 + late_ms; a list: each step's) then allreduce
    until 10 ms after the last one arrives; repeated ``steps`` times with
    ProfilerStep markers."""
    job = Job()
    threads = [job.thread(r) for r in range(ranks)]
    t0 = 0.0
    for k in range(steps):
        late = late_ms[k] if isinstance(late_ms, list) else late_ms
        arrive = [t0 + 100 + (late if r == late_rank else 0) for r in range(ranks)]
        done = max(arrive) + 10
        members = []
        for r, th in enumerate(threads):
            job.ev(th, t0, done, f"ProfilerStep#{k}", "step")
            job.ev(th, t0, arrive[r], "forward_backward", "compute")
            members.append(job.ev(th, arrive[r], done, "MPI_Allreduce", "mpi_coll"))
        job.collective(members, "allreduce")
        t0 = done
    return job
