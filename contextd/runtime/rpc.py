"""The owner socket's wire protocol: line-delimited JSON-RPC 2.0 over a Unix domain socket.

One JSON object per line, UTF-8. A connection opens with ``hello`` (protocol version and the
database path), so a peer from an older or newer contextd is refused with a message that says
what to do instead of failing later on a field it does not know. After that, each request is
``{"jsonrpc": "2.0", "id": N, "method": "<operation>", "params": {...}}`` (an operation
declared in :mod:`contextd.operations`, its request's fields as params) and is answered
by one ``result`` or ``error``; a long call may first send ``progress`` notifications carrying
the name and arguments of a :class:`contextd.indexer.progress.Progress` call.

Errors keep their class: an owner raising :class:`contextd.errors.JobConflictError` makes the
client raise the same class with the same message, so callers cannot tell a remote Engine
from a local one.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import socket
import types
import typing
from typing import Any

from contextd import errors
from contextd.errors import ContextdError
from contextd.records import to_dict

# The version of this module's framing: the hello, a call, its progress notes and errors, as
# the classes below write and read them. What a call carries (each operation's request and
# result) is compared in the hello by its own digest, :func:`contextd.operations.wire_shape`,
# computed from the declarations, so a changed operation or record needs no new number here.
PROTOCOL_VERSION = 4

# JSON-RPC error codes: the standard ones, plus ours in the implementation-defined range.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
PROTOCOL_MISMATCH = -32001
CONTEXTD_ERROR = -32002
INTERNAL_ERROR = -32603

# The Progress methods an owner may relay to a client.
PROGRESS_CALLS = ("start", "update", "embedding", "finish")

# A line longer than this is a broken or hostile peer, not a message.
MAX_LINE_BYTES = 64 * 1024 * 1024


class PeerGone(Exception):
    """The other end closed the connection or died; the caller re-elects and retries."""


class RemoteError(ContextdError):
    """The owner failed with an unexpected error (a bug there); the message names it."""


def from_dict(cls: Any, data: Any) -> Any:
    """Rebuild a record from :func:`contextd.records.to_dict` output.

    A class's own ``from_dict`` wins; other dataclasses are rebuilt field by field from their
    type hints (nested records, tuples, enums, optionals), so every record that ``to_dict``
    writes can cross the socket without a hand-written twin.
    """
    if data is None or cls is Any:
        return data
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(cls) if arg is not type(None)]
        return from_dict(options[0], data) if len(options) == 1 else data
    if origin in (tuple, list):
        args = [arg for arg in typing.get_args(cls) if arg is not Ellipsis]
        items = [from_dict(args[0] if args else Any, item) for item in data]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        _, value_type = typing.get_args(cls) or (Any, Any)
        return {key: from_dict(value_type, value) for key, value in data.items()}
    if not isinstance(cls, type):
        return data
    if hasattr(cls, "from_dict"):
        return cls.from_dict(data)
    if issubclass(cls, enum.Enum):
        return cls(data)
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        return cls(**{key: from_dict(hints.get(key, Any), value)
                      for key, value in data.items() if key in known})
    return data


def encode_error(exc: BaseException) -> dict[str, Any]:
    """The ``error`` member for an exception raised by the Engine."""
    if isinstance(exc, ContextdError):
        return {"code": CONTEXTD_ERROR, "message": str(exc),
                "data": {"type": type(exc).__name__, "cli": exc.cli}}
    return {"code": INTERNAL_ERROR, "message": f"{type(exc).__name__}: {exc}",
            "data": {"type": "RemoteError"}}


def decode_error(error: dict[str, Any]) -> ContextdError:
    """The exception a client raises for an ``error`` member: the owner's ContextdError
    subclass when there is one with a plain message constructor, else RemoteError."""
    message = str(error.get("message", "unknown error"))
    data = error.get("data") or {}
    cls = getattr(errors, data.get("type", ""), None)
    if isinstance(cls, type) and issubclass(cls, ContextdError) and cls is not errors.ConfigError:
        return cls(message, cli=data.get("cli"))
    return RemoteError(message)


class Connection:
    """One end of a socket, framed as JSON lines. Not thread-safe: one user at a time."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._reader = sock.makefile("rb")

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(to_dict(message), ensure_ascii=False, separators=(",", ":"))
                + "\n").encode()
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise PeerGone(str(exc)) from None

    def receive(self) -> dict[str, Any]:
        try:
            line = self._reader.readline(MAX_LINE_BYTES)
        except OSError as exc:
            raise PeerGone(str(exc)) from None
        if not line.endswith(b"\n"):
            raise PeerGone("connection closed")
        try:
            message = json.loads(line)
        except ValueError:
            raise PeerGone("garbled message") from None
        if not isinstance(message, dict):
            raise PeerGone("garbled message")
        return message

    def close(self) -> None:
        for part in (self._reader, self.sock):
            try:
                part.close()
            except OSError:
                pass


class Client(Connection):
    """A connection to the owner, past its hello; :meth:`call` runs one Engine method."""

    def __init__(self, sock: socket.socket):
        super().__init__(sock)
        self.owner_pid = 0  # the owner's, from its answer to the hello
        self._next_id = 1

    @classmethod
    def connect(cls, path: str, db_path: str, shape: str, timeout: float = 2.0) -> "Client":
        """Connect and say hello with ``shape``, the operations' digest
        (:func:`contextd.operations.wire_shape`). Raises OSError while nobody listens,
        PeerGone if the owner goes away during the hello, ContextdError if it speaks another
        protocol or was built from other operations."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(path)
            client = cls(sock)
            client.send({"jsonrpc": "2.0", "id": 0, "method": "hello",
                         "params": {"protocol": PROTOCOL_VERSION, "operations": shape,
                                    "db": db_path}})
            reply = client.receive()
            sock.settimeout(None)  # calls may legitimately run for minutes (sync rebuild)
        except BaseException:
            sock.close()
            raise
        if "error" in reply:
            client.close()
            raise decode_error(reply["error"])
        client.owner_pid = int(reply["result"].get("pid", 0))
        return client

    def call(self, method: str, params: dict[str, Any],
             progress: Any = None) -> Any:
        """Send one request and wait for its answer, passing progress notifications on to
        ``progress`` (a :class:`contextd.indexer.progress.Progress`)."""
        request_id = self._next_id
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method,
                   "params": params, "progress": progress is not None})
        while True:
            message = self.receive()
            if message.get("method") == "progress":
                note = message.get("params") or {}
                if progress is not None and note.get("call") in PROGRESS_CALLS:
                    # A sink written before a call existed (embedding) simply misses it.
                    sink = getattr(progress, note["call"], None)
                    if sink is not None:
                        sink(*note.get("args", []))
                continue
            if message.get("id") != request_id:
                raise PeerGone(f"answer to request {message.get('id')} while waiting for "
                               f"{request_id}")
            if "error" in message:
                raise decode_error(message["error"])
            return message.get("result")
