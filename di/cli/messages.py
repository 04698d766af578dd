"""The lines every command prints besides its output: warnings and notes (:func:`_say`), and the logging
handler that makes what the library says through the ``di`` logger a note line on stderr (:func:`_notes`).
"""

from __future__ import annotations

from typing import Any


def _say(console: Any, texts: Any, kind: str = "warning") -> None:
    """Every command's warnings and notes: one line each, the text as it is (no rich markup)."""
    from rich.markup import escape

    for text in texts:
        console.print(f"[yellow]{kind}:[/yellow] {escape(str(text))}", soft_wrap=True)


def _notes(err: Any, command: str) -> Any:
    """A logging handler: what the library says through the ``di`` logger becomes one note line on stderr."""
    import logging

    class Notes(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            err.print(f"di {command}: note: {record.getMessage()}", markup=False, soft_wrap=True)

    return Notes(logging.INFO)
