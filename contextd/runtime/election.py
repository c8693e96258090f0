"""The owner election: the lock that makes one process the owner of a database, and the
private place where the owner's socket lives.

An exclusive, non-blocking ``flock`` on ``<db dir>/owner.lock``: the kernel releases it when
the holder exits, however it exits (SIGKILL included), so there is never a stale owner to
clean up. The socket lives in a 0700 directory under ``$XDG_RUNTIME_DIR`` (or
``/tmp/contextd-<uid>``), named by a hash of the database path, because a path inside a deep
project could pass the 108-byte limit of socket addresses.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
from pathlib import Path

from contextd.errors import ContextdError


def runtime_dir() -> Path:
    """A directory only this user can enter, for sockets: ``$XDG_RUNTIME_DIR/contextd``
    when the session has one, else ``/tmp/contextd-<uid>``."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "contextd" if base and os.path.isdir(base) else Path(
        f"/tmp/contextd-{os.getuid()}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ContextdError(f"{path} is not a directory owned by this user; remove it or set "
                            "XDG_RUNTIME_DIR to a private directory")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)
    return path


def socket_path(db_path: Path) -> str:
    """The owner socket of a database, short enough for any project path."""
    digest = hashlib.sha256(str(Path(db_path).resolve()).encode()).hexdigest()[:24]
    return str(runtime_dir() / f"{digest}.sock")


def lock_path(db_path: Path) -> Path:
    """The election lock, next to the database it guards."""
    return Path(db_path).resolve().parent / "owner.lock"


class OwnerLock:
    """The exclusive, non-blocking ``flock`` that makes a process the owner.

    A ``flock`` belongs to the open file description, not to the process: a child that
    inherits the holder's descriptor holds the lock too, and keeps it when the holder exits.
    That is how a command hands the index to the background owner it starts with no moment
    where the lock is free (:meth:`handed_on`, ``inherited_fd``): another command arriving
    while the owner is still importing finds the lock held and waits for its hello, instead
    of owning the index and reading files in-line beside it (issue 37, one reader at a time).
    """

    def __init__(self, path: Path, inherited_fd: int | None = None):
        self.path = path
        self._fd: int | None = None
        self._inherited = inherited_fd
        self.held = False

    def handed_on(self) -> int | None:
        """The descriptor to pass to a child process that takes the ownership over (None
        when this process does not hold the lock)."""
        return self._fd if self.held else None

    def _adopt_inherited(self) -> None:
        """Use the descriptor a parent passed on, when it is this lock file: the lock it
        holds is then ours already. Any other descriptor is left alone (ignored)."""
        fd, self._inherited = self._inherited, None
        try:
            passed, here = os.fstat(fd), os.stat(self.path)
        except OSError:
            return
        if (passed.st_dev, passed.st_ino) == (here.st_dev, here.st_ino):
            os.set_inheritable(fd, False)  # this process's own children do not hold it
            self._fd = fd

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it (or a parent handed it on); record our pid in
        the file for diagnostics."""
        if self.held:
            return True
        if self._fd is None and self._inherited is not None:
            self._adopt_inherited()
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
        self.held = True
        return True

    def holder_pid(self) -> int | None:
        """The pid the current owner wrote, if readable."""
        try:
            return int(self.path.read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        """Give the lock up (closing the descriptor releases it too)."""
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self.held = False
