"""Where and how di writes: an output is claimed only when di wrote it, and swapped in whole.

The rules every writer of di follows (DESIGN.md, "Writing"):

* **Claim.** :func:`claim` refuses an output path that exists and is not what
  di wrote for that output (each format says how it recognises its own
  files). ``force`` lets di replace a *file* it did not write; a directory
  (a ``.di`` store, an OTF2 archive folder, a CSV folder) is replaced only
  when di wrote it or it is empty, whatever ``force`` says. The current
  directory, its parents, the inputs and their parents are never outputs.
* **Stage, then swap.** Bytes go to a hidden sibling of the target
  (``.NAME.di-tmp.HOST.PID``) which replaces the target in one rename at
  the end (:func:`atomic_write` for a file, :func:`atomic_dir` for a
  directory; a directory swap is Linux's ``renameat2(RENAME_EXCHANGE)``,
  so at every instant the old or the new output is there, complete).
  An output of several sibling parts (an OTF2 archive: ``NAME.otf2``,
  ``NAME.def``, ``NAME/``) is moved part by part under a journal
  (:func:`replace_parts`): a run killed between two moves leaves the
  journal, and the next di that touches the archive finishes the moves
  (:func:`finish_swap`).
* **Leftovers.** Temporaries of a run that was killed are recognised by
  their name (host and pid of a process that no longer runs) and removed by
  the next writer of the same target (:func:`clean_leftovers`), which says
  so through the ``di`` logger.

New files and folders get the modes that the umask gives, as ``open`` and
``mkdir`` would.
"""

from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import shutil
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from di.errors import OutputError

__all__ = [
    "claim",
    "atomic_write",
    "atomic_dir",
    "make_parent",
    "replace_parts",
    "finish_swap",
    "clean_leftovers",
    "swap_dir",
]

log = logging.getLogger("di")
log.addHandler(logging.NullHandler())  # a library says, the application (di's CLI) decides where it goes

TMP_TAG = "di-tmp"
"""Staged outputs are named ``.NAME.di-tmp.HOST.PID``."""
OLD_TAG = "di-old"
"""An old output moved aside (only where the atomic exchange is unavailable): ``.NAME.di-old.HOST.PID``."""
JOURNAL_TAG = "di-swap"
"""Journal of a part-by-part replacement: ``.NAME.di-swap`` beside the last part."""
RENAME_EXCHANGE = 2
"""``renameat2`` flag (linux/fs.h): swap two paths atomically."""
AT_FDCWD = -100
"""``renameat2`` directory descriptor meaning "relative to the current directory" (linux/fcntl.h)."""

_HOST = socket.gethostname().replace(".", "_")


def claim(
    path: str | os.PathLike[str],
    *,
    ours: Callable[[Path], bool] | None,
    force: bool = False,
    inputs: Iterable[str | os.PathLike[str]] = (),
    what: str = "an output",
    whole: bool = False,
) -> Path:
    """Check that di may write ``path``; returns it as a Path.

    Args:
        path: the output.
        ours: tells whether an existing ``path`` was written by di for this kind
            of output (None: nothing existing is recognised).
        force: replace an existing *file* that di did not write.
        inputs: the command's inputs; none of them, nor a folder holding one,
            may be the output.
        what: the output's kind with its article, for the message ("a trace store").
        whole: the output is a folder or a set of parts (an OTF2 archive), which
            ``force`` never replaces.

    Raises:
        OutputError: the path is the current directory, a parent of it or of an
            input, an input itself, or exists and is not di's (see the module doc).
    """
    target = Path(path)
    here = _resolved(target)
    cwd = Path.cwd().resolve()
    if here == cwd or here in cwd.parents or here == Path(here.anchor):
        raise OutputError(target, "is the current directory or one of its parents; choose another output path")
    for item in inputs:
        src = _resolved(Path(item))
        if here == src:
            raise OutputError(target, "is an input of this command; choose another output path")
        if here in src.parents:
            raise OutputError(target, f"holds the input {item}; choose another output path")
    if not os.path.lexists(target):
        return target
    if ours is not None and _owned(target, ours):
        return target
    if (target.is_dir() and not target.is_symlink()) or whole:
        if target.is_dir() and not any(target.iterdir()):
            return target
        raise OutputError(
            target,
            f"exists and is not {what} that di wrote; di replaces only its own "
            f"{'folders' if target.is_dir() else 'archives'} (not even with --force): choose another output path",
        )
    if force:
        return target
    raise OutputError(
        target, f"exists and is not {what} that di wrote; choose another output path, or pass --force to replace it"
    )


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _owned(path: Path, ours: Callable[[Path], bool]) -> bool:
    try:
        return bool(ours(path))
    except (OSError, ValueError, UnicodeDecodeError):
        return False


def file_starts_with(*marks: bytes, within: int = 4096) -> Callable[[Path], bool]:
    """A test for :func:`claim`: the file's first ``within`` bytes hold one of ``marks``."""

    def test(path: Path) -> bool:
        if not path.is_file():
            return False
        with open(path, "rb") as fh:
            head = fh.read(within)
        return any(m in head for m in marks)

    return test


@contextmanager
def atomic_write(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write; it replaces ``path`` when the block ends without an exception.

    The bytes go to a hidden sibling (created with the parents of ``path``),
    are flushed to disk and renamed into place at the end, or removed when the
    block raises. A full disk or a failing write raises ``OSError`` here, never
    later, and leaves the old ``path`` as it was.
    """
    target = Path(path)
    make_parent(target)
    clean_leftovers(target)
    tmp = staged_name(target)
    try:
        with open(tmp, "xb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_dir(path: str | os.PathLike[str], *, keep: Sequence[str] = ()) -> Iterator[Path]:
    """A fresh folder to fill; it replaces the folder ``path`` when the block ends without an exception.

    Args:
        path: the folder to write (created with its parents, or replaced whole).
        keep: names of entries of an existing ``path`` that the new folder
            keeps (a recording's ``raw/``): hard-linked into the staged folder
            before the block runs (copied where links are impossible), so they
            are never out of sight.
    """
    target = Path(path)
    make_parent(target)
    clean_leftovers(target)
    tmp = staged_name(target)
    tmp.mkdir()
    try:
        for name in keep:
            if os.path.lexists(target / name):
                _link_tree(target / name, tmp / name)
        yield tmp
        swap_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def make_parent(target: Path) -> None:
    """Create the folders above ``target``.

    Raises:
        NotADirectoryError: a path above ``target`` is a file (named in the error).
        OSError: the file system refused.
    """
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        blocking = next(
            (p for p in (target.parent, *target.parent.parents) if p.exists() and not p.is_dir()), target.parent
        )
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(blocking)) from None


def staged_name(target: Path, tag: str = TMP_TAG) -> Path:
    """The hidden sibling that stages (or keeps aside) ``target`` for this process."""
    return target.with_name(f".{target.name}.{tag}.{_HOST}.{os.getpid()}")


def swap_dir(new: Path, target: Path) -> None:
    """Put the folder ``new`` in the place of ``target`` (which may not exist) and remove the old one.

    With ``renameat2(RENAME_EXCHANGE)`` the two are exchanged in one step; where
    the file system lacks it, the old folder is first moved aside under a name
    :func:`clean_leftovers` restores if the run dies before the new one is in place.
    """
    if not os.path.lexists(target):
        os.rename(new, target)
        return
    if _exchange(new, target):
        shutil.rmtree(new, ignore_errors=True)
        return
    aside = staged_name(target, OLD_TAG)
    os.rename(target, aside)
    os.rename(new, target)
    shutil.rmtree(aside, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically; False where the kernel or file system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(b))


def _link_tree(src: Path, dst: Path) -> None:
    if src.is_dir() and not src.is_symlink():
        dst.mkdir()
        for child in src.iterdir():
            _link_tree(child, dst / child.name)
        return
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def replace_parts(staged: Path, parent: Path, names: Sequence[str]) -> None:
    """Move ``staged/NAME`` over ``parent/NAME`` for each of ``names``, in order, under a journal.

    The last name is the one readers open first (an OTF2 anchor), so it moves
    last. A name the staged output lacks (an OTF2 archive without markers) is
    removed from ``parent``. Old parts go into ``staged/.old`` and are removed
    with ``staged``.
    """
    present = [n for n in names if os.path.lexists(staged / n)]
    drop = [n for n in names if n not in present]
    journal = _journal(parent / names[-1])
    _write_json(journal, {"staged": staged.name, "names": present, "drop": drop})
    _move_parts(staged, parent, present, drop)
    shutil.rmtree(staged, ignore_errors=True)
    journal.unlink(missing_ok=True)


def finish_swap(last_part: Path) -> bool:
    """Finish a part-by-part replacement of :func:`replace_parts` that a killed run left; True if one was finished.

    Raises:
        OutputError: the journal is unreadable or names parts that are gone.
    """
    journal = _journal(last_part)
    if not journal.exists():
        return False
    try:
        doc = json.loads(journal.read_text())
        staged, names = last_part.parent / doc["staged"], [str(n) for n in doc["names"]]
        drop = [str(n) for n in doc.get("drop", [])]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OutputError(
            journal, f"unreadable journal of an interrupted write ({exc}); remove it and write the output again"
        ) from None
    if staged.is_dir():
        _move_parts(staged, last_part.parent, names, drop)
        shutil.rmtree(staged, ignore_errors=True)
    journal.unlink(missing_ok=True)
    log.warning("%s: finished replacing it, which a killed di had left half done", last_part)
    return True


def _journal(last_part: Path) -> Path:
    return last_part.with_name(f".{last_part.name}.{JOURNAL_TAG}")


def _move_parts(staged: Path, parent: Path, names: Sequence[str], drop: Sequence[str] = ()) -> None:
    """Idempotent: each step looks at what is where, so a rerun after a kill completes the moves."""
    old = staged / ".old"
    old.mkdir(exist_ok=True)
    for name in drop:
        if os.path.lexists(parent / name) and not os.path.lexists(old / name):
            os.rename(parent / name, old / name)
    for name in names:
        new, dst = staged / name, parent / name
        if not os.path.lexists(new):
            continue
        if os.path.lexists(dst):
            if os.path.lexists(old / name):
                raise OutputError(dst, "appeared while di was replacing it; write the output again")
            os.rename(dst, old / name)
        os.rename(new, dst)


def _write_json(path: Path, doc: dict[str, object]) -> None:
    tmp = staged_name(path)
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def clean_leftovers(target: Path) -> list[Path]:
    """Remove what killed runs of this host left beside ``target``; returns the removed paths.

    A staged output (``.NAME.di-tmp.HOST.PID``, or a journal's ``..NAME.di-swap.di-tmp.HOST.PID``) of a process
    that no longer runs is removed; an old output moved aside (``.NAME.di-old.HOST.PID``) is put
    back when ``target`` is missing, else removed; a journal is finished.
    """
    removed: list[Path] = []
    parent = target.parent
    if not parent.is_dir():
        return removed
    finish_swap(target)
    # the target's staged outputs, and those of its journal (a run killed while writing the journal leaves one)
    prefixes = (f".{target.name}.", f".{_journal(target).name}.")
    try:
        siblings = [(p, pre) for p in parent.iterdir() for pre in prefixes if p.name.startswith(pre)]
    except OSError:
        return removed
    for p, prefix in siblings:
        tag, host, pid = _parse_leftover(p.name[len(prefix) :])
        if tag is None or host != _HOST or _alive(pid):
            continue
        if tag == OLD_TAG and not os.path.lexists(target):
            os.rename(p, target)
            log.warning("%s: put back the previous output, which a killed di had moved aside", target)
            continue
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)
        removed.append(p)
    if removed:
        log.warning(
            "%s: removed %d leftover temporar%s of a killed di run",
            target,
            len(removed),
            "y" if len(removed) == 1 else "ies",
        )
    return removed


def _parse_leftover(rest: str) -> tuple[str | None, str, int]:
    parts = rest.split(".")
    if len(parts) != 3 or parts[0] not in (TMP_TAG, OLD_TAG) or not parts[2].isdigit():
        return None, "", 0
    return parts[0], parts[1], int(parts[2])


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
