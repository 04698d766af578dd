"""Field numbers and enum values of Perfetto's trace protos that di reads and writes.

From perfetto/protos/perfetto/trace/: trace.proto, trace_packet.proto,
track_event/track_event.proto, track_event/track_descriptor.proto,
track_event/process_descriptor.proto, track_event/thread_descriptor.proto,
track_event/counter_descriptor.proto, track_event/debug_annotation.proto,
interned_data/interned_data.proto (checked against the descriptors that
the ``perfetto`` Python package ships).
"""

from __future__ import annotations

# Trace
TRACE_PACKET = 1

# TracePacket
PACKET_TIMESTAMP = 8
PACKET_SEQUENCE_ID = 10  # trusted_packet_sequence_id
PACKET_TRACK_EVENT = 11
PACKET_INTERNED_DATA = 12
PACKET_SEQUENCE_FLAGS = 13
PACKET_INCREMENTAL_STATE_CLEARED = 41
PACKET_TIMESTAMP_CLOCK_ID = 58
PACKET_DEFAULTS = 59
PACKET_TRACK_DESCRIPTOR = 60
PACKET_PROCESS_DESCRIPTOR = 43  # deprecated: a sequence's process, before TrackDescriptors
PACKET_THREAD_DESCRIPTOR = 44  # deprecated: a sequence's thread; its events without a track uuid go there
PACKET_DI_TRACE = 1864
"""di's own metadata (locations, series, flow attributes, meta.json) as JSON text.
An unregistered number in TracePacket's extension range 1000-1999; Perfetto's
trace processor skips fields it does not know."""

SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2

# TracePacketDefaults / TrackEventDefaults
DEFAULTS_TRACK_EVENT = 11
EVENT_DEFAULTS_TRACK_UUID = 11

# TrackEvent
EVENT_TYPE = 9
EVENT_TRACK_UUID = 11
EVENT_NAME_IID = 10
EVENT_NAME = 23
EVENT_CATEGORY_IIDS = 3
EVENT_CATEGORIES = 22
EVENT_DEBUG_ANNOTATIONS = 4
EVENT_COUNTER_VALUE = 30
EVENT_DOUBLE_COUNTER_VALUE = 44
EVENT_FLOW_IDS_OLD = 36
EVENT_FLOW_IDS = 47
EVENT_TERMINATING_FLOW_IDS_OLD = 42
EVENT_TERMINATING_FLOW_IDS = 48
EVENT_CORRELATION_ID = 52
EVENT_TIMESTAMP_DELTA_US = 1
EVENT_TIMESTAMP_ABSOLUTE_US = 16

TYPE_SLICE_BEGIN, TYPE_SLICE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4

# TrackDescriptor
TRACK_UUID = 1
TRACK_NAME = 2
TRACK_PROCESS = 3
TRACK_THREAD = 4
TRACK_PARENT_UUID = 5
TRACK_COUNTER = 8
TRACK_STATIC_NAME = 10
TRACK_DESCRIPTION = 14

# ProcessDescriptor
PROCESS_PID = 1
PROCESS_NAME = 6

# ThreadDescriptor
THREAD_PID = 1
THREAD_TID = 2
THREAD_NAME = 5

# CounterDescriptor
COUNTER_UNIT = 3
COUNTER_UNIT_NAME = 6
COUNTER_UNIT_MULTIPLIER = 4
COUNTER_IS_INCREMENTAL = 5
UNIT_TIME_NS, UNIT_COUNT, UNIT_SIZE_BYTES = 1, 2, 3
UNIT_NAMES = {UNIT_TIME_NS: "ns", UNIT_COUNT: "count", UNIT_SIZE_BYTES: "bytes"}
"""CounterDescriptor.Unit values -> di unit text."""

# InternedData and its entries (EventName, EventCategory, DebugAnnotationName: iid = 1, name = 2)
INTERNED_EVENT_CATEGORIES = 1
INTERNED_EVENT_NAMES = 2
INTERNED_ANNOTATION_NAMES = 3
INTERNED_ANNOTATION_STRINGS = 29
INTERNED_IID = 1
INTERNED_NAME = 2
INTERNED_STRING = 2  # InternedString.str (bytes)

# DebugAnnotation
ANNOTATION_NAME_IID = 1
ANNOTATION_NAME = 10
ANNOTATION_BOOL = 2
ANNOTATION_UINT = 3
ANNOTATION_INT = 4
ANNOTATION_DOUBLE = 5
ANNOTATION_STRING = 6
ANNOTATION_POINTER = 7
ANNOTATION_NESTED = 8
ANNOTATION_LEGACY_JSON = 9
ANNOTATION_DICT_ENTRIES = 11
ANNOTATION_ARRAY_VALUES = 12
ANNOTATION_STRING_IID = 17

# Clocks: TracePacket.clock_snapshot, ClockSnapshot, ClockSnapshot.Clock, TracePacketDefaults.timestamp_clock_id
PACKET_CLOCK_SNAPSHOT = 6
DEFAULTS_TIMESTAMP_CLOCK_ID = 58
SNAPSHOT_CLOCKS = 1
SNAPSHOT_PRIMARY_CLOCK = 2
CLOCK_ID = 1
CLOCK_TIMESTAMP = 2
CLOCK_IS_INCREMENTAL = 3
CLOCK_UNIT_MULTIPLIER_NS = 4
CLOCK_BOOTTIME = 6
"""The trace clock unless a snapshot names another primary clock."""
FIRST_SEQUENCE_CLOCK = 64
"""Clock ids 64-127 are scoped to their packet sequence."""
