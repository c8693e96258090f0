"""Backups of the index: consistent online snapshots taken by the owner, and restore.

A snapshot is taken by the process that owns the database (:mod:`contextd.runtime.owner`), through
the store's own connection: ``ATTACH`` a new file and ``COPY FROM DATABASE`` into it. The copy
reads one MVCC snapshot, so it is consistent without holding the store's write lock: writers
go on committing while it runs (measured in ``benchmarks/bench_service.py --backup``; a
CHECKPOINT plus file copy would have to hold every writer for the whole copy).

Backups live in ``<db dir>/backups/`` as ``context-YYYYmmdd-HHMMSS.duckdb``; the newest
``storage.backup_keep`` are kept. A named backup (``--to``, the service's ``destination``) and
a restore's source are confined to that folder too (:func:`inside_backups`): the service
takes a destination from the network, and a path elsewhere would let a caller write a full
copy of the index anywhere the owner may write. ``restore`` refuses while any process owns the index
(the owner lock is taken for the duration), opens the backup and runs a query on it before
replacing the database, and keeps the replaced file beside it as ``*.before-restore``.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from contextd.errors import ContextdError, UsageError

log = logging.getLogger("contextd.runtime.backup")

BACKUP_DIR = "backups"
BACKUP_PREFIX = "context-"
BACKUP_SUFFIX = ".duckdb"


def backup_dir(project: Any) -> Path:
    """Where a project's backups go: beside its database."""
    return Path(project.db_path).resolve().parent / BACKUP_DIR


def list_backups(project: Any) -> list[Path]:
    """The project's backups, oldest first."""
    folder = backup_dir(project)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.name.startswith(BACKUP_PREFIX) and p.name.endswith(BACKUP_SUFFIX))


def inside_backups(project: Any, name: str) -> Path:
    """The file ``name`` names inside the backup folder: a name or relative path is taken
    from that folder, an absolute path must lie in it; ``..``, NUL bytes and paths that lead
    elsewhere (symbolic links included) are refused with the reason."""
    folder = backup_dir(project)
    if "\0" in name or not name.strip():
        raise UsageError(f"{name!r} is not a file name")
    given = Path(name).expanduser()
    if ".." in given.parts:
        raise UsageError(f"{name}: '..' is not allowed; backups are files of the "
                         f"backup folder {folder}")
    target = (given if given.is_absolute() else folder / given).resolve()
    if target == folder or not target.is_relative_to(folder):
        raise UsageError(f"{name} is outside the backup folder {folder}; backups are "
                         "written and restored only there")
    return target


def take_backup(project: Any, store: Any, destination: str | None = None) -> dict[str, Any]:
    """Snapshot ``store`` (open in this, the owner's, process) to ``destination`` (a new
    file of the backup folder) or a new dated file there, then prune old dated backups.
    Returns path, size and seconds."""
    if destination:
        target = inside_backups(project, destination)
        if target.exists():
            raise UsageError(f"{target} exists; choose a new file for the backup")
    else:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
        target = backup_dir(project) / f"{BACKUP_PREFIX}{stamp}{BACKUP_SUFFIX}"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    started = time.perf_counter()
    try:
        store.snapshot(str(partial))
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    seconds = time.perf_counter() - started
    removed = [] if destination else prune(project, project.config.storage.backup_keep)
    log.info("backup: %s (%.2f s)", target, seconds)
    return {"path": str(target), "size_bytes": target.stat().st_size,
            "seconds": round(seconds, 3), "pruned": [str(p) for p in removed]}


def prune(project: Any, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` backups; returns the deleted files."""
    backups = list_backups(project)
    doomed = backups[:-keep] if keep > 0 else []
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed


def verify(project: Any, path: Path) -> dict[str, Any]:
    """Open a database file read-only and run a query on it (an encrypted project's backup
    is decrypted into its private memory-backed directory first); raises ContextdError
    naming what is wrong. Returns its file and chunk counts."""
    if not project.config.security.encrypt_db:
        return _verify_plain(path, path)
    from contextd.crypto import db_secret, plaintext_dir
    from contextd.crypto.sealed_file import unseal

    plain = plaintext_dir(Path(project.db_path)) / f"verify-{os.getpid()}.duckdb"
    try:
        unseal(path, plain, db_secret(project.config))
        return _verify_plain(plain, path)
    finally:
        plain.unlink(missing_ok=True)


def _verify_plain(path: Path, shown: Path) -> dict[str, Any]:
    from contextd.store.duckdb import DuckDBStore

    try:
        store = DuckDBStore(path, read_only=True)
    except Exception as exc:
        raise ContextdError(f"{shown} is not a usable contextd index: {exc}") from None
    try:
        files = store.file_states()
        chunks = store.chunks_for_files(None)
        return {"files": len(files), "chunks": len(chunks), "generation": store.generation()}
    except Exception as exc:
        raise ContextdError(f"{shown} is not a usable contextd index: {exc}") from None
    finally:
        store.close()


def restore(project: Any, source: str) -> dict[str, Any]:
    """Replace the project's database by the backup ``source``, once it is verified.

    Takes the owner lock for the whole operation, so no contextd process can open the
    database meanwhile; refuses when another process owns it."""
    from contextd.runtime.election import OwnerLock, lock_path

    src = inside_backups(project, source)
    if not src.is_file():
        raise UsageError(f"{src} is not a file")
    db = Path(project.db_path).resolve()
    lock = OwnerLock(lock_path(db))
    if not lock.try_acquire():
        raise ContextdError(f"the index {db} is in use by pid {lock.holder_pid()} (a server, "
                            "watcher or MCP session); 'contextd stop' stops it, then restore")
    try:
        checked = verify(project, src)
        staged = db.with_name(db.name + ".restoring")
        shutil.copyfile(src, staged)
        previous = None
        if db.exists():
            previous = db.with_name(db.name + ".before-restore")
            os.replace(db, previous)
        db.with_name(db.name + ".wal").unlink(missing_ok=True)
        os.replace(staged, db)
        if project.config.security.encrypt_db:  # a crashed owner's copy must not win
            from contextd.crypto import plaintext_dir
            from contextd.store.encrypted import PLAIN_NAME

            for leftover in plaintext_dir(db).glob(PLAIN_NAME + "*"):
                leftover.unlink()
        return {"restored": str(db), "from": str(src), **checked,
                "previous": str(previous) if previous else None}
    finally:
        lock.release()


class BackupSchedule:
    """The owner's periodic backups (``storage.backup_enabled``): one after each
    ``backup_interval_hours``, counted from the newest backup on disk, so restarts do not
    reset the clock. Runs on a daemon thread the owner stops before closing the store."""

    def __init__(self, engine: Any, check_every_s: float = 60.0):
        self.engine = engine
        self.check_every_s = check_every_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="contextd-backup", daemon=True)

    def start(self) -> "BackupSchedule":
        self._thread.start()
        return self

    def due(self) -> bool:
        """Whether the newest backup is older than the interval (or there is none)."""
        storage = self.engine.project.config.storage
        backups = list_backups(self.engine.project)
        if not backups:
            return True
        age_h = (time.time() - backups[-1].stat().st_mtime) / 3600
        return age_h >= storage.backup_interval_hours

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                if self.due():
                    self.engine.backup()
            except Exception as exc:  # a failed backup must not take the owner down
                log.warning("backup failed: %s", exc)
            self._stopped.wait(self.check_every_s)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=60)
