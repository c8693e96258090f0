"""Fuzzing the MCP tools' arguments (hypothesis): every request gets a reply (a result, a
tool error or a JSON-RPC error, never a hang) and the server still answers afterwards.

The real server (build_app on a real project, DuckDB file and owner socket) is driven by the
SDK's own client over its in-process memory transport, which is what keeps a few hundred
calls within seconds; the stdio framing itself is covered by tests/test_hostile_requests.py.
"""

from __future__ import annotations

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError

from contextd.mcp.app import build_app
from contextd.mcp.engine_handle import EngineHandle
from test_mcp_server import make_repo

REPLY_TIMEOUT_S = 60
# Any text, lone surrogates, NUL and control characters included.
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
PATHS = st.one_of(ANY_TEXT, st.sampled_from([".", "src", "src/billing/tax.py", "../x",
                                             "/etc/passwd", "~/.ssh", "a" * 5000, "x\0y"]))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12)


def _maybe(value_strategy):
    return st.one_of(value_strategy, JSON)


ARGUMENTS = {
    "query_context": st.fixed_dictionaries({"query": _maybe(ANY_TEXT)}, optional={
        "k": _maybe(st.integers(-5, 100)),
        "scope": _maybe(st.fixed_dictionaries({}, optional={
            "paths": st.lists(PATHS, max_size=3), "languages": st.lists(ANY_TEXT, max_size=2),
            "kinds": st.lists(ANY_TEXT, max_size=2)})),
        "filters": _maybe(st.fixed_dictionaries({}, optional={
            "minScore": _maybe(st.floats()), "maxTokens": _maybe(st.integers())}))}),
    "refresh_context": st.fixed_dictionaries({"paths": _maybe(st.lists(PATHS, max_size=3))},
                                             optional={"force": _maybe(st.booleans()),
                                                       "async": _maybe(st.booleans())}),
    "get_context_stats": st.dictionaries(ANY_TEXT, JSON, max_size=2),
    # Never a real rebuild: a dry run, or a refusal (no confirm, bad options or paths).
    "rebuild_context": st.fixed_dictionaries(
        {"confirm": st.just(False), "options": st.just({"validateOnly": True})},
        optional={"paths": _maybe(st.lists(PATHS, max_size=2)), "async": _maybe(st.booleans())}),
    "get_rebuild_status": st.fixed_dictionaries({"jobId": _maybe(ANY_TEXT)}, optional={
        "includeLogs": _maybe(st.booleans())}),
    "cancel_rebuild": st.fixed_dictionaries({"jobId": _maybe(ANY_TEXT)}),
}
REQUESTS = st.one_of(
    *[st.tuples(st.just(name), arguments) for name, arguments in ARGUMENTS.items()],
    st.tuples(st.sampled_from(sorted(ARGUMENTS)), st.dictionaries(ANY_TEXT, JSON, max_size=3)),
    st.tuples(ANY_TEXT, st.dictionaries(ANY_TEXT, JSON, max_size=2)),  # unknown tools
)


class InProcessServer:
    """The contextd MCP server and an SDK client connected to it in memory."""

    def __init__(self, portal, client: Client):
        self.portal = portal
        self.client = client

    def call(self, name: str, arguments: dict):
        async def call():
            with anyio.fail_after(REPLY_TIMEOUT_S):
                try:
                    return await self.client.call_tool(name, arguments)
                except MCPError as exc:  # a JSON-RPC error is a reply too
                    return exc

        return self.portal.call(call)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    root = make_repo(base / "repo")
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_RUNTIME_DIR", str(base / "run"))
    (base / "run").mkdir()
    handle = EngineHandle(str(root), None)
    try:
        with start_blocking_portal() as portal:
            app = build_app(handle, tools=["all"])
            with portal.wrap_async_context_manager(Client(app)) as client:
                served = InProcessServer(portal, client)
                served.call("refresh_context", {"paths": ["."], "async": False})
                yield served
    finally:
        handle.close()
        patch.undo()


@settings(max_examples=250, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(request=REQUESTS)
def test_every_request_gets_a_reply(server, request):
    name, arguments = request
    reply = server.call(name, arguments)
    assert reply is not None
    if not isinstance(reply, MCPError):
        assert reply.content, reply
        if reply.is_error:
            assert "Traceback" not in reply.content[0].text


def test_server_answers_after_the_fuzzing(server):
    reply = server.call("query_context", {"query": "invoice total", "k": 3})
    assert not reply.is_error and reply.structured_content["hits"]
    assert not server.call("get_context_stats", {}).is_error
