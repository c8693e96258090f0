"""``contextd serve`` driven as a subprocess by the MCP SDK's own stdio client.

Every tool is called with good and with invalid arguments; schemas are checked as JSON
Schema; a rebuild runs to completion through get_rebuild_status. The raw-pipe tests check
what the SDK client would paper over: stdout carries nothing but JSON-RPC, and the server
exits cleanly (lock released, socket removed) when stdin closes or on SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from jsonschema import Draft202012Validator
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from contextd.config.sections import MCP_TOOL_GROUPS
from contextd.runtime.election import OwnerLock, lock_path, socket_path
from contextd.config.project import Project

# What `contextd serve` offers with no --tools and no [mcp] tools (issue 39).
CORE_TOOLS = {"query_context", "refresh_context", "get_context_stats"}
# Every tool, as `serve --tools all` offers them.
TOOLS = {*CORE_TOOLS, "rebuild_context", "get_rebuild_status", "cancel_rebuild",
         # search sessions and reports (tests/test_sessions_mcp.py)
         "search_knowledge", "get_search_results", "list_search_results",
         "get_template_schema", "create_rag_report",
         # the web Index Manager (tests/test_web_manager.py)
         "open_index_manager", "list_index_managers", "stop_index_manager",
         # agent memory (tests/test_stash_mcp.py)
         "stash_context", "retrieve_stashed_context", "merge_stashed_context",
         "list_stashed_context", "delete_stashed_context", "protect_stashed_context",
         # knowledge contexts (tests/test_knowledge_surfaces.py)
         "knowledge_context_create", "knowledge_context_list", "knowledge_context_show",
         "knowledge_context_delete", "knowledge_add", "knowledge_remove", "knowledge_search",
         # configuration (tests/test_seed002_admin.py)
         "reload_config",
         "knowledge_show",
         # contextual retrieval and task token usage (tests/test_contextual_tools.py)
         "generate_context_for_chunk", "reindex_with_context", "get_reindexing_progress",
         "search_with_contextual_retrieval", "get_contextual_retrieval_stats",
         "report_token_usage", "get_token_reduction_report",
         # code like a location (tests/test_related.py)
         "find_related"}
REPO_FILES = {
    "src/billing/invoice.py": '''"""Invoices."""


def invoice_total(lines: list[tuple[int, float]]) -> float:
    """Sum quantity times unit price over the invoice lines."""
    return sum(qty * price for qty, price in lines)


class InvoiceMailer:
    def send_reminder(self, customer_email: str) -> str:
        return f"reminder sent to {customer_email}"
''',
    "src/billing/tax.py": '''def vat(amount: float, rate: float = 0.2) -> float:
    """Value added tax on an amount."""
    return round(amount * rate, 2)
''',
    "docs/billing.md": "# Billing\n\nInvoices are mailed monthly; reminders after 14 days.\n",
    "README.md": "# Fixture\n\nA tiny project for the MCP server tests.\n",
}


def make_repo(root: Path, files: dict[str, str] = REPO_FILES) -> Path:
    """A small git repository with ``files`` committed."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "HOME": "/nonexistent",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": os.environ["PATH"]}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, env=env)
    return root


def server_env(runtime_dir: Path) -> dict[str, str]:
    """The environment of every contextd process of one test: one private socket directory."""
    runtime_dir.mkdir(exist_ok=True)
    return {**os.environ, "XDG_RUNTIME_DIR": str(runtime_dir)}


def serve_command(root: Path, tools: str | None = None) -> list[str]:
    """``contextd serve`` on ``root``; ``tools``: its --tools (the groups a test calls)."""
    return [sys.executable, "-m", "contextd", "serve", "--root", str(root),
            *(["--tools", tools] if tools else [])]


class SyncSession:
    """A ClientSession driven from synchronous test code through an anyio portal."""

    def __init__(self, portal, session: ClientSession):
        self.portal = portal
        self.session = session

    def call(self, name: str, arguments: dict):
        return self.portal.call(self.session.call_tool, name, arguments)

    def list_tools(self):
        return self.portal.call(self.session.list_tools).tools


@asynccontextmanager
async def _session(params: StdioServerParameters, errlog):
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@contextlib.contextmanager
def mcp_session(root: Path, env: dict[str, str], errlog: Path, tools: str | None = None):
    """``contextd serve`` on ``root`` with an initialised SDK client session; ``tools``: the
    tool groups to offer beside the core ones (``--tools``)."""
    command = serve_command(root, tools)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(root))
    with start_blocking_portal() as portal, open(errlog, "a") as err:
        with portal.wrap_async_context_manager(_session(params, err)) as session:
            yield SyncSession(portal, session)


def structured(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def error_text(result) -> str:
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert "Traceback" not in text
    return text


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One server on an indexed fixture repository, shared by the tool tests."""
    base = tmp_path_factory.mktemp("mcp")
    root = make_repo(base / "repo")
    with mcp_session(root, server_env(base / "run"), base / "server.log", "all") as session:
        assert structured(session.call("refresh_context",
                                       {"paths": ["."], "async": False}))["status"] == "completed"
        yield session


def test_tools_are_listed_with_valid_schemas(served):
    tools = {tool.name: tool for tool in served.list_tools()}
    assert set(tools) == TOOLS
    for tool in tools.values():
        Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["additionalProperties"] is False  # unknown arguments refused
        Draft202012Validator.check_schema(tool.output_schema or {})
        assert len(tool.description) > 80
    assert "DESTRUCTIVE" in tools["rebuild_context"].description
    assert tools["rebuild_context"].annotations.destructive_hint
    assert tools["query_context"].input_schema["required"] == ["query"]
    assert "async" in tools["refresh_context"].input_schema["properties"]


def listed_tokens(tools) -> int:
    """What ``tools/list`` costs an agent, in tokens: characters / 4 of the JSON of the tools
    as the client received them (names, descriptions, input and output schemas, annotations)."""
    listed = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]
    return len(json.dumps(listed)) // 4


def test_the_default_tool_list_is_the_core_in_at_most_3000_tokens(tmp_path):
    """Issue 39: an agent carries the tool list on every request; by default the server
    offers only what every task needs, and says when to prefer it to grep."""
    root = make_repo(tmp_path / "repo")
    with mcp_session(root, server_env(tmp_path / "run"), tmp_path / "server.log") as session:
        tools = session.list_tools()
    assert {tool.name for tool in tools} == CORE_TOOLS
    tokens = listed_tokens(tools)
    print(f"default tools/list: {len(tools)} tools, {tokens} tokens")
    assert tokens <= 3000, tokens
    query = next(tool for tool in tools if tool.name == "query_context")
    assert "grep" in query.description and "Returns" in query.description


def test_tool_groups_are_turned_on_by_the_option_and_by_context_toml(tmp_path):
    """``[mcp] tools`` adds its groups; ``serve --tools`` replaces that list."""
    root = make_repo(tmp_path / "repo")
    (root / "context.toml").write_text('[mcp]\ntools = ["knowledge"]\n')
    env = server_env(tmp_path / "run")
    with mcp_session(root, env, tmp_path / "server.log") as session:
        configured = {tool.name for tool in session.list_tools()}
    with mcp_session(root, env, tmp_path / "server.log", "memory,reports") as session:
        chosen = {tool.name for tool in session.list_tools()}
        templates = structured(session.call("get_template_schema", {}))["available"]
    assert configured == CORE_TOOLS | {name for name in TOOLS if name.startswith("knowledge_")}
    assert "stash_context" in chosen and "create_rag_report" in chosen
    assert not any(name.startswith("knowledge_") for name in chosen)
    assert "rebuild_context" not in chosen | configured  # admin stays off
    assert "basic" in templates


def test_the_install_instructions_name_the_default_tools():
    """The block `contextd install` writes for an agent names the tools it will have."""
    from contextd.agents.instructions import BODY
    from contextd.mcp.app import registered_tools
    from contextd.mcp.engine_handle import EngineHandle

    default = {tool.name for tool in registered_tools(EngineHandle(None, None))}
    assert default == CORE_TOOLS
    assert set(re.findall(r"`([a-z]+_[a-z_]+)`", BODY)) == default


def test_serve_help_names_every_tool_group():
    shown = subprocess.run([sys.executable, "-m", "contextd", "serve", "--help"],
                           capture_output=True, text=True, timeout=60).stdout
    for group in (*MCP_TOOL_GROUPS, *CORE_TOOLS):
        assert f"\n    {group} " in shown or f" {group}," in shown or f" {group}." in shown, group


def test_an_unknown_tool_group_is_refused_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "contextd", "serve", "--tools", "memory,bogus"],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                          env=server_env(tmp_path / "run"), cwd=str(make_repo(tmp_path / "r")))
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().strip() == (
        "contextd: error: unknown MCP tool group 'bogus': the groups are admin, memory, "
        "knowledge, reports, contextual, related (or all)")


def test_query_context_returns_budgeted_hits(served):
    answer = structured(served.call("query_context", {
        "query": "total of the invoice lines", "k": 3,
        "scope": {"paths": ["src/"], "languages": ["python"]},
        "filters": {"maxTokens": 400}}))
    assert answer["hits"] and len(answer["hits"]) <= 3
    assert answer["hits"][0]["filePath"] == "src/billing/invoice.py"
    assert set(answer["hits"][0]) >= {"chunkId", "score", "filePath", "label", "kind",
                                      "snippet", "language", "offsets"}
    assert answer["totalTokens"] <= answer["maxTokens"] == 400
    assert all(hit["filePath"].startswith("src/") for hit in answer["hits"])
    text = served.call("query_context", {"query": "invoice_total"}).content[0].text
    assert "src/billing/invoice.py:" in text and "invoice_total" in text


def test_query_before_the_model_is_ready_answers_lexically_with_a_note(tmp_path):
    """With an empty model cache the server must export the model first (seconds: it imports
    torch); meanwhile query_context answers from the lexical and symbol index and says that
    semantic results are pending, then includes them once the model is ready."""
    root = make_repo(tmp_path / "repo")
    env = {**server_env(tmp_path / "run"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    arguments = {"query": "invoice_total", "k": 3}
    with mcp_session(root, env, tmp_path / "server.log") as session:
        deadline = time.monotonic() + 120
        first = structured(session.call("query_context", arguments))
        while not first["hits"] and time.monotonic() < deadline:  # bootstrap still running
            time.sleep(0.1)
            first = structured(session.call("query_context", arguments))
        assert first["hits"][0]["filePath"] == "src/billing/invoice.py"
        assert "semantic results pending: model loading" in first["notes"]
        assert all("semantic" not in hit["providers"] for hit in first["hits"])
        later = first

        def semantic_pending(answer) -> bool:  # the model loading, or the vectors computed
            return any(note == "semantic results pending: model loading"
                       or note.startswith("semantic results are still being computed")
                       for note in answer["notes"])

        while semantic_pending(later) and time.monotonic() < deadline:
            time.sleep(0.5)
            later = structured(session.call("query_context", arguments))
        assert not semantic_pending(later), later
        assert any("semantic" in hit["providers"] for hit in later["hits"]), later


@pytest.mark.parametrize("arguments, hint", [
    ({}, "query"),
    ({"query": "x", "k": 0}, "k"),
    ({"query": "x", "k": 500}, "k"),
    ({"query": "x", "filters": {"maxTokens": 10**6}}, "max_budget_tokens"),  # the shared limit
    ({"query": "x", "scope": {"dirs": ["src"]}}, "dirs"),
    ({"query": "x", "maxTokens": 400}, "maxTokens"),  # belongs in filters: not dropped silently
])
def test_query_context_rejects_bad_arguments(served, arguments, hint):
    assert hint in error_text(served.call("query_context", arguments))


def test_invalid_arguments_are_a_sentence_without_pydantic_links(served):
    """Issue 27: a validation error carried pydantic's report, the argument model's class
    name and a link to pydantic's web site."""
    missing = error_text(served.call("knowledge_context_delete", {"name": "x"}))
    assert missing == ("invalid arguments for knowledge_context_delete: confirm: missing "
                       "(a required parameter)"), missing
    too_many = error_text(served.call("query_context", {"query": "x", "k": 0}))
    assert "k: Input should be greater than or equal to" in too_many and "(got 0)" in too_many
    unknown = error_text(served.call("query_context", {"query": "x", "maxTokens": 400}))
    assert "maxTokens: unknown parameter (the parameters are: " in unknown
    for text in (missing, too_many, unknown):
        assert "pydantic" not in text and "http" not in text and "Arguments" not in text


def test_refresh_context(served):
    answer = structured(served.call("refresh_context", {"paths": ["src/billing/tax.py"]}))
    assert answer["status"] == "queued" and answer["filesQueued"] == 1
    answer = structured(served.call("refresh_context", {"paths": ["docs"], "force": True,
                                                        "async": False}))
    assert answer["status"] == "completed" and answer["report"]["files_indexed"] == 1
    assert "outside the project root" in error_text(
        served.call("refresh_context", {"paths": ["../elsewhere"]}))
    assert "paths" in error_text(served.call("refresh_context", {"paths": []}))


def test_refresh_of_a_missing_path_is_refused_alike_async_and_sync(served):
    """Issue 40 item 8: the async form answered "queued" for a path that neither exists
    nor is indexed (the refresh then failed in the server's log), while the sync form
    refused it. Both refuse it now, in the same words, before anything is queued."""
    refusals = [error_text(served.call("refresh_context", {"paths": ["src/no_such.py"],
                                                           "async": run_async}))
                for run_async in (True, False)]
    assert refusals[0] == refusals[1], refusals
    assert "'src/no_such.py' does not exist" in refusals[0]
    mixed = structured(served.call("refresh_context",
                                   {"paths": ["src/billing/tax.py", "src/no_such.py"]}))
    assert mixed["status"] == "queued" and mixed["filesQueued"] == 1
    assert [row["path"] for row in mixed["refused"]] == ["src/no_such.py"]


def test_get_context_stats(served):
    stats = structured(served.call("get_context_stats", {}))
    assert stats["enabled"] is True
    assert stats["storage"]["totalFiles"] == len(REPO_FILES)
    assert {p["id"] for p in stats["providers"]} >= {"semantic", "symbol", "full_text"}
    assert stats["owner"]["this_process"] is True


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc")
def test_query_path_of_the_server_never_loads_torch(served):
    """With the default ONNX backend, the server embeds and answers without torch (whose
    import alone costs seconds): no torch library is mapped into the serving process."""
    answer = structured(served.call("query_context", {"query": "tax on an amount"}))
    assert any("semantic" in hit["providers"] for hit in answer["hits"]), answer
    pid = structured(served.call("get_context_stats", {}))["owner"]["pid"]
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert "onnxruntime" in maps and "torch" not in maps


def test_rebuild_runs_as_a_job_to_completion(served):
    refused = error_text(served.call("rebuild_context", {"confirm": False}))
    assert "confirm=true" in refused
    dry = structured(served.call("rebuild_context", {"confirm": False,
                                                     "options": {"validateOnly": True}}))
    assert dry["status"] == "completed" and dry["estimatedFiles"] == len(REPO_FILES)
    assert "No changes made" in dry["message"]
    queued = structured(served.call("rebuild_context", {"confirm": True, "async": True,
                                                        "options": {"vacuum": False}}))
    assert queued["status"] == "queued" and queued["scope"] == "full"
    deadline = time.monotonic() + 60
    while True:
        status = structured(served.call("get_rebuild_status", {"jobId": queued["jobId"],
                                                               "includeLogs": True}))
        if status["status"] not in ("queued", "in_progress") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status["status"] == "completed", status
    assert status["progress"]["percentComplete"] == 100 and status["logs"]
    cancelled = structured(served.call("cancel_rebuild", {"jobId": queued["jobId"]}))
    assert cancelled["status"] == "completed"
    hits = structured(served.call("query_context", {"query": "vat tax rate"}))["hits"]
    assert any(hit["filePath"] == "src/billing/tax.py" for hit in hits)


NINETEEN_FILES = {f"src/handlers/handler_{i:02d}.py":
                  f"def handle_{i:02d}(request):\n    return request.get('field_{i}')\n"
                  for i in range(19)}


@pytest.mark.parametrize("tool, arguments", [
    ("rebuild_context", {"confirm": True, "async": False, "options": {"vacuum": False}}),
    # The same JobRunner.rebuild under another tool: slow (a second server start).
    pytest.param("reindex_with_context", {"async": False}, marks=pytest.mark.slow),
])
def test_a_rebuild_on_a_just_started_server_counts_every_file(tmp_path, tool, arguments):
    """Issue 40 item 8: asked while the new server's bootstrap was reading the project, a
    rebuild dropped the index, waited for the bootstrap to put the 19 files back, found
    them unchanged and answered "0 files". It waits for the bootstrap now, then rebuilds
    the 19 files, and says so."""
    root = make_repo(tmp_path / "repo", NINETEEN_FILES)
    with mcp_session(root, server_env(tmp_path / "run"), tmp_path / "server.log",
                     tools="admin,contextual") as session:
        answer = structured(session.call(tool, arguments))
        if tool == "rebuild_context":
            assert answer["status"] == "completed", answer
            assert answer["progress"]["filesProcessed"] == 19, answer
            assert "19 files" in answer["message"], answer["message"]
        else:
            assert answer["success"] and answer["progress"]["status"] == "completed", answer
            assert answer["progress"]["processed"] == answer["progress"]["total_entities"] \
                == 19, answer
        stats = structured(session.call("get_context_stats", {}))
        assert stats["storage"]["totalFiles"] == 19


@pytest.mark.parametrize("tool, arguments, hint", [
    ("rebuild_context", {}, "confirm"),
    ("rebuild_context", {"confirm": True, "options": {"validate": True}}, "validate"),
    ("get_rebuild_status", {"jobId": "nope"}, "no job with that jobId"),
    ("get_rebuild_status", {}, "jobId"),
    ("cancel_rebuild", {"jobId": "nope"}, "no job with that jobId"),
    ("get_context_stats", {"verbose": True}, "verbose"),
    ("refresh_context", {"paths": ["."], "run_async": False}, "run_async"),
])
def test_job_tools_reject_bad_arguments(served, tool, arguments, hint):
    assert hint in error_text(served.call(tool, arguments))


# ----- the raw pipe: stdout purity and shutdown ----------------------------------------
def _request(proc, message: dict) -> None:
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _read_answer(proc, request_id: int) -> dict:
    while True:
        line = proc.stdout.readline()
        assert line, "server closed stdout"
        message = json.loads(line)
        if message.get("id") == request_id:
            return message


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw-test", "version": "0"}}}


def _start_raw(tmp_path, monkeypatch, tools: str | None = None):
    """A server on a pipe we drive by hand, past initialize and tools/list; ``tools``: its
    --tools."""
    env = server_env(tmp_path / "run")
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    # What the server itself releases: no background owner takes the indexing over.
    root = make_repo(tmp_path / "repo",
                     {**REPO_FILES, "context.toml": "[owner]\nbackground = false\n"})
    proc = subprocess.Popen(serve_command(root, tools), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE,
                            stderr=open(tmp_path / "server.log", "w"), env=env, cwd=str(root))
    _request(proc, INITIALIZE)
    assert _read_answer(proc, 1)["result"]["serverInfo"]["name"] == "contextd"
    _request(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _request(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    listed = {tool["name"] for tool in _read_answer(proc, 2)["result"]["tools"]}
    assert listed == CORE_TOOLS if tools is None else listed > CORE_TOOLS
    return proc, Project.open(str(root))


@pytest.mark.parametrize("args", [["serve", "--bogus"], ["serve", "--http", "notaport"],
                                  ["--no-such-global", "serve"]])
def test_bad_command_line_writes_nothing_to_stdout(tmp_path, args):
    """An MCP client reads stdout as protocol: usage errors go to stderr only."""
    proc = subprocess.run([sys.executable, "-m", "contextd", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, env=server_env(tmp_path / "run"), timeout=60)
    assert proc.returncode == 2 and proc.stdout == b""
    assert b"Usage:" in proc.stderr


def test_stdin_close_during_startup_exits_cleanly(tmp_path, monkeypatch):
    """The background start (DuckDB, the model) is under way when the client leaves."""
    proc, _ = _start_raw(tmp_path, monkeypatch)
    time.sleep(0.3)
    proc.stdin.close()
    assert proc.wait(30) == 0
    assert "terminate called" not in (tmp_path / "server.log").read_text()


@pytest.fixture()
def raw_server(tmp_path, monkeypatch):
    """A server that owns its project; returns (process, project)."""
    proc, project = _start_raw(tmp_path, monkeypatch)
    _request(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "get_context_stats", "arguments": {}}})
    assert _read_answer(proc, 3)["result"]["structuredContent"]["owner"]["this_process"]
    yield proc, project
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _assert_released(project: Project) -> None:
    assert not os.path.exists(socket_path(project.db_path))
    assert OwnerLock(lock_path(project.db_path)).try_acquire()


def test_stdout_is_pure_and_stdin_close_exits(raw_server):
    proc, project = raw_server
    _request(proc, {"jsonrpc": "2.0", "id": 4, "method": "ping"})
    _request(proc, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "query_context", "arguments": {"query": "", "k": "many"}}})
    # The client goes away in the middle of a call, without reading the answer.
    _request(proc, {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
        "name": "refresh_context", "arguments": {"paths": ["."], "async": False}}})
    proc.stdin.close()
    assert proc.wait(30) == 0
    lines = proc.stdout.read().splitlines()
    assert lines, "no answers at all"
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0"
    _assert_released(project)


def test_closing_the_session_mid_bootstrap_hands_the_reading_to_a_background_owner(tmp_path):
    """Issue 40 item 7: closing the MCP session stopped the indexing (the server, the
    index's owner, cancelled its catch-up on the way out), and nothing read the rest until
    the next session. Now a background owner takes the reading over and finishes it with
    no session open."""
    pages = 800
    files = {f"docs/page_{n:04d}.md": "# Page\n\n" + "Some words of prose here.\n\n" * 100
             for n in range(pages)}
    files["context.toml"] = "[owner]\nidle_exit_seconds = 5\n[contextualizer]\nstrategy = \"none\"\n"
    root = make_repo(tmp_path / "repo", files)
    env = server_env(tmp_path / "run")
    project = Project.open(str(root))
    lock = OwnerLock(lock_path(project.db_path))
    with mcp_session(root, env, tmp_path / "server.log") as session:
        deadline = time.monotonic() + 60
        while True:
            stats = structured(session.call("get_context_stats", {}))
            indexing = stats["indexing"]
            if indexing["state"] == "indexing" and indexing["files_indexed"] > 0:
                break
            assert indexing["files_indexed"] < pages, "read whole before the close: more pages"
            assert time.monotonic() < deadline, indexing
            time.sleep(0.05)
        server_pid = stats["owner"]["pid"]
    deadline = time.monotonic() + 60
    while (holder := lock.holder_pid()) in (None, server_pid):
        assert time.monotonic() < deadline, "no process took the indexing over"
        time.sleep(0.1)
    try:
        command = Path(f"/proc/{holder}/cmdline").read_bytes().split(b"\0")
        assert b"owner" in command, command
        deadline = time.monotonic() + 180
        while True:  # no session open: the background owner reads the rest
            done = subprocess.run([sys.executable, "-m", "contextd", "--json", "stats"],
                                  cwd=root, env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            indexing = json.loads(done.stdout)["indexing"]
            if indexing["files_indexed"] == pages + 1:
                break
            assert time.monotonic() < deadline, indexing
            time.sleep(1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(holder, signal.SIGKILL)


def test_sigterm_exits_cleanly(raw_server):
    proc, project = raw_server
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    _assert_released(project)
