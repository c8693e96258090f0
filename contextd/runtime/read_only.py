"""An index whose folder is read-only (a read-only mount, a snapshot), opened to answer.

No process can own such an index: the owner lock, DuckDB's write-ahead log and the side files
all live in its folder. DuckDB still opens the file read-only, so a command that only reads
(``query``, ``stats``) answers from the index as it is, in its own process, instead of
stopping at the lock; nothing is indexed or recorded. Commands that write end in the one line
:mod:`contextd.store.disk_faults` gives them.
"""

from __future__ import annotations

import errno
import logging

from typing import TYPE_CHECKING

from contextd.config.project import Project

if TYPE_CHECKING:
    from contextd.runtime.engine import Engine

log = logging.getLogger(__name__)


def in_read_only_folder(exc: BaseException, project: Project) -> bool:
    """Whether ``exc`` (raised while taking the owner lock) says the index's folder is
    read-only, for an index DuckDB could open read-only (a DuckDB file that exists)."""
    return (isinstance(exc, OSError) and exc.errno == errno.EROFS
            and project.config.storage.backend == "duckdb" and project.db_path.is_file())


def open_read_only(project: Project) -> "Engine":
    """The project's index opened read-only in this process."""
    # Imported here: every query command imports this module, and one that reaches a running
    # owner needs neither the engine stack nor DuckDB (0.8-3 s of imports on a loaded machine).
    from contextd.runtime.engine import Engine
    from contextd.store.duckdb import DuckDBStore

    log.warning("the index folder %s is read-only: answering from the index as it is "
                "(nothing is indexed or recorded)", project.db_path.parent)
    return Engine(project, store=DuckDBStore(project.db_path, read_only=True))


def is_read_only(engine: object) -> bool:
    """Whether ``engine`` is one :func:`open_read_only` opened (a connection to an owner has
    no store of its own)."""
    return bool(getattr(getattr(engine, "store", None), "read_only", False))
