"""``contextd serve --http PORT`` as a subprocess, driven by the MCP SDK's own streamable
HTTP client and by raw HTTP requests.

Checks: the tools work over HTTP; requests with a foreign Host or Origin header are refused
(DNS-rebinding protection); the server listens on 127.0.0.1 only; SIGTERM ends it with exit
code 0 and nothing on stdout.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from contextd.runtime.election import socket_path
from contextd.config.project import Project
from test_mcp_server import (CORE_TOOLS, SyncSession, _assert_released, make_repo, serve_command,
                             server_env, structured)

READY_TIMEOUT_S = 120  # a busy two-core machine: importing the SDK and uvicorn takes a while
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw-http-test", "version": "0"}}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(proc: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited early with {proc.returncode}"
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        time.sleep(0.2)
    pytest.fail(f"server not listening on {port} after {READY_TIMEOUT_S}s")


@contextlib.contextmanager
def http_server(base: Path):
    """``contextd serve --http`` on a fresh repository; yields (process, port, root)."""
    root = make_repo(base / "repo")
    port = free_port()
    proc = subprocess.Popen([*serve_command(root), "--http", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=open(base / "server.log", "w"),
                            env=server_env(base / "run"), cwd=str(root))
    try:
        wait_for_port(proc, port)
        yield proc, port, root
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


def post(port: int, body: dict, **headers: str) -> http.client.HTTPResponse:
    """A raw JSON-RPC POST to /mcp; ``headers`` override the defaults (Host included)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
    data = json.dumps(body).encode()
    all_headers = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "Content-Length": str(len(data)), **headers}
    for name, value in all_headers.items():
        conn.putheader(name, value)
    conn.endheaders(data)
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


@asynccontextmanager
async def _session(url: str):
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with http_server(tmp_path_factory.mktemp("mcp_http")) as (proc, port, root):
        yield port


def test_tools_over_streamable_http(served):
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(
                _session(f"http://127.0.0.1:{served}/mcp")) as session:
            client = SyncSession(portal, session)
            assert {tool.name for tool in client.list_tools()} == CORE_TOOLS
            assert structured(client.call("refresh_context", {"paths": ["."], "async": False})
                              )["status"] == "completed"
            hits = structured(client.call("query_context",
                                          {"query": "total of the invoice lines"}))["hits"]
            assert hits[0]["filePath"] == "src/billing/invoice.py"


def test_local_host_and_origin_are_accepted(served):
    assert post(served, INITIALIZE).status == 200
    assert post(served, INITIALIZE, Host=f"localhost:{served}",
                Origin=f"http://localhost:{served}").status == 200


@pytest.mark.parametrize("headers, status", [
    ({"Host": "evil.example.com"}, 421),
    ({"Host": "evil.example.com:80"}, 421),
    ({"Origin": "http://evil.example.com"}, 403),
    ({"Origin": "null"}, 403),
])
def test_dns_rebinding_is_refused(served, headers, status):
    assert post(served, INITIALIZE, **headers).status == status


def _non_loopback_ipv4() -> str | None:
    """This machine's address on its default route, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))  # TEST-NET-1: only selects a route
        except OSError:
            return None
        address = sock.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_listens_on_loopback_only(served):
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if tables[0].exists():  # the local address of every socket in state LISTEN (0A) on our port
        rows = [line.split() for table in tables if table.exists()
                for line in table.read_text().splitlines()[1:]]
        addresses = {row[1].split(":")[0] for row in rows
                     if row[3] == "0A" and int(row[1].split(":")[1], 16) == served}
        assert addresses == {"0100007F"}  # 127.0.0.1 (little-endian hex), and no IPv6 socket
    address = _non_loopback_ipv4()
    if address is None:
        pytest.skip("no non-loopback IPv4 address to try")
    with pytest.raises(OSError):
        socket.create_connection((address, served), timeout=5).close()


def test_sigterm_exits_cleanly_with_empty_stdout(tmp_path, monkeypatch):
    """Once the server owns the index (its owner socket exists), SIGTERM ends it with exit
    code 0, the owner lock and socket released, and nothing ever written to stdout."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", server_env(tmp_path / "run")["XDG_RUNTIME_DIR"])
    with http_server(tmp_path) as (proc, port, root):
        assert post(port, INITIALIZE).status == 200
        project = Project.open(str(root))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not os.path.exists(socket_path(project.db_path)):
            assert time.monotonic() < deadline, "the server never took ownership of the index"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert proc.stdout.read() == b""
        _assert_released(project)
    assert "Traceback" not in (tmp_path / "server.log").read_text()
