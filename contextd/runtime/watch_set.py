"""Watch only what is indexed: one inotify watch per directory the boundary keeps.

A recursive watch (watchdog's) puts a watch on every directory under the root, a git-ignored
``.venv`` or ``node_modules`` of tens of thousands of folders included: the kernel queue
(``max_queued_events``, 16,384 here) then overflows at every ``pip install``, and the
recursive observer answered each overflow by re-walking the whole tree, which overflowed
again: 60-93% of a core for as long as the owner lived. Here the watch set is the
boundary's own walk (:meth:`contextd.boundary.walk.Boundary.directories`): an ignored tree
costs no watch and sends no event. A directory that appears is watched when the boundary
keeps it (and reported, so the indexer walks what was written into it before the watch
existed); one that goes away drops its watches. An overflow is reported once per burst
(``on_overflow``): the caller runs one bounded catch-up, and nothing here re-walks in a loop.

Linux only (inotify through libc); :func:`available` says whether it can run, and the
watcher falls back to watchdog's observer elsewhere.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct
import sys
import threading
from typing import Callable, Iterable

log = logging.getLogger(__name__)

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
# What changes a file's content or the tree's shape; opens, reads and attribute changes are
# not asked for, so an idle project (or a build reading it) sends nothing.
WATCH_MASK = (IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
              | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
_HEADER = struct.Struct("iIII")
READ_BYTES = 1 << 16

_libc = None


def _lib():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def available() -> bool:
    """Whether inotify can be used here (Linux with a libc exposing it)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return hasattr(_lib(), "inotify_init1")
    except OSError:
        return False


class InotifyWatchSet:
    """Watches the directories ``directories(under)`` yields (root-relative; "" = the root,
    ``under`` = "" for all) and reports changed paths to ``on_path(abs_path, is_dir)``.

    ``keeps(rel)`` says whether a directory that appears is to be watched (the boundary's
    verdict); ``on_overflow()`` is called once when the kernel queue overflowed (events were
    lost: the caller re-checks the files once). :meth:`resync` re-walks after the ignore
    rules changed: watches of newly ignored trees go, newly kept ones come.
    """

    def __init__(self, root: str, directories: Callable[[str], Iterable[str]],
                 keeps: Callable[[str], bool], on_path: Callable[[str, bool], None],
                 on_overflow: Callable[[], None]):
        self.root = root.rstrip("/") or "/"
        self._directories = directories
        self._keeps = keeps
        self._on_path = on_path
        self._on_overflow = on_overflow
        self._fd = -1
        self._wake_r, self._wake_w = -1, -1
        self._by_wd: dict[int, str] = {}
        self._by_rel: dict[str, int] = {}
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None
        self._full_warned = False
        self.overflows = 0

    # ----- lifecycle ---------------------------------------------------------------------
    def start(self) -> "InotifyWatchSet":
        fd = _lib().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self._fd = fd
        self._wake_r, self._wake_w = os.pipe()
        self._watch_tree("")
        self._thread = threading.Thread(target=self._read_loop, name="contextd-inotify",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._wake_w >= 0:
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join()
        for fd in (self._fd, self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._fd = self._wake_r = self._wake_w = -1

    @property
    def watched(self) -> list[str]:
        """The watched directories (root-relative, sorted)."""
        with self._guard:
            return sorted(self._by_rel)

    def resync(self) -> None:
        """Make the watch set the boundary's walk again (after the ignore rules changed)."""
        wanted = set(self._directories(""))
        with self._guard:
            gone = [rel for rel in self._by_rel if rel not in wanted]
        for rel in gone:
            self._unwatch(rel)
        for rel in sorted(wanted):
            self._add(rel)

    # ----- the watch set -----------------------------------------------------------------
    def _abs(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def _watch_tree(self, under: str) -> None:
        for rel in self._directories(under):
            self._add(rel)

    def _add(self, rel: str) -> None:
        with self._guard:
            if rel in self._by_rel:
                return
        wd = _lib().inotify_add_watch(self._fd, os.fsencode(self._abs(rel)), WATCH_MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err == errno.ENOSPC and not self._full_warned:
                self._full_warned = True
                log.warning("inotify watch limit reached at %s (fs.inotify.max_user_watches): "
                            "changes in directories beyond it are seen at the next catch-up",
                            rel or ".")
            elif err not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ENOSPC):
                log.warning("cannot watch %s: %s", rel or ".", os.strerror(err))
            return
        with self._guard:
            old = self._by_wd.get(wd)
            if old is not None and old != rel:  # the same directory under a new name
                self._by_rel.pop(old, None)
            self._by_wd[wd] = rel
            self._by_rel[rel] = wd

    def _unwatch(self, rel: str) -> None:
        """Drop the watches of ``rel`` and everything below it."""
        prefix = rel + "/"
        with self._guard:
            gone = [(r, wd) for r, wd in self._by_rel.items()
                    if r == rel or r.startswith(prefix) or not rel]
            for r, wd in gone:
                del self._by_rel[r]
                self._by_wd.pop(wd, None)
        for _, wd in gone:
            _lib().inotify_rm_watch(self._fd, wd)  # EINVAL when the kernel already dropped it

    # ----- events ------------------------------------------------------------------------
    def _read_loop(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._wake_r in ready:
                return
            try:
                data = os.read(self._fd, READ_BYTES)
            except BlockingIOError:
                continue
            except OSError:
                return
            try:
                self._handle(data)
            except Exception:  # one odd event must not stop the watching
                log.exception("inotify: handling events failed")

    def _handle(self, data: bytes) -> None:
        offset, overflowed = 0, False
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            raw = data[offset + _HEADER.size: offset + _HEADER.size + length]
            offset += _HEADER.size + length
            if mask & IN_Q_OVERFLOW:
                overflowed = True
                continue
            with self._guard:
                parent = self._by_wd.get(wd)
            if parent is None:
                continue
            if mask & IN_IGNORED:  # the kernel dropped the watch (directory gone)
                with self._guard:
                    if self._by_wd.get(wd) == parent:
                        del self._by_wd[wd]
                        self._by_rel.pop(parent, None)
                continue
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                continue  # the parent's event names it
            name = os.fsdecode(raw.rstrip(b"\0"))
            rel = f"{parent}/{name}" if parent else name
            is_dir = bool(mask & IN_ISDIR)
            if is_dir and mask & (IN_CREATE | IN_MOVED_TO):
                if not self._keeps(rel):
                    continue  # an ignored folder appeared (a new .venv): not even reported
                self._watch_tree(rel)
            elif is_dir and mask & (IN_DELETE | IN_MOVED_FROM):
                self._unwatch(rel)
            self._on_path(self._abs(rel), is_dir)
        if overflowed:
            self.overflows += 1
            log.warning("inotify queue overflowed: events were lost; one catch-up of the "
                        "index follows")
            self._on_overflow()
