"""Encryption at rest of the index (``[security] encrypt_db``).

DuckDB 2.0 can encrypt a database itself, but writing one needs its crypto extension
(httpfs), which cannot be installed offline for 2.0 (FACTS.md), and pinning DuckDB 1.5 for
it would cost the 2.0 store. So contextd keeps the file sealed (AES-256-GCM,
:mod:`contextd.crypto.sealed_file`) whenever no process has it open: the owner decrypts it
into a private 0700 directory on a memory-backed file system (``/dev/shm``), works there, and
seals it back periodically and on close; backups are sealed too. This protects the disk, its
backups and copies of them; it does not protect a running owner's memory (or its /dev/shm
copy) from the same user or root.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from contextd.errors import StoreError

PLAINTEXT_ROOTS = ("/dev/shm",)


def db_secret(config: Any, *, env: str | None = None, file: str | None = None) -> bytes:
    """The database key from ``security.key_env`` or ``security.key_file`` (or the ones
    given, for rotation); one clear error when it is missing."""
    if env is None and file is None:
        env, file = config.security.key_env, config.security.key_file
    if file:
        try:
            secret = Path(file).expanduser().read_bytes().strip()
        except OSError as exc:
            raise StoreError(f"cannot read the database key file {file} "
                             f"(security.key_file): {exc.strerror}") from None
        source = f"key file {file}"
    else:
        secret = os.environ.get(env or "", "").encode()
        source = f"environment variable {env}"
    if len(secret) < 16:
        raise StoreError(f"security.encrypt_db is on but the database key ({source}) is "
                         f"{'missing' if not secret else 'shorter than 16 characters'}; set "
                         "security.key_env or security.key_file")
    return secret


def plaintext_dir(sealed: Path) -> Path:
    """The private directory, on a memory-backed file system, where the owner keeps the
    decrypted database of ``sealed``."""
    base = next((Path(p) for p in PLAINTEXT_ROOTS if os.path.isdir(p)), None)
    if base is None:
        raise StoreError("security.encrypt_db needs a memory-backed directory (/dev/shm) for "
                         "the open database; none exists on this system")
    top = base / f"contextd-{os.getuid()}"
    top.mkdir(mode=0o700, exist_ok=True)
    info = top.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise StoreError(f"{top} is not a directory owned by this user; remove it")
    os.chmod(top, 0o700)
    digest = hashlib.sha256(str(sealed.resolve()).encode()).hexdigest()[:24]
    path = top / digest
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def side_file(project: Any, name: str) -> Path:
    """Where a side file of the index (progress log, process logs) goes: beside the
    database, or, while ``encrypt_db`` is on, in the private memory-backed directory of the
    decrypted database. Such files name the project's files and jobs; written in clear
    beside a sealed index they would tell what it keeps secret."""
    db = Path(project.db_path)
    if project.config.security.encrypt_db:
        return plaintext_dir(db) / name
    db.parent.mkdir(parents=True, exist_ok=True)
    return db.parent / name
