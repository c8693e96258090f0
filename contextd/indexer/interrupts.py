"""Ctrl-C, noticed once for the whole process.

Python turns SIGINT into KeyboardInterrupt, but not every layer lets it through: DuckDB
interrupts the statement it is running and raises ``RuntimeError("Query interrupted")``
instead, and click wraps it in ``Abort``. So the CLI installs a handler that records the
request before raising; the error boundary and the indexer (which marks its job
``interrupted``) ask :func:`is_interrupt` rather than trusting the exception type.
"""

from __future__ import annotations

import signal
import threading

_requested = threading.Event()


def install() -> None:
    """Record Ctrl-C, then raise KeyboardInterrupt as Python would (main thread only)."""

    def on_sigint(signum, frame) -> None:
        _requested.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was caused by, Ctrl-C."""
    return isinstance(exc, KeyboardInterrupt) or _requested.is_set()
