"""The DuckDB store of an encrypted index: decrypted into memory-backed storage while open,
sealed back every :data:`SEAL_INTERVAL_S` when it changed, and on close.

After a crash the decrypted copy is still in ``/dev/shm`` (until reboot) and is newer than
the sealed file: the next owner opens it rather than the sealed file, so nothing written
since the last seal is lost. It does so only once its key has opened the sealed file
(:func:`~contextd.crypto.sealed_file.verify_key`): the copy is in clear, so without that
check any key would read it, and sealing it on close would lock out the owner's key. A
file lock on the private directory keeps two processes from decrypting over each other (the owner protocol normally ensures that already).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from pathlib import Path

from contextd.crypto import plaintext_dir
from contextd.crypto.sealed_file import seal, unseal, verify_key
from contextd.errors import StoreError
from contextd.store.duckdb import DuckDBStore

log = logging.getLogger("contextd.crypto")

SEAL_INTERVAL_S = 60.0
PLAIN_NAME = "context.duckdb"


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
            if plain.exists() and self.sealed.exists():
                # The key must open the sealed file before the leftover copy is trusted:
                # otherwise any key would read it, and close() would seal it with that key.
                verify_key(self.sealed, secret)
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
        finally:
            os.close(self._guard)
