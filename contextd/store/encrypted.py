"""The DuckDB store of an encrypted index: decrypted into memory-backed storage while open,
sealed back every :data:`SEAL_INTERVAL_S` when it changed, and on close.

After a crash the decrypted copy is still in ``/dev/shm`` (until reboot) and is newer than
the sealed file: the next owner opens it rather than the sealed file, so nothing written
since the last seal is lost. It does so only once its key is proven: the copy is in clear,
so without a check any key would read it, and sealing it on close would lock out the
owner's key. The proof is a key check value (:data:`KEY_CHECK_NAME`) written before the
copy is created, so it exists in every state, the one where the first owner died before
its first seal (no sealed file to try the key on) included; a sealed file, when there is
one, must open with the key too. A file lock on the private directory keeps two processes
from decrypting over each other (the owner protocol normally ensures that already).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path

from contextd.crypto import plaintext_dir
from contextd.crypto.sealed_file import (seal, unseal, verify_key, verify_key_check,
                                         write_key_check)
from contextd.errors import StoreError
from contextd.store.duckdb import DuckDBStore

log = logging.getLogger("contextd.crypto")

SEAL_INTERVAL_S = 60.0
PLAIN_NAME = "context.duckdb"
# Beside the decrypted copy: which key it belongs to (see the module's docstring).
KEY_CHECK_NAME = "key.check"


class EncryptedDuckDBStore(DuckDBStore):
    """A :class:`DuckDBStore` whose file at rest is ``sealed`` (AES-256-GCM)."""

    def __init__(self, sealed: Path | str, secret: bytes):
        self.sealed = Path(sealed).resolve()
        self.secret = secret
        self.workdir = plaintext_dir(self.sealed)
        self._guard = os.open(self.workdir / "open.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._guard)
            raise StoreError(f"cannot open index {self.sealed}: it is locked by another "
                             "process") from None
        plain = self.workdir / PLAIN_NAME
        try:
            if plain.exists():
                self._check_leftover_key(plain)
            else:  # the check value is whole before the copy it vouches for exists
                write_key_check(self.workdir / KEY_CHECK_NAME, secret)
            if plain.exists():
                log.warning("encrypted index: reopening the decrypted copy a previous owner "
                            "left in %s (it holds its last writes)", self.workdir)
            elif self.sealed.exists():
                unseal(self.sealed, plain, secret)
            super().__init__(plain)
        except BaseException:
            os.close(self._guard)
            raise
        self._sealed_generation = -1
        self._stop = threading.Event()
        self.seal()
        self._timer = threading.Thread(target=self._seal_periodically, daemon=True,
                                       name="contextd-seal")
        self._timer.start()

    def _check_leftover_key(self, plain: Path) -> None:
        """Raise unless this key is the one of the decrypted copy a previous owner left:
        otherwise any key would read it, and close() would seal it with that key."""
        check = self.workdir / KEY_CHECK_NAME
        if self.sealed.exists():
            verify_key(self.sealed, self.secret)
        if check.exists():
            verify_key_check(check, self.secret)
        elif self.sealed.exists():  # left by a version without check values
            write_key_check(check, self.secret)
        else:
            raise StoreError(f"{plain} is a decrypted index with neither a sealed file nor a "
                             "key check value, so no key can be proven to own it; remove it "
                             "to start the index again")

    def seal(self) -> None:
        """Checkpoint and write the sealed file; writers wait meanwhile, readers do not."""
        with self._write_lock:
            generation = self.generation()
            self._cursor().execute("FORCE CHECKPOINT")
            self.sealed.parent.mkdir(parents=True, exist_ok=True)
            seal(Path(self.path), self.sealed, self.secret)
            self._sealed_generation = generation

    def _seal_periodically(self) -> None:
        while not self._stop.wait(SEAL_INTERVAL_S):
            try:
                if self.generation() != self._sealed_generation:
                    self.seal()
            except Exception as exc:  # the next interval or close() tries again
                log.warning("encrypted index: sealing failed: %s", exc)

    def snapshot(self, destination: str) -> None:
        """A sealed backup: the snapshot is taken in the private directory, then sealed."""
        plain = self.workdir / f"snapshot-{os.getpid()}-{threading.get_ident()}.duckdb"
        try:
            super().snapshot(str(plain))
            seal(plain, Path(destination), self.secret)
        finally:
            plain.unlink(missing_ok=True)

    def close(self) -> None:
        self._stop.set()
        if self._timer.is_alive() and self._timer is not threading.current_thread():
            self._timer.join()
        super().close()
        try:
            self.sealed.parent.mkdir(parents=True, exist_ok=True)
            seal(Path(self.path), self.sealed, self.secret)
            for leftover in self.workdir.glob(PLAIN_NAME + "*"):
                leftover.unlink()
            (self.workdir / KEY_CHECK_NAME).unlink(missing_ok=True)
        finally:
            os.close(self._guard)
