"""Connectors: one module (or package) per foreign format, both directions,
through the canonical trace. :mod:`di.convert.registry` finds the connector
for a file (magic bytes first, then extension)."""
