"""The answer to MCP ``initialize`` before the MCP SDK has loaded.

Importing the SDK (its client, pydantic and the protocol types) takes seconds, and an agent
times the handshake from the moment it spawns ``contextd serve``. So the console script
(:mod:`contextd.__main__`) calls :func:`answer_early` before the CLI: for a plain stdio
``serve`` it reads the first line of stdin and, when it is ``initialize``, answers at once
with what the SDK server would answer; then the CLI and the SDK load. The SDK gets
everything, in order (:func:`take_handover`, :func:`contextd.mcp.guard.run_stdio`): the
``initialize`` itself, so its session is in the right state (it refuses requests before the
handshake), and the rest of stdin; its own answer to that ``initialize`` is not sent again.
Requests that arrive meanwhile wait in the pipe until the SDK reads them.

Anything unusual (``--help``, ``--http``, an option it does not know, a root or tool group
the CLI would refuse, a first line that is not a well-formed ``initialize``) leaves the work
to the CLI and the SDK unchanged. The constants below are the SDK's; the tests compare this
answer with the SDK's own (tests/test_mcp_prelude.py). ``CONTEXTD_EARLY_INITIALIZE=0`` turns
the prelude off.

Only the standard library and the light configuration loader are imported here. The SDK is
imported after the answer, not in a thread meanwhile: the client has written ``initialize``
by the time the prelude reads it, so a thread would only take the GIL from the answer (and
turn an import error into a race between two importers).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO

# Set to 0 to leave the handshake to the SDK (tests compare both answers).
SWITCH = "CONTEXTD_EARLY_INITIALIZE"
# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS: a client's version in it is answered with
# itself, any other with the last (the SDK's runner negotiates so).
HANDSHAKE_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# What the SDK server of contextd.mcp.app advertises (tools, resource templates, no prompts).
CAPABILITIES = {"prompts": {"listChanged": False},
                "resources": {"listChanged": False, "subscribe": False},
                "tools": {"listChanged": False}}
SERVER_NAME = "contextd"


@dataclass
class ServeOptions:
    """The options of a plain ``contextd serve`` over stdio."""

    root: str | None
    config_path: str | None
    tools: list[str] | None


@dataclass
class Handover:
    """What the prelude took from stdin, for the SDK: the first line, the rest of stdin, and
    the id (and result) of the ``initialize`` already answered, if it answered one."""

    first_line: bytes
    rest: BinaryIO
    stdin_fd: int  # the protocol's stdin; fd 0 points at the null device meanwhile
    answered_id: int | str | None
    answered: dict[str, Any] | None


_handover: Handover | None = None


def take_handover() -> Handover | None:
    """The prelude's handover, once (None when the prelude left stdin alone)."""
    global _handover
    handover, _handover = _handover, None
    return handover


def answer_early(argv: list[str], version: str) -> None:
    """For ``contextd serve`` over stdio, answer ``initialize`` now and keep what was read
    for the SDK; for anything else, do nothing. ``version``: contextd's, for serverInfo."""
    global _handover
    if os.environ.get(SWITCH) == "0":
        return
    options = serve_options(argv)
    if options is None:
        return
    try:
        result = handshake_result(options, version)
    except Exception:  # whatever it is, the CLI meets it again and reports it properly
        return
    if result is None:
        return
    try:
        stdin_fd = os.dup(0)
    except OSError:  # no stdin at all: the SDK's transport meets it and says so
        return
    devnull = os.open(os.devnull, os.O_RDONLY)  # as the SDK: no child reads the protocol
    os.dup2(devnull, 0)
    os.close(devnull)
    rest = os.fdopen(stdin_fd, "rb", closefd=False)
    try:
        first_line = rest.readline()
    except KeyboardInterrupt:
        sys.stderr.write("contextd: interrupted\n")
        sys.stderr.flush()
        os._exit(130)
    answer = initialize_answer(first_line, result)
    _handover = Handover(first_line, rest, stdin_fd,
                         answer["id"] if answer else None, answer["result"] if answer else None)
    if answer is not None:
        _write(json.dumps(answer, separators=(",", ":"), ensure_ascii=False) + "\n")


def serve_options(argv: list[str]) -> ServeOptions | None:
    """The options of ``argv`` when it is ``[global options] serve [options]`` with only
    --root, --config, --tools, --json and -v; None for anything else (the CLI handles it).
    Values come from the environment as the CLI takes them (``CONTEXTD_ROOT``,
    ``CONTEXTD_CONFIG``); ``CONTEXTD_HTTP_PORT`` means HTTP, not stdio."""
    if os.environ.get("CONTEXTD_HTTP_PORT"):
        return None
    values: dict[str, str | None] = {"--root": os.environ.get("CONTEXTD_ROOT") or None,
                                     "--config": os.environ.get("CONTEXTD_CONFIG") or None,
                                     "--tools": None}
    seen_serve = False
    args = iter(argv)
    for arg in args:
        name, equals, value = arg.partition("=")
        if arg == "serve" and not seen_serve:
            seen_serve = True
        elif name in values and (seen_serve or name != "--tools"):
            if not equals:
                value = next(args, "")
            if not value or value.startswith("-"):
                return None
            values[name] = value
        elif not _is_flag(arg):
            return None
    if not seen_serve:
        return None
    tools = values["--tools"]
    return ServeOptions(values["--root"], values["--config"],
                        None if tools is None else tools.split(","))


def _is_flag(arg: str) -> bool:
    """--json, --verbose, -v, -vv..."""
    return arg in ("--json", "--verbose") or (len(arg) > 1 and set(arg[1:]) == {"v"}
                                              and arg[0] == "-")


def handshake_result(options: ServeOptions, version: str) -> dict[str, Any] | None:
    """The ``initialize`` result but its protocol version, or None when the CLI would
    refuse the options (it then says why)."""
    from pathlib import Path

    from contextd.config.project import check_root
    from contextd.errors import ContextdError
    from contextd.mcp.offer import chosen_groups, instructions, mcp_config, offered_groups

    try:
        if options.tools is not None:
            chosen_groups(options.tools)
        if options.root:
            check_root(Path(options.root).resolve(), options.root)
    except ContextdError:
        return None
    groups = offered_groups(mcp_config(options.root, options.config_path), options.tools)
    return {"capabilities": CAPABILITIES, "instructions": instructions(groups),
            "serverInfo": {"name": SERVER_NAME, "version": version}}


def initialize_answer(line: bytes, result: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON-RPC answer to ``line`` when it is a well-formed ``initialize`` request;
    None for anything else, which the SDK answers."""
    try:
        message = json.loads(line.decode("utf-8"))
        # A lone surrogate parses here but not in the SDK: leave such a frame to it.
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except (UnicodeError, ValueError):
        return None
    if not (isinstance(message, dict) and message.get("jsonrpc") == "2.0"
            and message.get("method") == "initialize"):
        return None
    request_id, params = message.get("id"), message.get("params")
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)) \
            or not isinstance(params, dict):
        return None
    version, client = params.get("protocolVersion"), params.get("clientInfo")
    if not (isinstance(version, str) and isinstance(params.get("capabilities"), dict)
            and isinstance(client, dict) and isinstance(client.get("name"), str)
            and isinstance(client.get("version"), str)):
        return None
    negotiated = version if version in HANDSHAKE_PROTOCOL_VERSIONS \
        else HANDSHAKE_PROTOCOL_VERSIONS[-1]
    return {"jsonrpc": "2.0", "id": request_id,
            "result": {**result, "protocolVersion": negotiated}}


def _write(text: str) -> None:
    data = text.encode("utf-8")
    try:
        while data:
            data = data[os.write(1, data):]
    except OSError:  # the client is gone: the SDK finds stdin closed and ends the session
        pass

