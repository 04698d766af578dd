"""How many bytes di takes into memory from one input file.

A trace is read whole: a plain file is mapped, a gzip stream is inflated into
one buffer, and the tables built from it take as much again. A file of a few
MB can inflate to tens of GB (deflate packs up to 1032 bytes into one: a
"gzip bomb"), so every place that inflates or reads an input whole stops at a
limit on the *decompressed* size, in bytes, and raises
:class:`~di.errors.InputTooLargeError` instead of running out of memory.

The default limit is :data:`MEMORY_FRACTION` of the memory available now
(``MemAvailable`` in ``/proc/meminfo``; where that cannot be read, a quarter of
the physical memory, else :data:`FALLBACK_LIMIT_BYTES`). Callers override it
with ``max_input_size`` (``di.load(path, max_input_size="8G")``, ``di ...
--max-input-size 8G``); 0 means no limit.
"""

from __future__ import annotations

import os
import re

from di.errors import InputTooLargeError

MEMORY_FRACTION = 0.5
"""Share of MemAvailable one input may take: reading a JSON trace holds the inflated
text and a copy of its args strings (up to twice the input) while it is scanned."""
PHYSICAL_FRACTION = 0.25
"""Share of the physical memory, where MemAvailable cannot be read (not Linux)."""
FALLBACK_LIMIT_BYTES = 4 << 30
"""Limit when neither MemAvailable nor the physical memory size can be read."""
MIN_DEFAULT_LIMIT_BYTES = 256 << 20
"""The default limit never drops below this, so small traces load on a busy machine."""
MEMINFO = "/proc/meminfo"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)
RAISE_HINT = "raise it with --max-input-size SIZE (e.g. {twice}; 0: no limit) or di.load(..., max_input_size=...)"


def available_bytes(meminfo: str = MEMINFO) -> int | None:
    """``MemAvailable`` of ``meminfo`` in bytes, or None where it cannot be read."""
    try:
        with open(meminfo, "rb") as fh:
            for line in fh.read(1 << 16).decode("ascii", "replace").splitlines():
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the kernel writes kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_limit_bytes(meminfo: str = MEMINFO) -> int:
    """The default input size limit in bytes (see the module docstring)."""
    avail = available_bytes(meminfo)
    if avail is not None:
        return max(int(avail * MEMORY_FRACTION), MIN_DEFAULT_LIMIT_BYTES)
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return FALLBACK_LIMIT_BYTES
    return max(int(physical * PHYSICAL_FRACTION), MIN_DEFAULT_LIMIT_BYTES) if physical > 0 else FALLBACK_LIMIT_BYTES


def parse_size(text: str) -> int:
    """Bytes of a size written ``4G``, ``500M``, ``1.5GiB``, ``64k`` or ``123`` (units are powers of 1024).

    Raises:
        ValueError: not a size.
    """
    m = _SIZE.fullmatch(text)
    if m is None:
        raise ValueError(
            f"{text!r} is not a size: write bytes or a number with K, M, G or T (e.g. 4G, 500M; 0: no limit)"
        )
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def limit_bytes(max_input_size: int | str | None) -> int | None:
    """The limit in bytes that ``max_input_size`` asks for: None (the default limit),
    bytes, or a size text (:func:`parse_size`); 0 gives None, meaning no limit.

    Raises:
        ValueError: a negative number or a text that is not a size.
    """
    if max_input_size is None:
        return default_limit_bytes()
    n = parse_size(max_input_size) if isinstance(max_input_size, str) else int(max_input_size)
    if n < 0:
        raise ValueError(f"max_input_size must be 0 (no limit) or a positive number of bytes, not {max_input_size!r}")
    return n or None


def size_text(n: int) -> str:
    """``n`` bytes for a message: ``512 B``, ``3.0 MiB``, ``11.4 GiB``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def too_large(path: object, what: str, limit: int) -> InputTooLargeError:
    """The error for ``path``, which ``what`` (e.g. "decompresses to") more than ``limit`` bytes."""
    twice = f"{max(2 * limit >> 30, 1)}G" if limit >= 1 << 29 else f"{max(2 * limit >> 20, 1)}M"
    return InputTooLargeError(
        path, f"{what} more than {size_text(limit)}, the input size limit; {RAISE_HINT.format(twice=twice)}", limit
    )


def check_size(path: object, size_bytes: int, limit: int | None, what: str = "is") -> None:
    """Raise :class:`~di.errors.InputTooLargeError` when ``size_bytes`` exceeds ``limit`` (None: no limit)."""
    if limit is not None and size_bytes > limit:
        raise too_large(path, what, limit)
