"""How the benchmarks time a step: CPU seconds of this process, the best of several runs after a warm-up."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_cpu(fn: Callable[[], object], repeats: int) -> float:
    """The least CPU time (user + system, seconds) of ``repeats`` calls of ``fn`` after one warm-up call."""
    fn()
    runs = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        runs.append(time.process_time() - t0)
    return min(runs)
