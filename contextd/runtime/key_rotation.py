"""``contextd keys rotate-db-key``: re-encrypt the sealed index, the database a restore
replaced (``*.before-restore``) and the backups with a new key.

Runs with the owner lock held (refused while a server, watcher or MCP session owns the
index). The index is first opened and closed with the current key, so a decrypted copy
left by a crashed owner is sealed before anything is re-encrypted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contextd.errors import ContextdError, UsageError


def rotate_db_key(project: Any, new_secret: bytes) -> dict[str, Any]:
    """Re-encrypt the index and every backup with ``new_secret``; returns what was done."""
    from contextd.runtime.backup import list_backups
    from contextd.crypto import db_secret, plaintext_dir
    from contextd.crypto.sealed_file import seal, unseal
    from contextd.store.encrypted import EncryptedDuckDBStore
    from contextd.runtime.election import OwnerLock, lock_path

    if not project.config.security.encrypt_db:
        raise UsageError("security.encrypt_db is off: there is no database key to rotate")
    db = Path(project.db_path).resolve()
    if not db.exists():
        raise UsageError(f"no index at {db} yet")
    lock = OwnerLock(lock_path(db))
    if not lock.try_acquire():
        raise ContextdError(f"the index {db} is in use by pid {lock.holder_pid()}; stop it, "
                            "then rotate the key")
    try:
        old = db_secret(project.config)
        EncryptedDuckDBStore(db, old).close()
        scratch = plaintext_dir(db) / "rotate.duckdb"
        # The database a restore replaced is a backup too: left on the old key, it would
        # be the one copy the new key cannot open and the old one (maybe leaked) can.
        replaced = db.with_name(db.name + ".before-restore")
        files = [db, *([replaced] if replaced.exists() else []), *list_backups(project)]
        try:
            for path in files:
                unseal(path, scratch, old)
                seal(scratch, path, new_secret)
        finally:
            scratch.unlink(missing_ok=True)
        return {"reencrypted": [str(p) for p in files]}
    finally:
        lock.release()
