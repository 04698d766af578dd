"""Which connector reads or writes a path: sniffing, expansion and merging.

Detection: magic bytes first (a ``.di`` directory's meta.json, gzip, a JSON
``{``/``[``, a protobuf TracePacket), then the extension. "file not found", "no connector
recognised this" and "connector failed" are three different errors; the
last two list the connectors installed.

Expansion and merging (:func:`expand`, :func:`rank_hint`, :func:`load_paths`) are
:mod:`di.convert.loading`'s, re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# ``import X as X``: names of this module before loading moved to di.convert.loading
from di.convert.loading import RANK_IN_NAME as RANK_IN_NAME
from di.convert.loading import expand as expand
from di.convert.loading import load_paths as load_paths
from di.convert.loading import rank_hint as rank_hint
from di.errors import UnknownFormatError
from di.trace import Trace


@dataclass(frozen=True)
class Connector:
    """A format di reads and/or writes.

    Attributes:
        name: short format name (``--to`` value).
        extensions: file name endings it writes and recognises, longest first.
        sniff: True when a file's first bytes (gunzipped) are this format.
        read: path, rank, rank_source, source index -> Trace (None: write-only); the
            built-in connectors also take ``max_input_bytes`` (:mod:`di.inputsize`).
        write: (trace, path) -> None (None: read-only).
        ours: path -> True when an existing output at ``path`` was written by di in
            this format, so it may be replaced (None: an existing output is
            replaced only with ``force``, and only when it is a file).
        whole: its output is a folder or a set of parts, which ``force`` never replaces.
        link: merged job trace -> trace, run after merging when it read two or more of the
            files (matching that needs every rank, such as nsys's MPI messages); None: nothing.
    """

    name: str
    extensions: tuple[str, ...]
    sniff: Callable[[Path, bytes], bool]
    read: Callable[..., Trace] | None
    write: Callable[[Trace, Path], None] | None
    ours: Callable[[Path], bool] | None = None
    whole: bool = False
    link: Callable[[Trace], Trace] | None = None


def _sniff_json(path: Path, head: bytes) -> bool:
    return head.lstrip(b" \t\r\n\xef\xbb\xbf")[:1] in (b"{", b"[")


def _read_chrome(path: Path, **kw: Any) -> Trace:
    from di.convert.chrome.reader import read_chrome

    return read_chrome(path, **kw)


def _write_chrome(trace: Trace, path: Path) -> None:
    from di.convert.chrome.writer import write_chrome

    write_chrome(trace, path)


def _own_chrome(path: Path) -> bool:
    from di.convert.chrome.writer import is_own_file

    return is_own_file(path)


def _sniff_perfetto(path: Path, head: bytes) -> bool:
    from di.convert.perfetto.sniff import looks_like_perfetto

    return looks_like_perfetto(head)


def _read_perfetto(path: Path, **kw: Any) -> Trace:
    from di.convert.perfetto.reader import read_perfetto

    return read_perfetto(path, **kw)


def _write_perfetto(trace: Trace, path: Path) -> None:
    from di.convert.perfetto.writer import write_perfetto

    write_perfetto(trace, path)


def _own_perfetto(path: Path) -> bool:
    from di.convert.perfetto.writer import is_own_file

    return is_own_file(path)


def _read_store(path: Path, **kw: Any) -> Trace:
    from di.store import read_store

    return read_store(path, max_input_bytes=kw.get("max_input_bytes"))


def _write_store(trace: Trace, path: Path) -> None:
    from di.store import write_store

    write_store(trace, path)


def _own_store(path: Path) -> bool:
    from di.store import is_own_folder

    return is_own_folder(path)


def _sniff_otf2(path: Path, head: bytes) -> bool:
    return head[2:6] == b"OTF2"


def _read_otf2(path: Path, **kw: Any) -> Trace:
    from di.convert.otf2.reader import read_otf2

    return read_otf2(path, **kw)


def _write_otf2(trace: Trace, path: Path) -> None:
    from di.convert.otf2.writer import write_otf2

    write_otf2(trace, path)


def _own_otf2(path: Path) -> bool:
    """The anchor file of an archive di wrote, or a folder holding only such an archive's parts."""
    from di.convert.otf2.writer import anchor_for, is_own_archive

    anchor = anchor_for(path)
    if not anchor.is_file() or not is_own_archive(anchor):
        return False
    if path.is_dir():
        parts = {anchor.name, anchor.stem + ".def", anchor.stem + ".marker", anchor.stem}
        return all(p.name in parts or p.name.startswith(".") for p in path.iterdir())
    return True


def _sniff_nsys(path: Path, head: bytes) -> bool:
    return head.startswith(b"SQLite format 3\x00")


def _read_nsys(path: Path, **kw: Any) -> Trace:
    from di.convert.nsys.export import read_report

    return read_report(path, **kw)


def _link_nsys(trace: Trace) -> Trace:
    from di.convert.nsys.mpi import link

    return link(trace)


def _sniff_log(path: Path, head: bytes) -> bool:
    from di.convert.logs.reader import is_log

    return is_log(path, head)


def _read_log(path: Path, **kw: Any) -> Trace:
    from di.convert.logs.reader import read_log

    return read_log(path, **kw)


def _sniff_darshan(path: Path, head: bytes) -> bool:
    from di.convert.logs.darshan import is_darshan

    return is_darshan(head)


def _read_darshan(path: Path, **kw: Any) -> Trace:
    from di.convert.logs.darshan import read_darshan

    return read_darshan(path, **kw)


CONNECTORS: tuple[Connector, ...] = (
    Connector("di", (".di",), lambda p, h: False, _read_store, _write_store, _own_store, whole=True),
    # before chrome: a log line may start with "[rank0]:" or be JSON Lines; .txt, .csv, .jsonl only when sniffed
    Connector("log", (".log.gz", ".log", ".out", ".err"), _sniff_log, _read_log, None),
    Connector("darshan", (".darshan",), _sniff_darshan, _read_darshan, None),
    Connector("chrome", (".json.gz", ".json"), _sniff_json, _read_chrome, _write_chrome, _own_chrome),
    Connector("otf2", (".otf2",), _sniff_otf2, _read_otf2, _write_otf2, _own_otf2, whole=True),
    Connector(
        "perfetto", (".perfetto-trace", ".pftrace"), _sniff_perfetto, _read_perfetto, _write_perfetto, _own_perfetto
    ),
    Connector("nsys", (".nsys-rep", ".qdrep", ".sqlite"), _sniff_nsys, _read_nsys, None, link=_link_nsys),
)


def connectors() -> tuple[Connector, ...]:
    """The built-in connectors, then those of ``di.connectors`` plugins that loaded (see :mod:`di.plugins`)."""
    from di.plugins import load_group

    return CONNECTORS + tuple(p.obj for p in load_group("di.connectors").ok)


def installed() -> str:
    """One line naming the connectors and their extensions."""
    return ", ".join(f"{c.name} ({' '.join(c.extensions)})" for c in connectors())


SNIFF_BYTES = 4096
"""Bytes (gunzipped) a connector's ``sniff`` sees; at most 1 MiB of a gzip file is read for them."""


def _head(path: Path) -> bytes:
    from di.convert import gunzip

    return gunzip.head(path, SNIFF_BYTES)


def connector_for(path: Path) -> Connector:
    """The connector that reads ``path``.

    Raises:
        FileNotFoundError: nothing at ``path``.
        UnknownFormatError: no connector recognised it.
    """
    from di.store import is_store

    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.is_dir():
        if is_store(path):
            return CONNECTORS[0]
        if any(_sniff_otf2(p, _head(p)) for p in path.glob("*.otf2") if p.is_file()):
            return next(c for c in CONNECTORS if c.name == "otf2")
        raise UnknownFormatError(f"{path}: a directory that is not a di store (no meta.json); installed: {installed()}")
    head = _head(path)
    for c in connectors():
        if c.read and c.sniff(path, head):
            return c
    for c in connectors():
        if c.read and any(path.name.endswith(ext) for ext in c.extensions):
            return c
    raise UnknownFormatError(f"{path}: no connector recognised this file; installed: {installed()}")


def writer_for(path: Path, to: str | None = None) -> Connector:
    """The connector that writes ``path`` (by ``to`` or the extension)."""
    for c in connectors():
        if c.write and (c.name == to if to else any(str(path).endswith(ext) for ext in c.extensions)):
            return c
    what = f"format {to!r}" if to else f"the extension of {path}"
    raise UnknownFormatError(f"no connector writes {what}; installed: {installed()}")


OUTPUT_KINDS = {
    "di": "a trace store",
    "chrome": "a Chrome JSON trace",
    "otf2": "an OTF2 archive",
    "perfetto": "a Perfetto trace",
}
"""How an output of each built-in format is named in a refusal."""


def claim_output(path: Any, *, to: str | None = None, force: bool = False, inputs: Iterable[Any] = ()) -> Connector:
    """The writer of ``path``, after :func:`di.output.claim` allowed the path.

    Raises:
        UnknownFormatError: no connector writes it.
        OutputError: the path may not be written (see :func:`di.output.claim`).
    """
    from di.output import claim

    target = Path(path)
    writer = writer_for(target, to)
    claim(
        target,
        ours=writer.ours,
        force=force,
        inputs=inputs,
        what=OUTPUT_KINDS.get(writer.name, f"a {writer.name} output"),
        whole=writer.whole,
    )
    return writer


def save_path(
    trace: Trace, path: Any, *, to: str | None = None, force: bool = False, inputs: Iterable[Any] = ()
) -> None:
    """Write ``trace`` with the connector chosen by ``to`` or the extension.

    The output is claimed first (:func:`claim_output`): an existing path is
    replaced only when di wrote it in this format (``force``: or when it is a
    file), and never when it is the current directory, one of ``inputs`` or the
    trace's sources, or a folder holding one.

    Raises:
        OutputError: the path may not be written.
        OSError: the file system refused.
    """
    sources = [
        s["path"] for s in trace.meta.get("sources", []) if isinstance(s, dict) and isinstance(s.get("path"), str)
    ]
    writer = claim_output(path, to=to, force=force, inputs=[*inputs, *sources])
    writer.write(trace, Path(path))  # type: ignore[misc]
