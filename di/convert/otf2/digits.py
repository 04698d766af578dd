"""Decimal digits of int64 values written into UTF-8 buffers by numba kernels (the args and ``di.flows_in`` texts).

A module of its own, beside the kernels that use it: the writer's :mod:`flowtext` imports it without
importing the reader's record callbacks (:mod:`records`, compiled when imported).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler


@njit(cache=True, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def write_int(out, o, v):
    """Decimal digits of int64 ``v`` at out[o:]; returns the new end."""
    if v < 0:
        out[o] = 45  # '-'
        o += 1
    u = np.uint64(-(v + 1)) + np.uint64(1) if v < 0 else np.uint64(v)  # |v|, int64 min included
    n = 1
    t = u
    while t >= 10:
        t //= np.uint64(10)
        n += 1
    for i in range(n - 1, -1, -1):
        out[o + i] = 48 + np.uint8(u % np.uint64(10))
        u //= np.uint64(10)
    return o + n
