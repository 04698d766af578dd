"""The ``.di`` store: round trip, lazy scan, version checks, missing tables,
schema validation and the on-disk format (zstd Parquet, meta.json schema)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import di
from conftest import assert_valid, kineto_file, trace_doc, write_json
from di import schema
from di.cli import main


def hand_rank(rank: int) -> dict:
    """A small Kineto-shaped rank: a launch, its kernel (a collective), a flow, a counter."""
    args = {"Collective name": "allreduce", "In msg nelems": 4, "dtype": "Float", "Process Group Name": "0"}
    return trace_doc(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 9,
            "tid": 9,
            "ts": 1,
            "dur": 2,
            "args": {"correlation": 5},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ncclKernel",
            "pid": rank,
            "tid": 7,
            "ts": 4,
            "dur": 3,
            "args": {"correlation": 5, **args},
        },
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 9, "tid": 9, "ts": 1},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": rank, "tid": 7, "ts": 4, "bp": "e"},
        {"ph": "C", "name": "mem", "pid": 9, "ts": 2, "args": {"used": 3 + rank}},
        distributedInfo={"rank": rank, "world_size": 2},
    )


@pytest.fixture(params=["kineto", "hand-made"])
def loaded(request: pytest.FixtureRequest, tmp_path: Path) -> di.Trace:
    """Two ranks loaded together: real Kineto files (skipped without ../shared/data) or hand-made ones."""
    if request.param == "kineto":
        return assert_valid(di.load(kineto_file("hta_trace_filter")))
    files = [write_json(tmp_path, f"r{r}.json", hand_rank(r)) for r in (0, 1)]
    trace = assert_valid(di.load(files))
    assert trace.collectives.height == 2 and trace.samples.height == 2 and trace.flows.height == 2
    return trace


@pytest.fixture
def store(loaded: di.Trace, tmp_path: Path) -> Path:
    path = tmp_path / "x.di"
    di.save(loaded, path)
    return path


def _set_version(store: Path, version: object) -> None:
    meta_file = store / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta["schema_version"] = version
    meta_file.write_text(json.dumps(meta))


def test_round_trip_keeps_tables_and_meta(loaded: di.Trace, store: Path) -> None:
    back = assert_valid(di.load(store))
    for name in schema.TABLES:
        assert back.table(name).schema == loaded.table(name).schema, name
        assert back.table(name).equals(loaded.table(name)), name
    assert back.events.height > 0 and back.flows.height > 0
    assert back.meta["sources"] == loaded.meta["sources"]
    assert [s["rank_source"] for s in back.meta["sources"]] == ["distributedInfo"] * 2
    assert back.meta == loaded.meta


def test_scan_gives_lazy_frames_equal_to_the_tables(loaded: di.Trace, store: Path) -> None:
    frames = di.scan(store)
    assert list(frames) == list(schema.TABLES)
    for name, lazy in frames.items():
        assert isinstance(lazy, pl.LazyFrame)
        assert lazy.collect().equals(loaded.table(name)), name


def test_store_round_trip_of_a_hand_made_trace(tmp_path: Path) -> None:
    doc = trace_doc(
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 5, "args": {"k": "v"}},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 2, "args": {"used": 3}},
    )
    trace = assert_valid(di.load(write_json(tmp_path, "t.json", doc)))
    di.save(trace, tmp_path / "t.di")
    back = di.load(tmp_path / "t.di")
    assert all(back.table(n).equals(trace.table(n)) for n in schema.TABLES)
    assert back.samples.rows() == [(0, 2000, 3.0)]


@pytest.mark.parametrize("version", [0, 99])
def test_unknown_schema_version(store: Path, version: int, capsys: pytest.CaptureFixture[str]) -> None:
    _set_version(store, version)
    for reader in (di.load, di.scan):
        with pytest.raises(di.SchemaVersionError, match=rf"\bv{version}\b"):
            reader(store)
    assert main(["info", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"v{version}" in err[0] and "Traceback" not in err[0]


def test_schema_version_that_is_not_an_integer(store: Path) -> None:
    _set_version(store, "1")
    with pytest.raises(di.FormatError, match="schema_version"):
        di.load(store)


def test_missing_table_file(store: Path) -> None:
    (store / "events.parquet").unlink()
    with pytest.raises(di.FormatError, match="events.parquet"):
        di.load(store)
    with pytest.raises(di.FormatError, match="events.parquet"):
        di.scan(store)


def test_unreadable_table_file(store: Path) -> None:
    (store / "flows.parquet").write_bytes(b"not parquet")
    with pytest.raises(di.FormatError, match="flows.parquet"):
        di.load(store)


def test_validate_rejects_a_wrong_dtype(loaded: di.Trace) -> None:
    bad = dataclasses.replace(loaded, events=loaded.events.with_columns(pl.col("start_ns").cast(pl.Float64)))
    with pytest.raises(di.SchemaError, match="start_ns.*Float64"):
        bad.validate()


def test_validate_rejects_nulls_in_a_non_nullable_column(loaded: di.Trace, tmp_path: Path) -> None:
    start = pl.when(pl.int_range(pl.len()) == 3).then(None).otherwise(pl.col("start_ns")).alias("start_ns")
    bad = dataclasses.replace(loaded, events=loaded.events.with_columns(start))
    with pytest.raises(di.SchemaError, match="start_ns.*null"):
        bad.validate()
    with pytest.raises(di.SchemaError):
        di.save(bad, tmp_path / "bad.di")
    assert not (tmp_path / "bad.di").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".bad.di")]  # no temporary left behind


def test_validate_rejects_a_missing_column_and_values_below_minimum(loaded: di.Trace) -> None:
    with pytest.raises(di.SchemaError, match="depth.*missing"):
        dataclasses.replace(loaded, events=loaded.events.drop("depth")).validate()
    with pytest.raises(di.SchemaError, match="src.*below"):
        dataclasses.replace(loaded, flows=loaded.flows.with_columns(pl.lit(-1, dtype=pl.Int64).alias("src"))).validate()
    with pytest.raises(di.SchemaError, match="meta.json"):
        loaded.with_meta({**loaded.meta, "format": "other"}).validate()


def test_every_table_is_zstd_parquet(store: Path) -> None:
    import pyarrow.parquet as pq

    assert sorted(p.name for p in store.iterdir()) == sorted([f"{t}.parquet" for t in schema.TABLES] + ["meta.json"])
    for name in schema.TABLES:
        meta = pq.ParquetFile(store / f"{name}.parquet").metadata
        codecs = {
            meta.row_group(g).column(c).compression for g in range(meta.num_row_groups) for c in range(meta.num_columns)
        }
        assert codecs == {"ZSTD"} or (meta.num_row_groups == 0 and meta.num_rows == 0), (name, codecs)


def test_tables_are_encoded_for_their_columns(store: Path) -> None:
    """int64 columns are delta-encoded, texts and categories dictionary-encoded, narrower integers and booleans
    plain, statistics only on the numbers every row has: and polars and pyarrow both read the files back as
    written."""
    import pyarrow.parquet as pq

    events = di.load(store).events
    kinds = dict(events.schema)
    meta = pq.ParquetFile(store / "events.parquet").metadata
    assert meta.num_rows > 0
    seen: dict[str, set[str]] = {}
    stats = set()
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            col = meta.row_group(g).column(c)
            name = col.path_in_schema
            seen.setdefault(name, set()).update(col.encodings)
            if col.is_stats_set:
                stats.add(name)
                assert col.statistics.min <= col.statistics.max
    every_row = {n for n, d in kinds.items() if d.is_numeric() and not events.get_column(n).null_count()}
    assert stats == every_row and {"loc", "start_ns", "end_ns", "depth"} <= stats
    assert {n for n, d in kinds.items() if d.is_numeric()} - stats  # a numeric column with nulls has none
    dictionary = {"RLE_DICTIONARY", "PLAIN_DICTIONARY"}
    for name, dtype in kinds.items():
        if dtype == pl.Int64:
            assert "DELTA_BINARY_PACKED" in seen[name], (name, seen[name])
        elif dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum):
            assert seen[name] & dictionary, (name, seen[name])
        else:
            assert not seen[name] & dictionary and "PLAIN" in seen[name], (name, seen[name])
    back = pl.read_parquet(store / "events.parquet")
    assert back.equals(events)
    assert pq.read_table(store / "events.parquet").num_rows == back.height


def test_columns_without_nulls_are_required(loaded: di.Trace, tmp_path: Path) -> None:
    """A column the schema declares non-nullable is REQUIRED in its Parquet file (no definition levels); in a table
    that is one file, so is any other without a null in it, while a partitioned store's files keep the schema's
    nullability, so that the files of one table agree. Both read back as written."""
    import pyarrow.parquet as pq

    from di.store import write_store
    from di.store_partition import PARTITIONED

    whole, parted = tmp_path / "whole.di", tmp_path / "parted.di"
    write_store(loaded, whole)
    write_store(loaded, parted, partitioned=True, ranks_per_group=1)

    def required(file: Path) -> set[str]:
        return {f.name for f in pq.read_schema(file) if not f.nullable}

    for name, df in loaded.tables().items():
        fixed = set(schema.non_nullable_columns(name)) & set(df.columns)
        clean = {c for c in df.columns if not df.get_column(c).null_count()}
        assert required(whole / f"{name}.parquet") == (fixed | clean if df.height else fixed), name
        groups = sorted((parted / name).glob("*.parquet"))
        for file in groups:  # a rank group's rows of a partitioned table (and their ``_row``): the schema's
            assert required(file) == fixed, (name, file.name)
        if name not in PARTITIONED:  # a table kept whole in a partitioned store is one file too
            assert required(parted / f"{name}.parquet") == required(whole / f"{name}.parquet"), name
    events = loaded.events
    assert {"args", "src_cat"} & set(schema.nullable_columns("events")) == {"args", "src_cat"}
    assert not events.get_column("args").null_count()  # a nullable column without nulls, REQUIRED in the whole file
    assert "args" in required(whole / "events.parquet")
    back, back_parted = di.load(whole), di.load(parted)
    for name, df in loaded.tables().items():
        assert back.table(name).equals(df), name
        assert back_parted.table(name).sort(df.columns[:3]).equals(df.sort(df.columns[:3])), name


def test_a_null_where_the_schema_allows_none_is_written_optional(loaded: di.Trace, tmp_path: Path) -> None:
    """Rows of a trace that was not validated, with a null in a column the schema declares non-nullable: that column is
    written OPTIONAL (pyarrow refuses a null in a REQUIRED one) and reads back with its null, under the rule of a table
    written whole and under that of a partitioned store's files."""
    import pyarrow.parquet as pq

    from di.store import _write_parquet, required_columns

    events = loaded.events.with_columns(loaded.events.get_column("depth").scatter(0, None))
    assert "depth" in schema.non_nullable_columns("events")
    for whole in (True, False):
        required = required_columns("events", events, whole=whole)
        assert "depth" not in required and "start_ns" in required
        file = tmp_path / f"{whole}.parquet"
        _write_parquet(events, file, 1, required)
        assert {f.name for f in pq.read_schema(file) if not f.nullable} == required
        assert pl.read_parquet(file).equals(events)


def test_categorical_columns_are_written_over_the_categories_they_use(tmp_path: Path) -> None:
    """A Categorical column goes to Parquet as a dictionary of the categories its rows use, whichever other
    categories the process holds (polars' categories are shared by every column): its codes renumbered when they
    leave gaps, as they are when they do not; a column with nulls goes through polars' own conversion. Each reads
    back equal."""
    import pyarrow.parquet as pq

    from di.store import _categorical_array, _write_parquet

    other = pl.Series([f"other {k}" for k in range(5000)], dtype=pl.Categorical)  # categories no column below uses
    # as many rows as the process's categories (which the suite's other tests add to): a column of a few rows among
    # many categories goes through polars' conversion
    rows = int(other.to_physical().max()) // 4 + 1
    gaps = pl.Series(["b", "zz", "b", "other 17", "a"] * (rows // 5 + 1), dtype=pl.Categorical)
    first = pl.Series([f"dense {k}" for k in range(40)] * (rows // 40 + 1), dtype=pl.Categorical)
    nulls = pl.Series(["b", None, "a"], dtype=pl.Categorical)
    array = _categorical_array(gaps)
    assert array is not None and sorted(array.dictionary.to_pylist()) == ["a", "b", "other 17", "zz"]
    assert array.to_pylist() == gaps.to_list()
    dense = _categorical_array(first)
    assert dense is not None and len(dense.dictionary) == 40 and dense.to_pylist() == first.to_list()
    assert _categorical_array(nulls) is None and _categorical_array(gaps.cast(pl.String)) is None
    assert _categorical_array(gaps.head(3)) is None  # 3 rows, codes up to thousands
    for k, s in enumerate((gaps, first, nulls, gaps.head(0))):
        df = pl.DataFrame({"x": s, "n": range(s.len())})
        file = tmp_path / f"{k}.parquet"
        _write_parquet(df, file, 1)
        back = pl.read_parquet(file)
        assert back.schema == df.schema and back.equals(df), k
        assert pq.read_table(file).column("x").to_pylist() == s.to_list()
        # the field as polars makes it, metadata and all (without it, polars reads each text back through a hash)
        own = df.select("x").head(0).to_arrow(compat_level=pl.CompatLevel.oldest()).schema.field("x")
        assert pq.read_schema(file).field("x").metadata == own.metadata, k


def test_text_columns_keep_level_1_and_pages_end_by_size(loaded: di.Trace) -> None:
    """The text columns are compressed at the store's level, the others at zstd's fast level; a data page ends at
    pyarrow's page size, not at its default of 20,000 rows (where this pyarrow has the option)."""
    import inspect

    import pyarrow.parquet as pq

    from di.store import COMPRESSION_LEVEL, NUMBERS_LEVEL, PAGE_ROWS, parquet_options

    options = parquet_options(loaded.events, COMPRESSION_LEVEL)
    levels = options["compression_level"]
    assert levels["args"] == levels["name"] == levels["cat"] == COMPRESSION_LEVEL
    assert levels["start_ns"] == levels["depth"] == levels["instant"] == NUMBERS_LEVEL < COMPRESSION_LEVEL
    assert set(levels) == set(loaded.events.columns)
    has_rows = "max_rows_per_page" in inspect.signature(pq.ParquetWriter.__init__).parameters
    assert options.get("max_rows_per_page") == (PAGE_ROWS if has_rows else None)


def test_empty_tables_are_written_once_per_process(tmp_path: Path) -> None:
    """An empty table's file is made once and written as the same bytes: what pyarrow writes for it, and it reads
    back with the table's columns."""
    import pyarrow.parquet as pq

    from di.store import _arrow_table, _empty_file, _write_parquet, parquet_options

    empty = pl.DataFrame(schema=schema.polars_schema("messages"))
    _write_parquet(empty, tmp_path / "a.parquet", 1)
    before = _empty_file.cache_info().hits
    _write_parquet(empty, tmp_path / "b.parquet", 1)
    assert _empty_file.cache_info().hits == before + 1
    pq.write_table(_arrow_table(empty), tmp_path / "c.parquet", **parquet_options(empty, 1))
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "c.parquet").read_bytes()
    assert pl.read_parquet(tmp_path / "b.parquet").schema == empty.schema


def test_meta_json_validates_against_its_schema(store: Path) -> None:
    import jsonschema

    meta = json.loads((store / "meta.json").read_text())
    jsonschema.validate(meta, schema.json_schema("meta"))
    spec = json.loads(
        (Path(__file__).resolve().parents[1] / "schemas" / "trace" / "v1" / "meta.schema.json").read_text()
    )
    jsonschema.validate(meta, spec)
    assert meta["format"] == "di-trace" and meta["schema_version"] == schema.SCHEMA_VERSION
    assert meta["tables"]["events"] == pl.read_parquet(store / "events.parquet").height
    assert meta["ranks"] == [0, 1]


def test_saving_over_an_existing_store_replaces_it(loaded: di.Trace, store: Path, tmp_path: Path) -> None:
    one = write_json(tmp_path, "one.json", trace_doc({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}))
    di.save(di.load(one), store)
    assert di.load(store).events.height == 1
    shutil.rmtree(store)
    di.save(loaded, store)
    assert di.load(store).events.height == loaded.events.height


def test_store_with_a_large_meta_is_recognised(tmp_path: Path) -> None:
    """A source whose info fills more than the first 4 KiB of meta.json (hta_cpu_only's
    300-rank process-group config did) must still be recognised as a store."""
    source = {
        "path": "x",
        "format": "chrome",
        "rank": 0,
        "rank_source": "single",
        "events": 0,
        "dropped": {},
        "info": {"pad": "p" * 20_000},
    }
    trace = di.Trace.build(meta={"sources": [source]})
    di.save(trace, tmp_path / "big.di")
    assert (tmp_path / "big.di" / "meta.json").read_bytes().index(b'"di-trace"') < 100
    assert di.load(tmp_path / "big.di").meta["sources"][0]["info"]["pad"] == "p" * 20_000


def test_invariants_the_schemas_cannot_state() -> None:
    locations = {"loc": [0], "rank": [0], "kind": ["cpu_thread"], "source": [0]}
    events = {
        "loc": [0, 0],
        "start_ns": [10, 5],
        "end_ns": [4, 5],
        "name": ["a", "b"],
        "cat": ["other", "other"],
        "depth": [0, 0],
        "instant": [False, False],
        "parent": [None, 7],
    }
    flows = {"src": [0, 1, 1], "dst": [1, 5, 2], "kind": ["user", "user", "user"]}  # two past the last row
    with pytest.raises(di.SchemaError) as err:
        di.Trace.build(meta={}, locations=locations, events=events, flows=flows).validate()
    for problem in (
        "1 events end before they start",
        "1 events out of (loc, start_ns) order",
        "1 events.parent values",
        "2 flows.dst values",
    ):
        assert problem in str(err.value)


# Found by fuzzing (tests/test_fuzz.py, bench/fuzz.py): a damaged store is a FormatError naming the file, never
# another exception and never a trace that does not validate.


def test_deeply_nested_meta_json(store: Path) -> None:
    """fuzz: RecursionError from json.loads."""
    (store / "meta.json").write_text(
        '{"format": "di-trace", "schema_version": 1, "command": ' + "[" * 100_000 + "]" * 100_000 + "}"
    )
    with pytest.raises(di.FormatError, match=r"meta\.json: not valid JSON"):
        di.load(store)


@pytest.mark.parametrize(("key", "value"), [("clock", 1.5), ("sources", [-1]), ("warnings", "x"), ("hosts", [None])])
def test_meta_field_of_the_wrong_type(store: Path, key: str, value: object) -> None:
    """fuzz: the trace came back and failed validate()."""
    meta = json.loads((store / "meta.json").read_text())
    meta[key] = value
    (store / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(di.FormatError, match=rf"meta\.json: does not match the trace schema: meta\.json at {key}"):
        di.load(store)


@pytest.mark.parametrize(
    ("table", "column", "value", "problem"),
    [
        ("locations", "kind", None, "nulls"),  # fuzz: the trace came back and failed validate()
        ("events", "start_ns", "soon", "not table 'events'"),  # fuzz: InvalidOperationError from Trace.build
        ("events", "loc", 2**31, "not rows of|unknown locations"),
        ("events", "start_ns", None, "nulls"),  # fuzz: TypeError in refresh_meta (the time range of a null column)
    ],
)
def test_table_that_does_not_fit_the_schema(store: Path, table: str, column: str, value: object, problem: str) -> None:
    df = pl.read_parquet(store / f"{table}.parquet")
    df.with_columns(pl.lit(value).alias(column)).write_parquet(store / f"{table}.parquet")
    with pytest.raises(di.FormatError, match=problem) as info:
        di.load(store)
    assert str(store) in str(info.value) and "\n" not in str(info.value)


def test_parquet_with_a_duplicated_chunk(store: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """fuzz: polars panicked (PanicException, a BaseException) on a copy of 64 bytes inside a column chunk,
    printing a Rust backtrace to stderr: a FormatError now, and stderr stays empty."""
    data = (store / "events.parquet").read_bytes()
    for at in range(64, len(data) - 8, max(1, len(data) // 40)):
        (store / "events.parquet").write_bytes(data[:at] + data[at - 64 : at] + data[at:])
        try:
            assert_valid(di.load(store))
        except di.FormatError as exc:
            assert "events.parquet" in str(exc)
    err = capfd.readouterr().err
    assert "panicked" not in err and "backtrace" not in err.lower(), err
