"""What the processes of a parallel run send each other, counted in bytes.

Every exchange is one MPI collective call over the processes (``alltoall`` of
pickled payloads: mpi4py's alltoallv of variable-sized buffers; ``allgather``,
``bcast``), so each process sends and receives only what crosses its ranks.
:meth:`Exchange.check` makes a failure on one process the failure of all: every
process learns it at the same call and raises, so none waits forever.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

from di.errors import DIError


class PeerFailed(DIError):
    """Another process of the parallel run failed; its message says which and why."""


@dataclass
class Exchange:
    """A communicator and the bytes this process sent through it.

    Attributes:
        comm: an mpi4py communicator.
        sent_bytes: bytes of pickled payload this process sent (to other processes).
        calls: collective calls made.
        by_stage: bytes sent per stage (what was exchanged); calls_by_stage: calls per stage.
    """

    comm: Any
    sent_bytes: int = 0
    calls: int = 0
    by_stage: dict[str, int] = field(default_factory=dict)
    calls_by_stage: dict[str, int] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return int(self.comm.Get_rank())

    @property
    def size(self) -> int:
        return int(self.comm.Get_size())

    def _count(self, stage: str, n: int) -> None:
        self.sent_bytes += n
        self.calls += 1
        self.by_stage[stage] = self.by_stage.get(stage, 0) + n
        self.calls_by_stage[stage] = self.calls_by_stage.get(stage, 0) + 1

    def alltoall(self, outgoing: list[Any], stage: str) -> list[Any]:
        """Send ``outgoing[q]`` to process q; returns what each process sent this one (None: nothing)."""
        blobs = [None if x is None else pickle.dumps(x, protocol=5) for x in outgoing]
        self._count(stage, sum(len(b) for q, b in enumerate(blobs) if b is not None and q != self.rank))
        got = self.comm.alltoall(blobs)
        return [None if b is None else pickle.loads(b) for b in got]

    def allgather(self, value: Any, stage: str) -> list[Any]:
        """Every process's ``value``, in process order."""
        blob = pickle.dumps(value, protocol=5)
        self._count(stage, len(blob) * (self.size - 1))
        return [pickle.loads(b) for b in self.comm.allgather(blob)]

    def gather(self, value: Any, stage: str) -> list[Any] | None:
        """Every process's ``value`` on process 0 (None elsewhere)."""
        blob = pickle.dumps(value, protocol=5)
        self._count(stage, len(blob) if self.rank else 0)
        got = self.comm.gather(blob, root=0)
        return None if got is None else [pickle.loads(b) for b in got]

    def bcast(self, value: Any, root: int, stage: str) -> Any:
        """``value`` of process ``root`` on every process."""
        blob = pickle.dumps(value, protocol=5) if self.rank == root else None
        if blob is not None:
            self._count(stage, len(blob) * (self.size - 1))
        return pickle.loads(self.comm.bcast(blob, root=root))

    def check(self, error: BaseException | None, stage: str) -> None:
        """Called by every process after a step that may fail locally (reading its input): when any process
        failed, every process raises: the failing one its own error, the others :class:`PeerFailed` naming it.

        Raises:
            the local error, or PeerFailed.
        """
        texts = self.comm.allgather(None if error is None else f"{type(error).__name__}: {error}")
        self.calls += 1
        failed = [(p, t) for p, t in enumerate(texts) if t is not None]
        if not failed:
            return
        if error is not None:
            raise error
        p, text = failed[0]
        raise PeerFailed(f"process {p} of {self.size} failed while {stage}: {text}")
