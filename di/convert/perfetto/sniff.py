"""Recognising a Perfetto protobuf trace from its first bytes (no heavy imports).

A trace is a ``Trace`` message: field 1 (TracePacket, length-delimited, tag
byte 0x0A), a varint length, then the packet, whose first byte is again a
field tag (wire type 0, 1, 2 or 5, field number >= 1).
"""

from __future__ import annotations


def looks_like_perfetto(head: bytes) -> bool:
    """True when ``head`` (the file's first bytes, gunzipped) starts like a Perfetto protobuf trace."""
    if len(head) < 3 or head[0] != 0x0A:
        return False
    pos, length, shift = 1, 0, 0
    while pos < len(head) and pos < 11:
        b = head[pos]
        pos += 1
        length |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    else:
        return False
    if length < 2 or pos >= len(head):
        return False
    key = head[pos]
    return key & 7 in (0, 1, 2, 5) and key >> 3 >= 1


def first_field_ok(head: bytes) -> bool:
    """False when ``head`` (the file's first bytes, gunzipped) cannot start a protobuf
    message: its first key is no varint, names field 0, or has a wire type a
    reader cannot skip (3, 4, 6, 7). True for an empty head (an empty trace)."""
    key, shift = 0, 0
    for b in head[:10]:
        key |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return key >> 3 >= 1 and key & 7 in (0, 1, 2, 5)
    return not head
