"""Seeded mutations of trace files: bytes, JSON structure, protobuf structure.

Every mutator takes a :class:`random.Random` and returns new bytes (or a new
document), so one integer seed reproduces an input exactly. Used by
``tests/test_fuzz.py`` (a few hundred inputs) and ``bench/fuzz.py`` (100 k).

* bytes: bit flips, interesting byte values, truncation, chunk deletion,
  duplication, splicing (from the same or another file), random insertion;
* JSON: wrong types and extreme values for ``ts``/``dur``/``pid``/``tid``/
  ``args``/``ph``/ids, NaN/Infinity/huge literals, deep nesting, unicode junk
  (lone surrogates, NUL, invalid UTF-8), duplicated and missing keys,
  duplicated and dropped events, broken top-level fields;
* protobuf: a TracePacket tree parsed without a schema, then varints set to
  extreme values or overlong encodings, lengths that lie, wire types changed,
  fields deleted, duplicated, renumbered or moved.
"""

from __future__ import annotations

import copy
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x2C, 0x3A)


# ---------------------------------------------------------------- bytes


def flip_bits(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def set_bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(out))
        out[i] = rng.choice(INTERESTING_BYTES) if rng.random() < 0.7 else rng.randrange(256)
    return bytes(out)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)] if data else data


def _span(rng: random.Random, n: int) -> tuple[int, int]:
    start = rng.randrange(n)
    length = min(n - start, rng.choice((1, 2, 4, 8, 16, 64, 256, 4096)))
    return start, start + max(1, length)


def delete_chunk(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    a, b = _span(rng, len(data))
    return data[:a] + data[b:]


def duplicate_chunk(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    a, b = _span(rng, len(data))
    at = rng.randrange(len(data) + 1)
    return data[:at] + data[a:b] + data[at:]


def splice(rng: random.Random, data: bytes, other: bytes | None = None) -> bytes:
    """Overwrite or insert a chunk taken from ``other`` (or ``data``) at a random place."""
    donor = other or data
    if not data or not donor:
        return data
    a, b = _span(rng, len(donor))
    at = rng.randrange(len(data) + 1)
    if rng.random() < 0.5:
        return data[:at] + donor[a:b] + data[at + (b - a) :]
    return data[:at] + donor[a:b] + data[at:]


def insert_random(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[at:]


BYTE_MUTATORS: tuple[Callable[[random.Random, bytes], bytes], ...] = (
    flip_bits,
    set_bytes,
    truncate,
    delete_chunk,
    duplicate_chunk,
    splice,
    insert_random,
)


def mutate_bytes(rng: random.Random, data: bytes, other: bytes | None = None) -> bytes:
    """One to three byte-level mutations; ``other`` is a donor for splicing."""
    for _ in range(rng.randint(1, 3)):
        m = rng.choice(BYTE_MUTATORS)
        data = splice(rng, data, other) if m is splice else m(rng, data)
    return data


# ---------------------------------------------------------------- JSON


@dataclass(frozen=True)
class Raw:
    """JSON text written as is (NaN, 1e999, a deep nest, an invalid escape)."""

    text: str


class Pairs(list):  # type: ignore[type-arg]
    """An object written from (key, value) pairs, so keys may repeat."""


def dumps(obj: Any) -> str:
    """JSON text of ``obj``, with :class:`Raw`, :class:`Pairs` and non-finite floats."""
    if isinstance(obj, Raw):
        return obj.text
    if isinstance(obj, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in obj) + "}"
    if isinstance(obj, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if obj != obj else ("Infinity" if obj > 0 else "-Infinity")
    return json.dumps(obj)


def deep(rng: random.Random) -> Raw:
    n = rng.choice((100, 1000, 20_000, 200_000))
    open_, close = ("[", "]") if rng.random() < 0.5 else ('{"a":', "}")
    return Raw(open_ * n + "1" + close * n)


JUNK_TEXT = (
    "",
    " ",
    "\u0000",
    "\ud800",
    "\udfff\ud800",
    "\u202e\u200b",
    "\U0001f600" * 3,
    "é" * 50,
    "\\",
    '"',
    "x" * 70_000,
    "ProfilerStep#",
    "ProfilerStep#-1",
    "ProfilerStep#99999999999999999999",
    "nccl:all_reduce",
    "ncclDevKernel_AllReduce",
    "Memcpy HtoD",
    "cudaLaunchKernel",
    "gpu_memcpy",
    "kernel",
    "ac2g",
    "\n",
)
RAW_NUMBERS = (
    "NaN",
    "-NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1e999",
    "1E-400",
    "-0",
    "0.0000001",
    "1e18",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "123456789012345678901234567890",
    "1.5e308",
    "4.9e-324",
    "00012",
    "0x10",
    "+5",
    ".5",
    "5.",
    "1e",
)


def weird_value(rng: random.Random) -> Any:
    """A value of a wrong type or an extreme one."""
    pick = rng.randrange(10)
    if pick == 0:
        return rng.choice((None, True, False, [], {}, [1, 2], {"a": 1}))
    if pick == 1:
        return rng.choice(JUNK_TEXT)
    if pick == 2:
        return Raw(rng.choice(RAW_NUMBERS))
    if pick == 3:
        return rng.choice(
            (0, -1, 1, 2**31, 2**32, -(2**31), 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**64))
        )
    if pick == 4:
        return rng.choice((0.5, -0.5, 1e-9, -1e300, 1e300, 3.999999, float("nan"), float("inf"), -float("inf")))
    if pick == 5:
        return deep(rng)
    if pick == 6:
        return str(rng.randint(-(10**6), 10**6))
    if pick == 7:
        return Raw('"' + rng.choice(("\\ud800", "\\u00", "\\x41", "\\", "\\uD83D\\u0041", "\\u0000")) + '"')
    if pick == 8:
        return rng.randint(-(10**12), 10**12)
    return rng.uniform(-1e12, 1e12)


EVENT_KEYS = ("ts", "dur", "pid", "tid", "args", "ph", "name", "cat", "id", "bp", "s", "tts", "id2", "scope")
PHASES = (
    "X",
    "B",
    "E",
    "i",
    "I",
    "C",
    "s",
    "t",
    "f",
    "M",
    "b",
    "e",
    "n",
    "P",
    "O",
    "N",
    "D",
    "R",
    "(",
    ")",
    "",
    "XX",
    "x",
)
TOP_KEYS = (
    "traceEvents",
    "displayTimeUnit",
    "baseTimeNanoseconds",
    "distributedInfo",
    "deviceProperties",
    "schemaVersion",
    "diTrace",
    "otherData",
    "traceName",
)


def mutate_event(rng: random.Random, ev: Any) -> Any:
    """One structure-aware change to a trace event (a dict, or anything else)."""
    if not isinstance(ev, dict):
        return weird_value(rng)
    ev = dict(ev)
    key = rng.choice(tuple(ev) + EVENT_KEYS) if ev else rng.choice(EVENT_KEYS)
    pick = rng.randrange(8)
    if pick == 0:
        ev.pop(key, None)
    elif pick == 1:  # the key twice, the second value wins in most parsers
        return Pairs([*ev.items(), (key, weird_value(rng))])
    elif pick == 2 and key == "ph":
        ev["ph"] = rng.choice(PHASES)
    elif pick == 3 and isinstance(ev.get("args"), dict) and ev["args"]:
        args = dict(ev["args"])
        args[rng.choice(tuple(args))] = weird_value(rng)
        ev["args"] = args
    elif pick == 4 and isinstance(ev.get(key), (int, float)) and not isinstance(ev.get(key), bool):
        v = ev[key]
        ev[key] = rng.choice((-v, v * 1000, v + 2**62, v / 3, v * 1e12, v - 1))
    else:
        ev[key] = weird_value(rng)
    return ev


def mutate_events(rng: random.Random, events: list[Any]) -> list[Any]:
    """Change, duplicate, drop, move or add a few events."""
    events = list(events)
    for _ in range(rng.randint(1, 6)):
        pick = rng.randrange(6)
        if not events or pick == 0:
            events.insert(
                rng.randrange(len(events) + 1), rng.choice(({}, weird_value(rng), {"ph": rng.choice(PHASES)}))
            )
            continue
        i = rng.randrange(len(events))
        if pick == 1:
            events.insert(rng.randrange(len(events) + 1), events[i])
        elif pick == 2:
            del events[i]
        elif pick == 3:  # same event, another phase or a near-copy: unmatched B/E, flows, async pairs
            copy = dict(events[i]) if isinstance(events[i], dict) else {}
            copy["ph"] = rng.choice(PHASES)
            events.insert(rng.randrange(len(events) + 1), copy)
        else:
            events[i] = mutate_event(rng, events[i])
    return events


def mutate_top(rng: random.Random, top: dict[str, Any]) -> dict[str, Any]:
    """Break a top-level field (rarely the whole document: those cases are few and quickly found)."""
    top = dict(top)
    key = rng.choice(tuple(top) + TOP_KEYS)
    if rng.random() < 0.3 and isinstance(top.get(key), dict) and top[key]:
        inner = dict(top[key])
        inner[rng.choice(tuple(inner))] = weird_value(rng)
        top[key] = inner
    elif rng.random() < 0.2:
        top.pop(key, None)
    else:
        top[key] = weird_value(rng)
    return top


@dataclass
class JsonDoc:
    """A Chrome trace split so that a mutated copy re-serialises quickly: the
    top-level object, its events, and each event's JSON text."""

    top: dict[str, Any]
    events: list[Any]
    texts: list[str]
    array: bool = False  # the JSON Array Format: a bare list of events

    def __post_init__(self) -> None:
        self.index = {id(e): i for i, e in enumerate(self.events)}

    @classmethod
    def parse(cls, data: bytes) -> JsonDoc:
        doc = json.loads(data)
        if isinstance(doc, list):
            return cls({}, doc, [json.dumps(e) for e in doc], array=True)
        events = doc.get("traceEvents", [])
        return cls(doc, events, [json.dumps(e) for e in events])

    def mutated(self, rng: random.Random) -> bytes:
        events, top = self.events, self.top
        for _ in range(rng.randint(1, 3)):
            pick = rng.randrange(10)
            if pick < 7:
                events = mutate_events(rng, events)
            elif pick < 9 and not self.array:
                top = mutate_top(rng, top)
            else:
                events = [e for e in events if rng.random() < 0.5]  # drop half
        # an unchanged seed event is the same object: its text is reused
        body = "[" + ",".join(self.texts[self.index[id(e)]] if id(e) in self.index else dumps(e) for e in events) + "]"
        if self.array:
            return body.encode()
        parts = [
            f"{json.dumps(k)}:{body if k == 'traceEvents' and v is self.top.get(k) else dumps(v)}"
            for k, v in top.items()
        ]
        if "traceEvents" not in top and rng.random() < 0.5:
            parts.append(f'"traceEvents":{body}')
        return ("{" + ",".join(parts) + "}").encode()


# ---------------------------------------------------------------- protobuf


def varint(value: int) -> bytes:
    value &= 2**64 - 1
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int] | None:
    value = shift = 0
    while pos < len(data) and shift < 70:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos
    return None


@dataclass
class Field:
    """One protobuf field; ``value`` is an int (varint), bytes, or a list of Fields (a parsed submessage)."""

    num: int
    wire: int
    value: Any
    tag_wire: int | None = None  # a wire type written in the tag that is not the value's
    length_lie: int = 0  # added to a length prefix
    raw: bytes | None = None  # a varint's encoding as written (overlong, unterminated)


def parse_message(data: bytes, depth: int = 0) -> list[Field] | None:
    """Fields of ``data`` when it parses completely as a message, else None (a string or bytes)."""
    fields, pos = [], 0
    while pos < len(data):
        key = _read_varint(data, pos)
        if key is None or key[0] >> 3 == 0:
            return None
        (tag, pos), wire = key, key[0] & 7
        if wire == 0:
            got = _read_varint(data, pos)
            if got is None:
                return None
            value, pos = got
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(data):
                return None
            value, pos = data[pos : pos + width], pos + width
        elif wire == 2:
            got = _read_varint(data, pos)
            if got is None or got[1] + got[0] > len(data):
                return None
            length, pos = got
            value, pos = data[pos : pos + length], pos + length
            sub = parse_message(value, depth + 1) if value and depth < 12 else None
            value = sub if sub is not None else value
        else:
            return None
        fields.append(Field(tag >> 3, wire, value))
    return fields


def serialize(fields: list[Field]) -> bytes:
    out = bytearray()
    for f in fields:
        out += varint(f.num << 3 | (f.wire if f.tag_wire is None else f.tag_wire))
        if f.raw is not None:
            out += f.raw
        elif f.wire == 0:
            out += varint(f.value)
        elif f.wire in (1, 5):
            out += f.value
        else:
            body = serialize(f.value) if isinstance(f.value, list) else f.value
            out += varint(max(0, len(body) + f.length_lie)) + body
    return bytes(out)


def _all_fields(fields: list[Field], out: list[tuple[list[Field], int]]) -> list[tuple[list[Field], int]]:
    for i, f in enumerate(fields):
        out.append((fields, i))
        if isinstance(f.value, list):
            _all_fields(f.value, out)
    return out


VARINTS = (0, 1, 2, 127, 128, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**53, 2**63 - 1, 2**63, 2**64 - 1, 2**64 - 2)


def mutate_field(rng: random.Random, fields: list[Field]) -> None:
    """One change at a random field of a parsed packet (in place)."""
    sites = _all_fields(fields, [])
    if not sites:
        return
    parent, i = rng.choice(sites)
    f = parent[i]
    pick = rng.randrange(10)
    if pick == 0 and f.wire == 0:
        f.value = (
            rng.choice(VARINTS)
            if rng.random() < 0.7
            else rng.choice((f.value + 1, f.value - 1, f.value * 1000, rng.getrandbits(64)))
        )
    elif pick == 1 and f.wire == 0:  # overlong (up to 10 bytes is legal) or unterminated
        enc = bytearray(varint(f.value))
        enc[-1] |= 0x80
        f.raw = bytes(enc) + b"\x80" * rng.randint(0, 12) + (b"\x00" if rng.random() < 0.7 else b"")
    elif pick == 2 and f.wire == 2:
        f.length_lie = rng.choice((-3, -1, 1, 2, 7, 1000, 2**31, 2**40))
    elif pick == 3:
        f.tag_wire = rng.choice([w for w in (0, 1, 2, 3, 4, 5, 6, 7) if w != f.wire])
    elif pick == 4:
        del parent[i]
    elif pick == 5:
        parent.insert(rng.randrange(len(parent) + 1), Field(f.num, f.wire, f.value))
    elif pick == 6:
        f.num = rng.choice((1, 2, 3, 8, 9, 10, 11, 12, 15, 16, 23, 24, 36, 41, 43, 44, 2**29 - 1, rng.randint(1, 200)))
    elif pick == 7 and f.wire == 2 and not isinstance(f.value, list):
        f.value = rng.choice(
            (b"", b"\xff\xfe", b"\xc0\x80", "\ud800".encode("utf-8", "surrogatepass"), b"x" * 70_000, b"\x00")
        )
    elif pick == 8:  # move the field under another message
        targets = [s for s in sites if isinstance(s[0][s[1]].value, list)]
        if targets:
            p2, j = rng.choice(targets)
            p2[j].value.append(copy.deepcopy(f))  # a copy: the target may lie inside f
    else:
        f.value = 0 if f.wire == 0 else (b"\x00" * (8 if f.wire == 1 else 4) if f.wire in (1, 5) else b"")


def split_packets(data: bytes) -> list[bytes]:
    """The length-delimited fields of a Trace (each with its tag and length), in order."""
    out, pos = [], 0
    while pos < len(data):
        key = _read_varint(data, pos)
        got = _read_varint(data, key[1]) if key and key[0] & 7 == 2 else None
        if got is None or got[1] + got[0] > len(data):
            out.append(data[pos:])
            break
        out.append(data[pos : got[1] + got[0]])
        pos = got[1] + got[0]
    return out


def mutate_protobuf(rng: random.Random, packets: list[bytes]) -> bytes:
    """A Perfetto trace from ``packets`` with a few packets changed, duplicated, dropped or reordered."""
    packets = list(packets)
    for _ in range(rng.randint(1, 4)):
        if not packets:
            break
        pick, i = rng.randrange(10), rng.randrange(len(packets))
        if pick == 0:
            packets.insert(rng.randrange(len(packets) + 1), packets[i])
        elif pick == 1:
            del packets[i]
        elif pick == 2:
            j = rng.randrange(len(packets))
            packets[i], packets[j] = packets[j], packets[i]
        else:
            tree = parse_message(packets[i])
            if tree is None:
                packets[i] = mutate_bytes(rng, packets[i])
                continue
            for _ in range(rng.randint(1, 3)):
                mutate_field(rng, tree)
            packets[i] = serialize(tree)
    return b"".join(packets)
