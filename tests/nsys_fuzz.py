"""The Nsight Systems fuzz target: damaged SQLite exports (see :mod:`tests.fuzz_cases`).

Seeds: the shared CloverLeaf export when present, and always a hand-built export
with every table di reads (:mod:`tests.nsys_cases`: NVTX, memset, driver API,
CUDA graphs, a 2-rank MPI exchange with MPI_COMMUNICATORS). One input is one of:

- *SQL edits*, made on an in-memory copy (``sqlite3`` deserialize/serialize): a
  table dropped, a column dropped or renamed (schema drift), values set to NULL,
  to text, to huge or negative integers, StringIds rows deleted, rows duplicated,
  metadata tables emptied or given another schema version;
- *byte damage* of the file (:func:`tests.fuzz_mutators.mutate_bytes`: flips,
  truncation, splices of the donor's bytes), which SQLite meets as a corrupt page.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
from pathlib import Path

from tests import fuzz_mutators as M
from tests import nsys_cases as cases

ENTRY = "report.sqlite"
VALUES = ("NULL", "'x'", "9223372036854775807", "-9223372036854775808", "-1", "0", "4294967295", "1e300")


def write_seeds(root: Path, shared: Path | None) -> None:
    """Write the seeds under ``root/<name>/report.sqlite``."""
    with tempfile.TemporaryDirectory(prefix="di-nsys-seed-") as tmp:
        built = Path(tmp) / ENTRY
        cases.build(built, env={"PMI_SIZE": "2"})
        cases.add_mpi(built, {cases.GTID: 0, cases.GTID2: 1}, communicators=True)
        cases.add_graphs(built)
        (root / "built").mkdir(parents=True, exist_ok=True)
        (root / "built" / ENTRY).write_bytes(built.read_bytes())
    clover = (shared / "nsys" / "cloverleaf" / "perlmutter-cloverleaf-cuda.sqlite") if shared else None
    if clover is not None and clover.exists():
        (root / "cloverleaf").mkdir(parents=True, exist_ok=True)
        (root / "cloverleaf" / ENTRY).write_bytes(clover.read_bytes())


def _sql_edit(rng: random.Random, data: bytes) -> bytes:
    con = sqlite3.connect(":memory:")
    con.deserialize(data)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    for _ in range(rng.randint(1, 3)):
        table = rng.choice(tables)
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
        pick = rng.random()
        try:
            if pick < 0.12:
                con.execute(f'DROP TABLE "{table}"')
                tables.remove(table)
            elif pick < 0.24 and len(cols) > 1:
                con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{rng.choice(cols)}"')
            elif pick < 0.32:
                con.execute(
                    f'ALTER TABLE "{table}" RENAME COLUMN "{rng.choice(cols)}" TO "renamed_{rng.randint(0, 9)}"'
                )
            elif pick < 0.7:
                where = rng.choice(("", f" WHERE rowid % {rng.randint(2, 5)} = 0", " WHERE rowid = 1"))
                con.execute(f'UPDATE "{table}" SET "{rng.choice(cols)}" = {rng.choice(VALUES)}{where}')
            elif pick < 0.8:
                con.execute(f'DELETE FROM "{table}" WHERE rowid % {rng.randint(2, 4)} = 0')
            elif pick < 0.88:
                con.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE rowid % 3 = 0')
            elif "META_DATA_EXPORT" in tables:
                con.execute(
                    "UPDATE META_DATA_EXPORT SET value = ? WHERE name = 'EXPORT_SCHEMA_VERSION'",
                    (rng.choice(("", "x", "1.0", "99.1.1", "3")),),
                )
        except sqlite3.Error:
            pass  # an edit SQLite refuses (a column in an index, the last column): the input keeps the others
    con.commit()
    out = con.serialize()
    con.close()
    return out


def mutate(rng: random.Random, seed: object, donor: object, files: dict[str, bytes]) -> str:
    """Damage the seed's export in ``files`` (a :class:`tests.fuzz_cases.Seed`'s copy); returns the entry."""
    entry = seed.entry  # type: ignore[attr-defined]
    data = files[entry]
    pick = rng.random()
    if pick < 0.6:
        data = _sql_edit(rng, data)
    elif pick < 0.9:
        data = M.mutate_bytes(rng, data, donor.files[donor.entry])  # type: ignore[attr-defined]
    else:
        data = M.mutate_bytes(rng, _sql_edit(rng, data))
    files[entry] = data
    return entry
