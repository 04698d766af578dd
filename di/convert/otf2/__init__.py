"""OTF2 connector (Score-P archives in, archives for Vampir and the OTF2 tools out).

Reading: :func:`di.convert.otf2.reader.read_otf2`; writing:
:func:`di.convert.otf2.writer.write_otf2`. Both call the OTF2 C library that
the ``otf2`` wheel ships (:mod:`clib`) from numba code: event records are read
by ``cfunc`` callbacks (:mod:`eventcallbacks`) into numpy buffers (:mod:`records`)
and written from jitted loops (:mod:`emit`) after :mod:`layout` has planned the
definitions and records; the high-level ``otf2`` package reads the global
definitions only.
"""
