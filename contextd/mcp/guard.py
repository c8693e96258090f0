"""Every request gets an answer: malformed frames on stdio become JSON-RPC errors.

The SDK's stdio transport drops a frame it cannot parse without a word (it hands the parse
error to a debug log), so a client that sent a lone surrogate (``"\\ud800"``), a value nested
5,000 deep or a megabytes-long frame waited for ever. :func:`run_stdio` serves stdio with a
guard in front of the SDK: each line is checked first (size, then the SDK's own parser), and
a bad one is answered with a JSON-RPC error carrying the request's id, found by a scan that
does not parse (it survives what the parser refused). Good lines go on to the SDK unchanged.

Over HTTP the SDK already answers 400 with a parse error, and refuses bodies over
:data:`MAX_REQUEST_BYTES` (passed to ``streamable_http_app``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from io import TextIOWrapper
from typing import Any, AsyncIterator, Iterator

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from contextd.mcp.prelude import Handover, take_handover
from contextd.mcp.takeover import after, claimed_stdout

log = logging.getLogger("contextd.mcp")

# The largest legitimate request is refresh_context with 1,000 long paths (well under 1 MiB).
MAX_REQUEST_BYTES = 1024 * 1024
_ID_VALUE = re.compile(r'\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.){0,256}")')


def frame_error(line: str) -> types.JSONRPCError | None:
    """The error answering a malformed frame, or None when the SDK can take the line."""
    if not line.strip():
        return None
    size = len(line.encode("utf-8", "surrogatepass"))
    if size > MAX_REQUEST_BYTES:
        return _error(line, types.INVALID_REQUEST,
                      f"Request too large: {size:,} bytes (limit {MAX_REQUEST_BYTES:,})")
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            return _error(line, types.PARSE_ERROR, f"Parse error: {first['msg']}")
        where = ".".join(str(part) for part in first["loc"][-3:])
        return _error(line, types.INVALID_REQUEST,
                      f"Invalid Request: not a JSON-RPC 2.0 message ({where}: {first['msg']})")
    return _bad_id(line)


def _bad_id(line: str) -> types.JSONRPCError | None:
    """The error for a request whose ``id`` is neither a string nor an integer (an object,
    null, 1.5, true): the SDK's parser takes such a frame for a notification and answers
    nothing, so the client would wait for ever."""
    if '"id"' not in line:
        return None
    message = json.loads(line)
    if not isinstance(message, dict) or "id" not in message:
        return None
    value = message["id"]
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
        code=types.INVALID_REQUEST, message=f"Invalid Request: the id must be a string or an "
                                            f"integer, not {json.dumps(value)[:40]}"))


def _error(line: str, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=top_level_id(line),
                              error=types.ErrorData(code=code, message=message))


def top_level_id(text: str) -> int | str | None:
    """The ``id`` member of the outermost object of ``text`` (a frame that may not parse),
    or None. Strings are skipped whole and nesting is counted, so an ``id`` inside
    ``params`` is never taken for the request's."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            end = _string_end(text, i)
            if depth == 1 and text[i + 1:end - 1] == "id":
                match = _ID_VALUE.match(text, end)
                if match:
                    with contextlib.suppress(ValueError):
                        value = json.loads(match.group(1))
                        if isinstance(value, str):  # a lone surrogate cannot be echoed back
                            value = value.encode("utf-8", "replace").decode("utf-8")
                        return value
            i = end
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        i += 1
    return None


def _string_end(text: str, start: int) -> int:
    """The index after the closing quote of the string opening at ``start``."""
    i = start + 1
    while True:
        i = text.find('"', i)
        if i < 0:
            return len(text)
        backslashes = 0
        while text[i - 1 - backslashes] == "\\":
            backslashes += 1
        i += 1
        if backslashes % 2 == 0:
            return i


class GuardedLines:
    """The lines of stdin for the SDK's reader, minus malformed frames, which are answered
    on the server's write stream instead (once :meth:`attach` has given it)."""

    def __init__(self, source: Any):
        self._source = source
        self._replies: Any = None
        self._attached = anyio.Event()

    def attach(self, write_stream: Any) -> None:
        self._replies = write_stream
        self._attached.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._source:
            error = frame_error(line)
            if error is None:
                yield line
                continue
            log.warning("answered a malformed request (id %r): %s", error.id,
                        error.error.message)
            await self._attached.wait()
            await self._replies.send(SessionMessage(error))


@contextlib.contextmanager
def _claimed_stdin(handover: Handover | None) -> Iterator[Any]:
    """Read the protocol from a private copy of fd 0 and point fd 0 at the null device
    while serving, as the SDK does when it owns stdin, so no child process can read (and
    steal) protocol bytes; fd 0 is restored afterwards. After the prelude, fd 0 is already
    diverted and the protocol is its first line, then the rest it has not read."""
    if handover is None:
        private = os.dup(0)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        source = os.fdopen(private, "rb", closefd=False)
    else:
        private, source = handover.stdin_fd, handover.rest
    try:
        # errors="replace", as the SDK: invalid UTF-8 bytes must not end the reader.
        lines = anyio.wrap_file(TextIOWrapper(source, encoding="utf-8", errors="replace"))
        yield lines if handover is None else after(handover.first_line, lines)
    finally:
        os.dup2(private, 0)


async def run_stdio(app: Any) -> None:
    """Serve ``app`` (an MCPServer) over stdio with malformed frames answered.

    This is ``MCPServer.run_stdio_async`` with the guarded stdin (and, after the prelude,
    its handover): the SDK offers no public way to hand its stdio transport a stdin or to
    run the server on given streams, so the server object inside ``app`` is used as that
    method uses it."""
    handover = take_handover()
    with contextlib.ExitStack() as claims:
        guarded = GuardedLines(claims.enter_context(_claimed_stdin(handover)))
        stdout = None if handover is None or handover.answered_id is None \
            else claims.enter_context(claimed_stdout(handover))
        async with stdio_server(stdin=guarded, stdout=stdout) as (read_stream, write_stream):
            guarded.attach(write_stream)
            server = app._lowlevel_server
            await server.run(read_stream, write_stream, server.create_initialization_options())
