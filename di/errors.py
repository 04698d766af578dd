"""The one exception hierarchy of di.

Library code raises these; only the CLI turns them into exit codes and one-line
messages. Every message says what is wrong, where (file, byte or event index)
and, where it can, how to fix it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DIError",
    "FormatError",
    "InputTooLargeError",
    "UnknownFormatError",
    "SchemaVersionError",
    "SchemaError",
    "MissingDependencyError",
    "OutputError",
    "DataLossWarning",
]


class DIError(Exception):
    """Base class of every error di raises on purpose."""


class FormatError(DIError):
    """A file was recognised but its content is broken or unsupported."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:  # pickled as built: a --jobs worker's error reaches its parent
        return type(self), (self.path, self.problem)


class InputTooLargeError(FormatError):
    """An input decompresses (or a plain file reads) to more bytes than the input size limit.

    Attributes:
        limit_bytes: the limit that was passed, in bytes.
    """

    def __init__(self, path: object, problem: str, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        super().__init__(path, problem)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.problem, self.limit_bytes)


class UnknownFormatError(DIError):
    """No installed connector recognised the file (or the output extension)."""


class SchemaVersionError(DIError):
    """A store was written with a schema version this di cannot read."""


class SchemaError(DIError):
    """A trace does not match the canonical schema (a bug in a connector)."""


class MissingDependencyError(DIError):
    """An optional dependency needed for this operation is not installed."""


class OutputError(DIError):
    """An output path di must not write (not di's, an input, the current directory)
    or cannot write (its file system refused)."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:  # pickled as built: a --jobs worker's error reaches its parent
        return type(self), (self.path, self.problem)


class DataLossWarning(UserWarning):
    """A writer left out part of a trace that its format cannot hold (the message names what, with counts)."""
