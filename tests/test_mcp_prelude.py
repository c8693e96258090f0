"""The early answer to MCP ``initialize`` (:mod:`contextd.mcp.prelude`).

The prelude's answer is compared with the SDK server's own, serialised as its stdio transport
writes it, for the default tool set, ``--tools all`` and the seed002 profile; real servers
are driven over stdio to check that the SDK takes over the session the prelude began: one
answer per request, requests sent before the SDK loaded answered in order, and a first line
that is not ``initialize`` left to the SDK.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import mcp_types.version
import pytest
from mcp.server.stdio import stdio_server
from test_mcp_server import INITIALIZE, REPO_FILES, make_repo, server_env

import contextd
from contextd.mcp import prelude
from contextd.mcp.app import build_app
from contextd.mcp.engine_handle import EngineHandle


class Wire:
    """The stdout of the SDK's stdio transport, kept."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    async def write(self, text: str) -> None:
        self.lines.append(text)

    async def flush(self) -> None:
        pass


async def _sdk_answer(app, line: str) -> dict:
    async def stdin():
        yield line

    wire = Wire()
    async with stdio_server(stdin=stdin(), stdout=wire) as (read_stream, write_stream):
        server = app._lowlevel_server
        await server.run(read_stream, write_stream, server.create_initialization_options())
    return json.loads(wire.lines[0])


def _initialize(version: str, request_id: int | str = 1) -> dict:
    return {**INITIALIZE, "id": request_id,
            "params": {**INITIALIZE["params"], "protocolVersion": version}}


@pytest.mark.parametrize("toml, tools", [
    (None, None), (None, "all"), (None, "memory,reports"),
    ('[mcp]\ntools = ["knowledge"]\n', None),
    ('[mcp]\ncompatibility = "seed002"\n', None),
], ids=["default", "all", "two-groups", "context-toml", "seed002"])
def test_the_early_answer_is_the_sdk_answer(tmp_path, toml, tools):
    if toml:
        (tmp_path / "context.toml").write_text(toml)
    groups = None if tools is None else tools.split(",")
    app = build_app(EngineHandle(str(tmp_path), None), tools=groups)
    early = prelude.handshake_result(prelude.ServeOptions(str(tmp_path), None, groups),
                                     contextd.__version__)
    for version, request_id in (("2025-06-18", 1), ("2024-11-05", "first"),
                                ("2099-01-01", 7)):  # unknown: answered with the latest
        request = _initialize(version, request_id)
        line = json.dumps(request) + "\n"
        assert prelude.initialize_answer(line.encode(), early) == anyio.run(_sdk_answer, app,
                                                                            line)
    assert prelude.HANDSHAKE_PROTOCOL_VERSIONS == mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS


@pytest.mark.parametrize("line", [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n',
    b'{"jsonrpc":"2.0","id":true,"method":"initialize","params":{}}\n',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{}}}\n',  # no clientInfo: the SDK refuses it
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"\\ud800","version":"1"}}}\n',
    b'not json\n', b"",
])
def test_anything_but_a_well_formed_initialize_is_left_to_the_sdk(line):
    assert prelude.initialize_answer(line, {"capabilities": {}}) is None


@pytest.mark.parametrize("argv, expected", [
    (["serve"], (None, None, None)),
    (["--root", "R", "-vv", "serve", "--tools=memory,admin", "--json"],
     ("R", None, ["memory", "admin"])),
    (["serve", "--config", "C.toml", "--root=R2"], ("R2", "C.toml", None)),
    (["serve", "--help"], None), (["serve", "--http", "8765"], None),
    (["--tools", "memory", "serve"], None),  # --tools is serve's option, not a global one
    (["serve", "--root"], None), (["serve", "extra"], None), (["query", "serve"], None),
    (["stats"], None), ([], None), (["--version"], None),
])
def test_only_a_plain_stdio_serve_is_answered_early(monkeypatch, argv, expected):
    for name in ("CONTEXTD_ROOT", "CONTEXTD_CONFIG", "CONTEXTD_HTTP_PORT"):
        monkeypatch.delenv(name, raising=False)
    options = prelude.serve_options(argv)
    assert (None if options is None
            else (options.root, options.config_path, options.tools)) == expected
    monkeypatch.setenv("CONTEXTD_HTTP_PORT", "8765")
    assert prelude.serve_options(argv) is None


def _serve(root: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "contextd", "serve", "--root", str(root)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(log, "w"), env=env, cwd=str(root))


def _send(proc: subprocess.Popen, *messages: dict) -> None:
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    proc.stdin.flush()


def _answers_until_eof(proc: subprocess.Popen) -> list[dict]:
    proc.stdin.close()
    answers = [json.loads(line) for line in proc.stdout]
    assert proc.wait(60) == 0
    return answers


def test_requests_sent_before_the_sdk_loaded_are_each_answered_once(tmp_path):
    """A client that sends everything at once: the prelude answers initialize, the SDK the
    rest, and its own answer to initialize is not sent a second time."""
    root = make_repo(tmp_path / "repo", {**REPO_FILES,
                                         "context.toml": "[owner]\nbackground = false\n"})
    proc = _serve(root, server_env(tmp_path / "run"), tmp_path / "server.log")
    _send(proc, INITIALIZE)
    first = json.loads(proc.stdout.readline())
    assert first["id"] == 1 and first["result"]["serverInfo"]["name"] == "contextd"
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"},
          {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
          {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
           "params": {"name": "query_context", "arguments": {"query": "invoice total"}}},
          {"jsonrpc": "2.0", "id": 4, "method": "ping"})
    answers = {}
    for _ in range(3):  # a request still running when stdin closes is not answered
        answer = json.loads(proc.stdout.readline())
        answers[answer["id"]] = answer
    assert sorted(answers) == [2, 3, 4] and _answers_until_eof(proc) == []
    assert {tool["name"] for tool in answers[2]["result"]["tools"]} >= {"query_context"}
    hits = answers[3]["result"]["structuredContent"]["hits"]
    assert hits and hits[0]["filePath"] == "src/billing/invoice.py"
    assert "early answer" not in (tmp_path / "server.log").read_text()  # no drift logged


def test_a_session_that_does_not_begin_with_initialize_is_the_sdks(tmp_path):
    """A request before the handshake is refused by the SDK, as without the prelude, and the
    handshake that follows is the SDK's."""
    root = make_repo(tmp_path / "repo", {**REPO_FILES,
                                         "context.toml": "[owner]\nbackground = false\n"})
    proc = _serve(root, server_env(tmp_path / "run"), tmp_path / "server.log")
    _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
          {**INITIALIZE, "id": 2})
    refused, handshake = _answers_until_eof(proc)
    assert refused["id"] == 1 and "error" in refused
    assert handshake["id"] == 2 and handshake["result"]["serverInfo"]["name"] == "contextd"


def test_initialize_is_answered_before_the_sdk_is_imported(tmp_path):
    """With an MCP SDK that fails to import, the handshake is still answered, and only then
    does the server fail: nothing of the SDK is needed for the answer."""
    stand_in = tmp_path / "sdk" / "mcp"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text("raise ImportError('the MCP SDK was imported')\n")
    env = {**server_env(tmp_path / "run"), "PYTHONPATH": str(tmp_path / "sdk")}
    root = make_repo(tmp_path / "repo")
    proc = _serve(root, env, tmp_path / "server.log")
    _send(proc, INITIALIZE)
    answer = json.loads(proc.stdout.readline())
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "contextd"
    proc.stdin.close()
    assert proc.stdout.read() == b"" and proc.wait(60) != 0
    assert "the MCP SDK was imported" in (tmp_path / "server.log").read_text()
