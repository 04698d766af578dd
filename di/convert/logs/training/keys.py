"""The keys of a training log's pairs: which series each names (with its unit) and which number the steps.

:data:`KEYS` maps a normalised key (:func:`_norm`) to its series and unit; :data:`STEP_KEYS` are the keys that index
the samples instead of being samples, in the order one is preferred to another on a line.
"""

from __future__ import annotations

import polars as pl

__all__ = ["KEYS", "STEP_KEYS"]

STEP_KEYS = ("iteration", "global_step", "step", "global_steps", "_step", "train_step", "it")

KEYS: dict[str, tuple[str, str | None]] = {
    "elapsed_time_per_iteration_ms": ("step_time", "ms"),
    "elapsed_time_per_iteration": ("step_time", "ms"),
    "iteration_time": ("step_time", "s"),
    "step_time": ("step_time", "s"),
    "e2e_latency": ("step_time", "s"),
    "learning_rate": ("lr", None),
    "lr": ("lr", None),
    "lm_loss": ("loss", None),
    "lm-loss": ("loss", None),
    "loss": ("loss", None),
    "train_loss": ("loss", None),
    "loss_scale": ("loss_scale", None),
    "grad_norm": ("grad_norm", None),
    "global_batch_size": ("global_batch_size", "samples"),
    "consumed_samples": ("consumed_samples", "samples"),
    "consumed_tokens": ("consumed_tokens", "tokens"),
    "number_of_skipped_iterations": ("skipped_iterations", "count"),
    "number_of_nan_iterations": ("nan_iterations", "count"),
    "skipped": ("skipped_steps", "count"),
    "cursamplespersec": ("samples_per_s", "samples/s"),
    "currsamplespersec": ("samples_per_s", "samples/s"),
    "runningavgsamplespersec": ("samples_per_s_avg", "samples/s"),
    "avgsamplespersec": ("samples_per_s_avg", "samples/s"),
    "samples_per_second": ("samples_per_s", "samples/s"),
    "train_samples_per_second": ("samples_per_s", "samples/s"),
    "train_steps_per_second": ("steps_per_s", "steps/s"),
    "train_runtime": ("train_runtime", "s"),
    "tps": ("tokens_per_s", "tokens/s"),
    "tokens_per_second": ("tokens_per_s", "tokens/s"),
    "tokens_per_sec": ("tokens_per_s", "tokens/s"),
    "wps": ("tokens_per_s", "tokens/s"),
    "tflops": ("tflops", "TFLOP/s"),
    "throughput_per_gpu_tflop_s_gpu": ("tflops", "TFLOP/s"),
    "tflop_s": ("tflops", "TFLOP/s"),
    "mfu": ("mfu", "%"),
    "memallocated": ("memory_allocated", None),
    "maxmemallocated": ("memory_allocated_max", None),
    "memory": ("memory", None),
    "mem_reserved": ("memory_reserved", None),
    "max_memory_allocated": ("memory_allocated_max", None),
    "epoch": ("epoch", None),
}
"""Normalised source key -> (series name, unit; None: the value's suffix or no unit)."""


_KEYS = pl.DataFrame(
    {"key": list(KEYS), "series": [v[0] for v in KEYS.values()], "unit": [v[1] for v in KEYS.values()]},
    schema={"key": pl.String, "series": pl.String, "unit": pl.String},
)
""":data:`KEYS` as a frame."""


def _norm(col: str) -> pl.Expr:
    """The keys of column ``col`` as :data:`KEYS` holds them: lower case, each run of other characters one ``_``,
    none at either end."""
    return pl.col(col).str.to_lowercase().str.replace_all(r"[^a-z0-9]+", "_").str.strip_chars("_")
