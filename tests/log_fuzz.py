"""The text-log fuzz target: damaged copies of real logs (see :mod:`tests.fuzz_cases`).

Seeds: the text logs of ``../shared/data/logs`` (NCCL debug, nccl-tests,
training, nvidia-smi, Slurm, ``darshan-parser`` output), each cut to its first
:data:`SEED_LINES` lines; with no shared data there are none and the target is
skipped. One input is one of:

- *line edits* (most inputs), the damage real logs carry: lines deleted,
  repeated or swapped; a line cut short; another family's lines interleaved
  (two programs printing to one stream); a number replaced by a huge, negative,
  non-finite or empty one; ``srun -l`` rank prefixes, ANSI colours, carriage
  returns, tabs for spaces, a NUL or bytes that are not UTF-8, a very long line;
  a last line with no newline;
- *byte damage* (:func:`tests.fuzz_mutators.mutate_bytes`: flips, truncation,
  splices of the donor's bytes);
- either one, gzipped, sometimes with the gzip stream itself damaged.

The contract is every reader's (:func:`tests.fuzz_cases.check`): a trace that
validates, or one clear error naming the file.
"""

from __future__ import annotations

import gzip
import random
import re
from pathlib import Path

from tests import fuzz_mutators as M

SEED_LINES = 400
"""Lines kept of each shared log: enough for every family's headers and tables, small enough for many inputs/s."""
SKIP_SUFFIXES = (".darshan",)
"""Binary Darshan logs go through PyDarshan's C library, not di's text parsers."""
NUMBERS = (
    b"0",
    b"-1",
    b"99999999999999999999999",
    b"-9223372036854775809",
    b"1e999",
    b"nan",
    b"inf",
    b"",
    b"1.2.3",
    b"0x1F",
    b"4294967296",
)
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def write_seeds(root: Path, shared: Path | None) -> None:
    """Write the seeds under ``root/<family>_<file stem>/<file name>``."""
    logs = shared / "logs" if shared is not None else None
    if logs is None or not logs.is_dir():
        return
    for path in sorted(p for p in logs.rglob("*") if p.is_file() and p.parent.name != "LICENSES"):
        if path.suffix in SKIP_SUFFIXES:
            continue
        lines = path.read_bytes().split(b"\n")[:SEED_LINES]
        folder = root / f"{path.parent.name}_{path.stem}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / path.name).write_bytes(b"\n".join(lines) + b"\n")


def _edit_lines(rng: random.Random, lines: list[bytes], donor: list[bytes]) -> list[bytes]:
    for _ in range(rng.randint(1, 4)):
        if not lines:
            lines = [b""]
        i = rng.randrange(len(lines))
        pick = rng.random()
        if pick < 0.12:
            del lines[i : i + rng.randint(1, 20)]
        elif pick < 0.22:
            lines[i:i] = lines[i : i + rng.randint(1, 10)] * rng.randint(1, 4)
        elif pick < 0.30:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif pick < 0.40:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif pick < 0.52 and donor:  # two programs printing to one stream
            k = rng.randrange(len(donor))
            for n, extra in enumerate(donor[k : k + rng.randint(1, 30)]):
                lines.insert(min(len(lines), i + 2 * n), extra)
        elif pick < 0.68:
            found = list(NUMBER.finditer(lines[i]))
            if found:
                m = rng.choice(found)
                lines[i] = lines[i][: m.start()] + rng.choice(NUMBERS) + lines[i][m.end() :]
        elif pick < 0.74:
            rank = str(rng.choice((0, 1, 7, 63, 1024))).encode()
            lines = [rank + b": " + line for line in lines]
        elif pick < 0.79:
            lines[i] = b"\x1b[1;32m" + lines[i] + b"\x1b[0m"
        elif pick < 0.83:
            lines[i] = lines[i] + b"\r"
        elif pick < 0.87:
            lines[i] = lines[i].replace(b" ", b"\t")
        elif pick < 0.91:
            at = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:at] + rng.choice((b"\x00", b"\xff\xfe", b"\xc3", b"\xef\xbb\xbf")) + lines[i][at:]
        elif pick < 0.94:
            lines[i] = lines[i] + rng.choice((b"x", b"9", b"=")) * rng.choice((4096, 70_000))
        elif pick < 0.97:
            lines[i] = lines[i].replace(b",", b"|") if rng.random() < 0.5 else lines[i].replace(b"|", b",")
        else:
            lines.append(rng.choice(lines)[: rng.randint(1, 40)] if lines else b"x")
    return lines


def mutate(rng: random.Random, seed: object, donor: object, files: dict[str, bytes]) -> str:
    """Damage the seed's log in ``files`` (a :class:`tests.fuzz_cases.Seed`'s copy); returns the entry."""
    entry = seed.entry  # type: ignore[attr-defined]
    data = files[entry]
    other = donor.files[donor.entry]  # type: ignore[attr-defined]
    pick = rng.random()
    if pick < 0.7:
        lines = _edit_lines(rng, data.split(b"\n"), other.split(b"\n"))
        data = b"\n".join(lines)
        if rng.random() < 0.8:
            data += b"\n"
    elif pick < 0.9:
        data = M.mutate_bytes(rng, data, other)
    else:
        data = M.mutate_bytes(rng, b"\n".join(_edit_lines(rng, data.split(b"\n"), other.split(b"\n"))))
    if rng.random() < 0.08:
        data = gzip.compress(data, compresslevel=1, mtime=0)
        if rng.random() < 0.25:
            data = M.mutate_bytes(rng, data)
        files.pop(entry)
        entry += ".gz"
    files[entry] = data
    return entry
