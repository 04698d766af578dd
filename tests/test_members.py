"""numeric_members: the numeric top-level members of minified JSON objects."""

from __future__ import annotations

import json

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from di.convert.chrome.members import numeric_members


def _minified(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def test_depth_one_numbers_only() -> None:
    objs = pl.Series(
        [
            _minified({"a": 1, "n": {"b": 2}, "s": "3", "l": [4, {"c": 5}], "t": True, "z": -2.5e3}),
            None,
            "{}",
            _minified({"größe [B]": 7, 'q"uote': 8, "ü": 'x,"y"', "after": 9}),
        ]
    )
    got = numeric_members(objs).rows()
    assert got == [(0, "a", 1.0), (0, "z", -2500.0), (3, "größe [B]", 7.0), (3, 'q\\"uote', 8.0), (3, "after", 9.0)]


values = st.one_of(
    st.integers(-(10**15), 10**15),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=5),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.text(alphabet="abcé_ [", max_size=6), values, max_size=5), max_size=6))
def test_matches_json_decoding(objs: list[dict[str, object]]) -> None:
    want = [
        (r, k, float(v))
        for r, o in enumerate(objs)
        for k, v in o.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    got = numeric_members(pl.Series([_minified(o) for o in objs], dtype=pl.String)).rows()
    assert got == want
