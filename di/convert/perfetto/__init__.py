"""Perfetto's native protobuf trace format (TrackEvent): writer, reader, sniffing.

:mod:`.writer` writes the canonical trace with numba kernels that encode the
packets directly (:mod:`.encode`); :mod:`.reader` reads traces di wrote and
slices, counters and flows of other TrackEvent producers (:mod:`.decode`: the
packet loop, over :mod:`.packets`, :mod:`.interned` and :mod:`.trackevent`, with
the row layouts of :mod:`.slots`).
"""
