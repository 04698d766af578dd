"""Capture: recording a job and ingesting what was recorded into the canonical trace.

``di record`` (:mod:`di.capture.record`) runs a command with the C shims of
``shim/`` in LD_PRELOAD (PMPI: :file:`shim/pmpi.c`; POSIX and stdio file I/O:
:file:`shim/posixio.c`; both append to the shards of :file:`shim/shard.h`, built
on first use by :mod:`di.capture.build`) and the samplers of
:mod:`di.capture.samplers` beside it; :mod:`di.capture.ingest` then reads the
shards (:mod:`di.capture.shard`), synchronises clocks (:mod:`di.capture.clock`),
matches messages and collectives (:mod:`di.capture.matching`) and computes the
per-file I/O table (:mod:`di.capture.iostats`). Capture returns the trace; what
is done with it (``di demo``'s summary, say) belongs to the layers above.
"""


def gpu(raw: str | None = None):  # noqa: ANN201 (lazy import keeps `import di` light)
    """This process's CUPTI capture (:func:`di.capture.cupti.gpu`): ``with di.capture.gpu(): ...``."""
    from di.capture.cupti import gpu as _gpu

    return _gpu(raw)
