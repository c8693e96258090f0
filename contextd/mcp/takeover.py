"""The SDK takes over a session the prelude (:mod:`contextd.mcp.prelude`) began.

The prelude has read the first line of stdin and may have answered it (``initialize``). The
SDK's stdio transport gets that line and then the rest of stdin (:func:`after`), so its
session goes through the handshake itself and is in the state the client expects; its own
answer to the ``initialize`` already answered is dropped on the way out
(:class:`AnsweredOnce`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from io import TextIOWrapper
from typing import Any, AsyncIterator, Iterator

import anyio

from contextd.mcp.prelude import Handover

log = logging.getLogger("contextd.mcp")


async def after(first_line: bytes, lines: Any) -> AsyncIterator[str]:
    """The lines of stdin as the SDK reads them: the one the prelude read, then the rest."""
    if first_line:
        yield first_line.decode("utf-8", "replace")
    async for line in lines:
        yield line


@contextlib.contextmanager
def claimed_stdout(handover: Handover) -> Iterator[Any]:
    """The protocol's stdout when the prelude has answered ``initialize``: a private copy
    of fd 1 (fd 1 points at stderr meanwhile, as the SDK does when it claims stdout), from
    which the SDK's second answer to that request is dropped."""
    private = os.dup(1)
    os.dup2(2, 1)
    try:
        wire = anyio.wrap_file(TextIOWrapper(os.fdopen(private, "wb", closefd=False),
                                             encoding="utf-8"))
        yield AnsweredOnce(wire, handover.answered_id, handover.answered)
    finally:  # private stays open, as the SDK's: a worker thread may still write to it
        os.dup2(private, 1)


class AnsweredOnce:
    """The stdout of the SDK's transport, less its answer to the ``initialize`` the prelude
    answered (the first answer it writes with that id). Should the two answers differ, the
    log says so: the prelude's constants have drifted from the SDK's."""

    def __init__(self, wire: Any, answered_id: int | str | None, answered: Any):
        self._wire = wire
        self._id = answered_id
        self._answered = answered
        self._pending = answered_id is not None

    async def write(self, text: str) -> None:
        if self._pending:  # until the first answer, the one to initialize
            message = json.loads(text)
            if message.get("id") == self._id and "method" not in message:
                self._pending = False
                if message.get("result") != self._answered:
                    log.warning("the early answer to initialize was %s; the SDK's is %s",
                                self._answered, message.get("result", message.get("error")))
                return
        await self._wire.write(text)

    async def flush(self) -> None:
        await self._wire.flush()
