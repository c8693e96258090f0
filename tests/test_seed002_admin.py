"""The administration surface through real clients (issue 30): reload_config and the
compatibility profile's tools over MCP (the SDK client over stdio), and the Index Manager's
/schema-status, index status and configuration panel over HTTP from a real ``contextd ui``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from manager_support import Manager, read_first_line, ui_command
from test_mcp_server import TOOLS, error_text, make_repo, mcp_session, server_env, structured

SEED002_TOOLS = {"rebuild_index", "index_status", "cancel_index_generation",
                 "reinitialize_schema", "generate_report"}


def test_the_admin_group_has_reload_config_and_no_compatibility_names(tmp_path):
    root = make_repo(tmp_path / "repo")
    with mcp_session(root, server_env(tmp_path / "run"), tmp_path / "log", "all") as session:
        names = {tool.name for tool in session.list_tools()}
    assert "reload_config" in names and not names & SEED002_TOOLS


@pytest.fixture(scope="module")
def seed002(tmp_path_factory):
    base = tmp_path_factory.mktemp("seed002")
    root = make_repo(base / "repo")
    # No watcher: these tools are asked about the index they act on, and a watcher's batch
    # (the report generate_report writes) landing after reinitialize_schema would refill it.
    (root / "context.toml").write_text('[mcp]\ncompatibility = "seed002"\n'
                                       '[contextualizer]\nstrategy = "none"\n'
                                       '[watcher]\nenabled = false\n')
    with mcp_session(root, server_env(base / "run"), base / "server.log") as session:
        yield root, session


def test_seed002_profile_lists_its_tool_names(seed002):
    _, session = seed002
    tools = {tool.name: tool for tool in session.list_tools()}
    assert set(tools) == TOOLS | SEED002_TOOLS  # the full set, without --tools
    assert tools["reinitialize_schema"].annotations.destructive_hint
    assert "DEPRECATED" in tools["generate_report"].description


def test_index_status_follows_the_files_on_disk(seed002):
    root, session = seed002
    # The server's own catch-up may have indexed the files before this update runs.
    update = structured(session.call("rebuild_index", {"reindex_all": False}))
    assert update["mode"] == "update"
    status = _settled_status(session)
    assert status["isInitialized"] and status["status"] == "Up to Date", status
    total = status["totalFiles"]
    assert status["project"] == {"totalFilesInProject": total, "indexedFiles": total,
                                 "notIndexedFiles": 0, "modifiedFiles": 0, "deletedFiles": 0}
    (root / "src" / "new_module.py").write_text("def fresh():\n    return 1\n")
    status = structured(session.call("index_status", {}))
    assert status["status"] == "Needs Update" and status["project"]["notIndexedFiles"] == 1
    update = structured(session.call("rebuild_index", {"reindex_all": False}))
    assert update["processedFiles"] == 1, update  # the new file, and only it
    assert _settled_status(session)["status"] == "Up to Date"


def _settled_status(session, wait_s: float = 60.0) -> dict:
    """index_status once no run is under way: the server's own catch-up, started with the
    session, may still be running after a rebuild that got the run lock first (the status
    then says, truly, "Updating")."""
    deadline = time.monotonic() + wait_s
    status = structured(session.call("index_status", {}))
    while status["status"] == "Updating" and time.monotonic() < deadline:
        time.sleep(0.2)
        status = structured(session.call("index_status", {}))
    return status


def test_generate_report_is_kept_for_seed002_agents(seed002):
    root, session = seed002
    found = structured(session.call("search_knowledge", {"query": "invoice total"}))
    hit = found["preview"][0]
    report = structured(session.call("generate_report", {
        "session_id": found["session"]["session_id"],
        "overall_summary": "Invoices are totalled by invoice_total.",
        "sections": [{"file": hit["file_path"], "start_line": hit["start_line"],
                      "end_line": hit["end_line"], "summary": "where the total is computed"}]}))
    assert report["deprecated"].endswith("create_rag_report") and report["citations"] == 1
    written = Path(report["path"]) if Path(report["path"]).is_absolute() else root / report["path"]
    assert "Invoices are totalled by invoice_total." in written.read_text()


def test_cancel_without_a_running_job_says_so(seed002):
    _, session = seed002
    answer = structured(session.call("cancel_index_generation", {}))
    assert answer == {"cancelled": False, "message": "no indexing job is running"}


def test_reinitialize_schema_needs_confirm_then_empties_the_index(seed002):
    _, session = seed002
    assert "confirm=true" in error_text(session.call("reinitialize_schema",
                                                     {"confirm": False}))
    result = structured(session.call("reinitialize_schema", {"confirm": True}))
    assert result["files_dropped"] >= 3 and result["schema_version"] >= 10
    status = structured(session.call("index_status", {}))
    assert status["status"] == "No Index" and status["project"]["notIndexedFiles"] >= 3
    structured(session.call("rebuild_index", {"reindex_all": False}))
    assert _settled_status(session)["status"] == "Up to Date"


def test_reload_config_applies_an_edit_and_refuses_a_broken_file(tmp_path):
    root = make_repo(tmp_path / "repo")
    config = root / "context.toml"
    config.write_text("[budget]\ndefault_max_tokens = 1500\n")
    with mcp_session(root, server_env(tmp_path / "run"), tmp_path / "log", "admin") as session:
        structured(session.call("refresh_context", {"paths": ["."], "async": False}))
        before = structured(session.call("query_context", {"query": "invoice total"}))
        assert before["maxTokens"] == 1500
        config.write_text("[budget]\ndefault_max_tokens = 300\n")
        reloaded = structured(session.call("reload_config", {}))
        assert reloaded["changed"] == ["budget.default_max_tokens"]
        assert reloaded["reindex"] is False and reloaded["restart"] == []
        after = structured(session.call("query_context", {"query": "invoice total"}))
        assert after["maxTokens"] == 300
        config.write_text("[budget]\ndefault_max_tokens = -1\n")
        refused = error_text(session.call("reload_config", {}))
        assert "budget.default_max_tokens" in refused
        still = structured(session.call("query_context", {"query": "invoice total"}))
        assert still["maxTokens"] == 300
        config.write_text("[chunking.python]\nmax_tokens = 128\n")
        assert structured(session.call("reload_config", {}))["reindex"] is True


def test_index_manager_schema_status_and_configuration_panel(tmp_path):
    root = make_repo(tmp_path / "repo")
    (root / "context.toml").write_text('[contextualizer]\nstrategy = "none"\n'
                                       "[budget]\ndefault_max_tokens = 900\n")
    env = server_env(tmp_path / "run")
    proc = subprocess.Popen(ui_command(root), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=open(tmp_path / "ui.log", "w"), env=env, cwd=str(root))
    try:
        manager = Manager(proc, read_first_line(proc), root, env)
        manager.wait_idle()
        status = manager.json("/schema-status")
        assert status["status"] == "Up to Date" and status["schema"]["valid"] is True
        assert status["project"]["deletedFiles"] == 0
        indexed = status["project"]["indexedFiles"]
        victim = next(p for p in root.rglob("*.py"))
        victim.unlink()
        (root / "notes.md").write_text("# Notes\n\nA new page.\n")
        status = manager.json("/schema-status")
        if status["status"] != "Updating":  # the owner's watcher may be at it already
            assert status["status"] in ("Needs Update", "Up to Date"), status
        _, _, page = manager.request("GET", "/")
        text = page.decode()
        assert 'id="index-status"' in text and "files in project" in text
        assert 'id="configuration"' in text and "budget.default_max_tokens" in text
        assert "reload_config" in text
        assert indexed >= 3
        status, _, body = manager.request("GET", "/schema-status", Cookie=None)
        assert status == 403
    finally:
        proc.terminate()
        proc.wait(20)
        proc.stdout.close()


def test_schema_status_counts_not_indexed_and_deleted_files(tmp_path):
    """The counts themselves, on an index nothing watches (Python, the Engine)."""
    from contextd.runtime.engine import Engine

    root = make_repo(tmp_path / "repo")
    engine = Engine.open(str(root))
    try:
        engine.refresh()
        status = engine.schema_status()
        assert status["status"] == "Up to Date"
        files = status["project"]["totalFilesInProject"]
        next(p for p in sorted(root.rglob("*.py"))).unlink()
        (root / "extra.md").write_text("# Extra\n")
        status = engine.schema_status()
        assert status["status"] == "Needs Update"
        assert status["project"] == {"totalFilesInProject": files, "indexedFiles": files - 1,
                                     "notIndexedFiles": 1, "modifiedFiles": 0,
                                     "deletedFiles": 1}
        assert "1 not indexed, 1 deleted" in status["advice"]
    finally:
        engine.close()
    assert json.dumps(status)


def test_schema_status_sees_changed_chunking_settings(tmp_path):
    from contextd.runtime.engine import Engine

    root = make_repo(tmp_path / "repo")
    engine = Engine.open(str(root))
    try:
        engine.ensure_indexed()
        assert engine.schema_status()["status"] == "Up to Date"
        (root / "context.toml").write_text("[chunking.python]\nmax_tokens = 64\n")
        assert engine.reload_config()["reindex"] is True
        status = engine.schema_status()
        assert status["status"] == "Needs Update" and status["settingsChanged"] is True
        assert "chunking or redaction settings changed" in status["advice"]
    finally:
        engine.close()
