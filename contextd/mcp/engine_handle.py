"""The server's engine, connected in the background after the handshake.

Tool calls wait for it (:class:`EngineHandle`); :func:`start_after_handshake` starts the
election once the client has its tool list, so the handshake it times stays fast.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from contextd.config.project import Project
from contextd.errors import ContextdError

log = logging.getLogger("contextd.mcp")

# How long a tool call waits for the election and the Engine to open.
ENGINE_WAIT_S = 60.0


class EngineHandle:
    """The server's :class:`contextd.runtime.owner.SharedEngine`, connected in the background.

    Tool calls wait for it; a failure to open the project (bad configuration, unreadable
    database) is kept and shown to every call, while the server stays up to say so.
    """

    def __init__(self, root: str | None, config_path: str | None):
        self.root = root
        self.config_path = config_path
        self._engine = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._started = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closing = False

    def start(self) -> None:
        """Begin the election in the background (idempotent)."""
        with self._started:
            if self._thread is None:
                self._thread = threading.Thread(target=self._connect, name="contextd-connect",
                                                daemon=True)
                self._thread.start()

    def _connect(self) -> None:
        # The owner (DuckDB, the engine) loads here, in the background, not at import.
        from contextd.runtime.owner import connect

        try:
            engine = connect(Project.open(self.root, self.config_path), duties=True)
        except BaseException as exc:  # shown to each tool call instead
            log.error("contextd serve: %s", exc)
            self._error = exc
        else:
            if self._closing:
                engine.close()
            else:
                self._engine = engine
        finally:
            self._ready.set()

    def state(self) -> dict[str, Any]:
        """Readiness: ``ready`` once the engine is open; ``error`` when it failed to."""
        error = str(self._error) if self._error is not None else None
        engine = self._engine
        return {"ready": engine is not None and error is None, "error": error,
                "owner": bool(engine is not None and engine.is_owner)}

    def opened(self):
        """The engine if it is open already, else None (never waits: lets a request skip the
        hand-off to a worker thread that :meth:`get` would need)."""
        return self._engine if self._ready.is_set() and self._error is None else None

    def get(self, timeout: float = ENGINE_WAIT_S):
        """The engine, waiting for the background start if needed."""
        self.start()
        if not self._ready.wait(timeout):
            raise ContextdError("the index is still opening; retry in a few seconds")
        if self._error is not None:
            if isinstance(self._error, ContextdError):
                raise self._error
            raise ContextdError(f"contextd could not open this project: {self._error}")
        return self._engine

    def close(self, hand_off: bool = False) -> None:
        """Close the engine (releasing the lock and the socket if this process owns them).
        ``hand_off`` (the client went away): the reading this owner had not finished goes on
        in a background owner (:meth:`_hand_off`)."""
        self._closing = True
        with self._started:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=ENGINE_WAIT_S)
        if self._engine is not None:
            if hand_off:
                self._hand_off(self._engine)
            self._engine.close()
            self._engine = None


    @staticmethod
    def _hand_off(engine: Any) -> None:
        """Start a background owner (``contextd owner``) to read what this owner had not
        read when its session ended; it takes the index over as soon as this process lets
        go. ``[owner] background = false`` keeps the work for the next session."""
        from contextd.runtime.background import start_background_owner

        if not engine.reading_unfinished or not engine.project.config.owner.background:
            return
        try:
            start_background_owner(engine.project, engine)
        except OSError as exc:  # the work waits for the next session instead
            log.warning("contextd serve: cannot hand the indexing on: %s", exc)


def start_after_handshake(handle: EngineHandle) -> Any:
    """Server middleware that starts the background work once the first request after the
    handshake (usually tools/list) has been answered: importing DuckDB and the model holds
    the GIL for a while, and the client is timing the handshake."""

    async def middleware(ctx: Any, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        finally:
            if ctx.request_id is not None and ctx.method != "initialize":
                handle.start()

    return middleware
