"""Faults of the disk under an index, named in one line: no space left, a read-only folder.

They reach contextd from several places (a write of DuckDB's, which raises its own exception
classes with the operating system's text inside; the owner lock; the catalog's spool file)
and, left alone, ended a command in a 49-line traceback. :func:`disk_fault` recognises one
anywhere in an exception's chain and turns it into a :class:`~contextd.errors.StoreError`
that names the cause, the path and what to do; the CLI's error boundary prints it as its one
line. :func:`check_room` refuses a job that would drop rows before writing them again
(``rebuild``) when the disk cannot hold what it would write, so the index is not emptied
first and left empty when the disk fills.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path

from contextd.errors import StoreError

NO_SPACE, READ_ONLY = "no space", "read-only"
_BY_ERRNO = {errno.ENOSPC: NO_SPACE, errno.EDQUOT: NO_SPACE, errno.EROFS: READ_ONLY}
# The operating system's text for each, as DuckDB's exceptions quote it.
_BY_TEXT = {os.strerror(number): kind for number, kind in _BY_ERRNO.items()}
# The file a DuckDB message names: 'Could not write file "/x/context.duckdb.wal": ...'.
_QUOTED_PATH = re.compile(r'"(/[^"]+)"|\'(/[^\']+)\'')


def disk_fault(exc: BaseException, path: str | os.PathLike | None = None) -> StoreError | None:
    """The one-line error for a disk fault in ``exc`` or the exceptions it was raised from
    (``__cause__`` / ``__context__``), or None when there is none. ``path``: the file to
    name when the exception does not say which (the index)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = _fault_of(current)
        if found is not None:
            kind, named = found
            return StoreError(_message(kind, named or (str(path) if path else None)))
        current = current.__cause__ or current.__context__
    return None


def _fault_of(exc: BaseException) -> tuple[str, str | None] | None:
    if isinstance(exc, OSError) and exc.errno in _BY_ERRNO:
        return _BY_ERRNO[exc.errno], exc.filename
    text = str(exc)
    for reason, kind in _BY_TEXT.items():
        if reason in text:
            quoted = _QUOTED_PATH.search(text)
            return kind, (quoted.group(1) or quoted.group(2)) if quoted else None
    return None


def _message(kind: str, path: str | None) -> str:
    where = f" {path}" if path else ""
    if kind == NO_SPACE:
        return (f"no space left on the device to write{where}; free some space there (or "
                "point [storage] db_path at another disk) and run the command again: what "
                "the index had committed is kept")
    folder = f" {Path(path).parent}" if path else ""
    return (f"the folder{folder} is read-only (cannot write{where}): make it writable "
            "(remount it read-write), or, when it holds the index (its file and owner lock), "
            "point [storage] db_path at a writable folder")


def check_room(db_path: str | os.PathLike, needed: int, what: str) -> None:
    """Refuse ``what`` (a job that drops rows and writes them again) when the device of
    ``db_path`` has less than ``needed`` bytes free: the job would empty the index first and
    die with it empty."""
    folder = Path(db_path).parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:  # a folder that cannot be asked: the job's own writes will say why
        return
    if free < needed:
        raise StoreError(
            f"{what} refused: {_size(free)} free on the device of {folder}, and it needs "
            f"about {_size(needed)} (it drops the rows and writes them again); free some "
            "space there and run it again. The index is unchanged")


def _size(count: int) -> str:
    if count >= 2**20:
        return f"{count / 2**20:,.1f} MB"
    return f"{count / 2**10:,.0f} KB"
