"""The operations declared in contextd.operations against the surfaces that expose them: every
MCP tool, HTTP route and CLI command an operation names exists, every MCP tool and HTTP route
is an operation's (or one of the few that serve the surface itself), the owner socket answers
every operation and only those, and ``[query] default_k`` / ``max_k`` hold on the CLI, MCP and
HTTP alike."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from contextd import ContextModule, Memory
from contextd.cli import COMMANDS
from contextd.api.remote import ServiceModule
from contextd.config.project import Project
from contextd.errors import UsageError
from contextd.operations import OPERATIONS, wire_shape
from contextd.operations.records import UsageSavings
from contextd.query.records import QueryRequest
from contextd.records import to_dict
from contextd.runtime import rpc
from contextd.runtime.election import socket_path
from contextd.runtime.engine import Engine
from contextd.runtime.owner import SharedEngine, connect
from contextd.store.base import Job
from contextd.mcp.app import registered_tools
from contextd.mcp.engine_handle import EngineHandle
from contextd.http.api import ENDPOINTS
from service_helpers import PROJECT_FILES, Server, cli, env_for, make_project
from test_mcp_server import mcp_session, structured

# Tools that serve the MCP server itself (its web pages, its report templates), not an
# operation of the engine.
SERVER_TOOLS = {"open_index_manager", "list_index_managers", "stop_index_manager",
                "get_template_schema"}
# Routes that say whether the HTTP service is up, and describe it.
SERVICE_ROUTES = {"/healthz", "/readyz", "/openapi.json"}


def _all_mcp_tools(tmp_path: Path) -> set[str]:
    """Every tool name the server can register (the seed-002 names included)."""
    make_project(tmp_path, '[mcp]\ncompatibility = "seed002"\n')
    return {tool.name for tool in registered_tools(EngineHandle(str(tmp_path), None))}


def test_every_surface_name_an_operation_declares_exists(tmp_path: Path) -> None:
    tools = _all_mcp_tools(tmp_path)
    routes = {path for _method, path, *_ in ENDPOINTS}
    commands = set(COMMANDS)
    for op in OPERATIONS.values():
        assert set(op.mcp) <= tools, (op.name, set(op.mcp) - tools)
        assert set(op.http) <= routes, (op.name, set(op.http) - routes)
        assert set(op.cli) <= commands, (op.name, set(op.cli) - commands)


def test_every_mcp_tool_and_http_route_is_an_operations(tmp_path: Path) -> None:
    declared_tools = {name for op in OPERATIONS.values() for name in op.mcp}
    declared_routes = {path for op in OPERATIONS.values() for path in op.http}
    assert _all_mcp_tools(tmp_path) - SERVER_TOOLS == declared_tools
    assert {path for _m, path, *_ in ENDPOINTS} - SERVICE_ROUTES == declared_routes


def test_the_engine_and_the_shared_engine_have_one_method_per_operation() -> None:
    for op in OPERATIONS.values():
        assert callable(getattr(Engine, op.name)), op.name
        assert callable(getattr(SharedEngine, op.name)), op.name
        # A request field, with its type, per parameter the operation takes.
        assert list(op.field_types) == list(op.signature.parameters)


def test_a_method_refuses_an_argument_its_operation_does_not_take() -> None:
    with pytest.raises(TypeError):
        OPERATIONS["job_status"].bind((), {"job": "x"})


def test_the_python_api_has_the_methods_its_operations_name(tmp_path: Path, monkeypatch) -> None:
    """Memory's, ContextModule's and ServiceModule's methods named in the declarations run their operation."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    root = make_project(tmp_path / "p", "[providers.semantic]\nenabled = false\n")
    for op in OPERATIONS.values():
        for qualified in op.api:
            owner, _, name = qualified.partition(".")
            assert callable(getattr({"Memory": Memory, "ContextModule": ContextModule,
                                     "ServiceModule": ServiceModule}[owner], name)), qualified
    with Memory.open(str(root)) as memory:
        ids = memory.stash("KeyError: 'user_id' in checkout", session_id="s1").segment_ids
        assert [s.segment_id for s in memory.get(ids).segments] == list(ids)
        assert memory.protect(ids).count == 1
        assert [s.segment_id for s in memory.list(session_id="s1").segments] == list(ids)
        assert memory.delete(ids).count == 1 and memory.list(session_id="s1").segments == ()
    module = ContextModule.open(str(root), wait_for_model=False)
    try:
        assert module.knowledge_create_context("notes").name == "notes"
        assert "notes" in [c.name for c in module.knowledge_list_contexts().contexts]
        assert module.knowledge_delete_context("notes", confirm=True).name == "notes"
    finally:
        module.shutdown()


def _hello(project: Project) -> rpc.Client:
    return rpc.Client.connect(socket_path(project.db_path),
                              str(Path(project.db_path).resolve()), wire_shape())


def _owned_project(tmp_path: Path, monkeypatch, toml: str) -> tuple[Project, SharedEngine]:
    """A project on disk and this process as its owner, with its socket in ``tmp_path``."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir()
    project = Project.open(str(make_project(tmp_path / "p", toml)))
    return project, connect(project)


def test_the_owner_socket_answers_declared_operations_only(tmp_path: Path, monkeypatch) -> None:
    project, owner = _owned_project(tmp_path, monkeypatch, "")
    try:
        client = _hello(project)
        with pytest.raises(rpc.RemoteError) as unknown:
            client.call("close", {})
        assert "unknown method 'close'" in str(unknown.value)
        with pytest.raises(rpc.RemoteError) as bad:
            client.call("job_history", {"limt": 3})
        assert "job_history" in str(bad.value) and "limt" in str(bad.value)
        assert client.call("job_history", {"limit": 3}) == []
        client.close()
    finally:
        owner.close()


def test_jobs_and_savings_are_records_here_and_the_same_json_over_the_socket(
        tmp_path: Path, monkeypatch) -> None:
    """job_history and savings answer typed records (read by attribute) in the owner, and
    the owner socket carries exactly their fields."""
    project, owner = _owned_project(tmp_path, monkeypatch,
                                    "[providers.semantic]\nenabled = false\n")
    try:
        owner.rebuild()
        owner.query(QueryRequest("refresh an expired token", k=3))
        jobs = owner.job_history(limit=5)
        assert jobs and isinstance(jobs[0], Job) and jobs[0].status == "completed"
        saved = owner.savings(days=1)
        assert isinstance(saved, UsageSavings) and saved.queries >= 1
        assert saved.tokens_served > 0 and set(saved.embedding_cache) == {
            "reused", "embedded", "hit_rate"}
        client = _hello(project)
        assert client.call("job_history", {"limit": 5}) == [to_dict(job) for job in jobs]
        assert set(client.call("savings", {"days": 1})) == set(to_dict(saved))
        client.close()
    finally:
        owner.close()


def test_query_refuses_more_results_than_max_k(tmp_path: Path) -> None:
    root = make_project(tmp_path, "[query]\nmax_k = 3\n")
    engine = Engine(Project.open(str(root)))
    try:
        with pytest.raises(UsageError, match=r"at most 3 .*\[query\] max_k"):
            engine.query(QueryRequest(query="invoice", k=4))
    finally:
        engine.close()


def test_default_k_max_k_and_max_budget_hold_on_the_cli_mcp_and_http(tmp_path: Path) -> None:
    """One project with ``default_k = 1``, ``max_k = 2`` and ``max_budget_tokens = 500``: a
    query without k gets one hit on each surface; k = 3 and a budget of 501 tokens are
    refused on each, naming the setting."""
    root = make_project(tmp_path / "p", "[query]\ndefault_k = 1\nmax_k = 2\n"
                        "max_budget_tokens = 500\n"
                        "[providers.semantic]\nenabled = false\n")
    env = env_for(tmp_path / "run")
    server = Server(root, env).start()
    try:
        server.wait_indexed(len(PROJECT_FILES))
        text = "refresh an expired token or sum invoice totals"

        answer = cli(root, env, "query", text, "--json")
        assert answer.returncode == 0, answer.stderr
        assert len(json.loads(answer.stdout)["hits"]) == 1
        searched_by = json.loads(answer.stdout)["searched_by"]
        assert searched_by and "semantic" not in searched_by  # disabled: never searched
        refused = cli(root, env, "query", text, "--k", "3", "--json")
        assert refused.returncode != 0 and "max_k" in refused.stderr + refused.stdout
        refused = cli(root, env, "query", text, "--budget", "501", "--json")
        assert refused.returncode != 0 and "max_budget_tokens" in refused.stderr + refused.stdout
        assert cli(root, env, "query", text, "--budget", "500", "--json").returncode == 0

        reply = httpx2.post(f"{server.url}/query_context", json={"q": text}, timeout=120)
        assert reply.status_code == 200, reply.text
        assert len(reply.json()["hits"]) == 1
        assert reply.json()["q_embed_model"] is None  # no query was embedded
        reply = httpx2.post(f"{server.url}/query_context", json={"q": text, "k": 3},
                            timeout=120)
        assert reply.status_code == 400 and "max_k" in reply.text
        reply = httpx2.post(f"{server.url}/query_context", json={"q": text, "budget": 501},
                            timeout=120)
        assert reply.status_code == 400 and "max_budget_tokens" in reply.text

        with mcp_session(root, env, tmp_path / "mcp.log", "admin,reports") as session:
            assert len(structured(session.call("query_context", {"query": text}))["hits"]) == 1
            result = session.call("query_context", {"query": text, "k": 3})
            assert result.is_error and "max_k" in result.content[0].text
            result = session.call("query_context", {"query": text,
                                                    "filters": {"maxTokens": 501}})
            assert result.is_error and "max_budget_tokens" in result.content[0].text
            answer = session.call("query_context", {"query": text, "filters": {"maxTokens": 500}})
            assert not answer.is_error
    finally:
        server.stop()
