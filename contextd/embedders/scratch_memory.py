"""The large short-lived buffers of a process: handed back after use, taken in turns, and kept
smaller as the process nears its memory budget (issue 37).

The owner's resident size is its long-lived indexes (~470 MB with fastapi's 58k chunks and
the model loaded) plus whichever transients run at once. Two are large: an embedding batch's
attention buffers (+70 MB at 512 padded tokens) and the fold of the BM25 delta into frozen
arrays (+124 MB at 60k documents while it sorted every posting at once; about its new
arrays, 8 bytes a posting, since it writes them in pieces). Both ran together when the first
answer after a ``git checkout`` saved the lexical index while the vector follower embedded:
the owner's peak reached 624-688 MB against its 600 MB ``[owner] memory_limit_mb``. So:

* :func:`transient` serialises them: one large transient at a time per process, and the
  memory it freed is handed back to the system before the next one starts (glibc keeps freed
  pages in the arena of the thread that freed them, where another thread cannot reuse them);
* :func:`batch_tokens` shrinks the embedding batches while the process is near its budget
  (:func:`limit_to`), so that it adapts instead of passing it; vectors do not depend on the
  batches a text is embedded in, only the time per chunk grows a little;
* a process with a budget keeps its threads to two glibc arenas (each keeps its own freed
  pages).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import threading
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

# Above this share of the budget the embedding batches are cut to a quarter of their padded
# tokens (the attention buffers shrink with them), and scratch memory is handed back first.
NEAR_LIMIT_SHARE = 0.85
NEAR_LIMIT_DIVISOR = 4
# glibc arenas of a process with a budget (mallopt M_ARENA_MAX, glibc's malloc.h).
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8

_turn = threading.Lock()
_waiting = 0
_waiting_guard = threading.Lock()
_limit_mb: int | None = None
_page_size = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def release_scratch_memory() -> None:
    """Hand the freed scratch buffers of a batch run back to the system (glibc keeps freed
    heap pages, so the resident size stayed at the largest batch's peak for the life of the
    owner). A few milliseconds per call; a no-op off glibc."""
    trim = _glibc("malloc_trim")
    if trim is not None:
        trim(0)


@contextlib.contextmanager
def transient(release: bool = True) -> Iterator[None]:
    """Run a block that allocates a large transient, after any other such block of this
    process has ended. ``release``: hand the freed memory back on leaving; else only when
    another transient waits for its turn (an embedding batch, one of hundreds in a row, then
    costs no trim of its own)."""
    global _waiting
    with _waiting_guard:
        _waiting += 1
    try:
        _turn.acquire()
    finally:
        with _waiting_guard:
            _waiting -= 1
    try:
        yield
    finally:
        with _waiting_guard:
            others = _waiting > 0
        if release or others:
            release_scratch_memory()
        _turn.release()


def large_transient(function: Callable[..., T]) -> Callable[..., T]:
    """Decorate a function whose every call is a large transient (:func:`transient`)."""
    @functools.wraps(function)
    def in_turn(*args, **kwargs) -> T:
        with transient():
            return function(*args, **kwargs)
    return in_turn


def limit_to(megabytes: int | None) -> None:
    """Size this process's transients for ``megabytes`` of resident memory (``[owner]
    memory_limit_mb`` in the owner); None: no budget. With a budget, threads created from
    now on share MALLOC_ARENAS glibc arenas instead of up to eight per core: each arena
    keeps its own freed pages, and the owner runs some twenty threads."""
    global _limit_mb
    _limit_mb = megabytes
    mallopt = _glibc("mallopt")
    if megabytes is not None and mallopt is not None:
        mallopt(_M_ARENA_MAX, MALLOC_ARENAS)


@functools.lru_cache(maxsize=None)
def _glibc(name: str) -> Callable[..., int] | None:
    """glibc's function ``name``, looked up once; None where there is no glibc."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None


def resident_mb() -> float | None:
    """This process's resident size in MB now (None where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _page_size / (1 << 20)
    except (OSError, ValueError, IndexError):
        return None


def batch_tokens(tokens: int) -> int:
    """The padded tokens an embedding batch may hold now: ``tokens``, or a quarter of it
    (at least one row's worth is always allowed by the batcher) while the process is above
    NEAR_LIMIT_SHARE of its budget, after handing scratch memory back."""
    if _limit_mb is None:
        return tokens
    resident = resident_mb()
    if resident is None or resident < NEAR_LIMIT_SHARE * _limit_mb:
        return tokens
    release_scratch_memory()
    resident = resident_mb() or resident
    if resident < NEAR_LIMIT_SHARE * _limit_mb:
        return tokens
    return max(1, tokens // NEAR_LIMIT_DIVISOR)
