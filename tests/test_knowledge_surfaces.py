"""The knowledge base as agents and people reach it: five usage scenarios over MCP
(the SDK's stdio client driving ``contextd serve``) and over the CLI (real subprocesses,
talking to the same owner), every bad input as one clear tool error or stderr line, and an
add killed with SIGKILL that leaves whole documents only and resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextd.store.base import KNOWLEDGE_PREFIX
from contextd.store.duckdb import DuckDBStore
from knowledge_docs import make_docx, make_encrypted_pdf, make_html, make_markdown, make_pdf
from test_mcp_server import error_text, make_repo, mcp_session, server_env, structured


def cli(root: Path, env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``contextd --root ROOT ARGS`` as a subprocess."""
    done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def cli_json(root: Path, env: dict, *args: str) -> dict:
    return json.loads(cli(root, env, *args, "--json").stdout)


def make_library(folder: Path) -> dict[str, Path]:
    """The seed's documents: two PDFs, a lens shared by both domains, and more formats."""
    return {
        "wafr": make_pdf(folder / "wafr.pdf", [
            "Operational excellence pillar: runbooks and observability",
            "Security pillar: identity and access management, detective controls and data "
            "protection"]),
        "medicaid": make_pdf(folder / "medicaid.pdf", [
            "Medicaid eligibility depends on household income",
            "HIPAA privacy rule: patient health information stays confidential"]),
        "lens": make_docx(folder / "fin-services-lens.docx", {
            "Financial services lens": "Fraud detection, regulatory reporting and market "
                                       "data retention for banks."}),
        "guide": make_html(folder / "guide.html", "Deployment guide", {
            "Blue green deploys": "Switch traffic between two identical environments."}),
        "notes": make_markdown(folder / "notes.md", {
            "Office wifi": "The guest network password rotates every Monday."}),
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    base = tmp_path_factory.mktemp("kbsurf")
    root = make_repo(base / "repo")
    return root, make_library(root / "library"), server_env(base / "run"), base


@pytest.fixture(scope="module")
def mcp(project):
    """One ``contextd serve`` (the owner) for the module; CLI calls go through it."""
    root, _, env, base = project
    with mcp_session(root, env, base / "server.log", "knowledge,reports") as session:
        yield session


def _docs(answer: dict) -> set[str]:
    return {Path(hit["document"]).name for hit in answer["hits"]}


@pytest.mark.slow
def test_seed_scenarios_over_mcp_and_the_cli_against_the_same_owner(project, mcp):
    root, lib, env, base = project
    # Scenario 1: separate contexts, scoped search.
    created = structured(mcp.call("knowledge_context_create", {
        "name": "aws-architecture", "description": "AWS architecture and WAFR documents"}))
    assert created["name"] == "aws-architecture" and created["documents"] == 0
    assert cli_json(root, env, "kb", "create", "healthcare-compliance")["name"] == \
        "healthcare-compliance"
    added = structured(mcp.call("knowledge_add", {"paths": ["library/wafr.pdf"],
                                                  "contexts": ["aws-architecture"]}))
    assert added["added"] == 1 and added["documents"][0]["pages"] == 2
    cli(root, env, "kb", "add", str(lib["medicaid"]), "--context", "healthcare-compliance")
    found = structured(mcp.call("knowledge_search", {"query": "security pillar",
                                                     "contexts": ["aws-architecture"]}))
    assert _docs(found) == {"wafr.pdf"}
    best = found["hits"][0]
    assert (best["page"], best["contexts"], best["source"]) == (2, ["aws-architecture"],
                                                                "knowledge")
    assert best["start_line"] <= best["end_line"]
    text = mcp.call("knowledge_search", {"query": "security pillar",
                                         "contexts": ["aws-architecture"]}).content[0].text
    assert "wafr.pdf page 2 lines" in text and "[aws-architecture]" in text
    by_cli = cli_json(root, env, "kb", "search", "patient privacy", "-c",
                      "healthcare-compliance")
    assert {Path(h["document"]).name for h in by_cli["hits"]} == {"medicaid.pdf"}

    # Scenario 2: one document in two contexts (seed's comma-separated form).
    cli(root, env, "kb", "add", str(lib["lens"]), "-c",
        "aws-architecture,healthcare-compliance")
    for context in ("aws-architecture", "healthcare-compliance"):
        answer = structured(mcp.call("knowledge_search", {
            "query": "fraud detection for banks", "contexts": [context]}))
        assert "fin-services-lens.docx" in _docs(answer)
        shown = structured(mcp.call("knowledge_context_show", {"name": context}))
        assert "fin-services-lens.docx" in {Path(d["document"]).name
                                            for d in shown["documents"]}

    # Scenario 3: no context = every context, each hit names its contexts.
    everything = structured(mcp.call("knowledge_search", {"query": "security and "
                                                          "privacy controls", "k": 20}))
    assert {c for h in everything["hits"] for c in h["contexts"]} >= {
        "aws-architecture", "healthcare-compliance"}

    # Scenario 4: list, show, delete an empty context.
    listed = {c["name"]: c for c in structured(
        mcp.call("knowledge_context_list", {}))["contexts"]}
    assert listed["aws-architecture"]["documents"] == 2
    assert list(listed) == sorted(listed) and "default" in listed
    cli(root, env, "kb", "create", "test-context")
    assert "needs --yes" not in cli(root, env, "kb", "delete", "test-context", "--yes").stdout
    assert "test-context" not in {c["name"] for c in cli_json(root, env, "kb", "list")[
        "contexts"]}

    # Scenario 5: no context on add = default; a search finds it.
    assert structured(mcp.call("knowledge_add", {"paths": ["library/notes.md"]}))[
        "contexts"] == ["default"]
    default = cli_json(root, env, "kb", "search", "guest wifi network")
    assert default["hits"][0]["contexts"] == ["default"]

    # The project index and the documents together; project-only queries unchanged.
    together = structured(mcp.call("knowledge_search", {
        "query": "invoice total and security pillar", "include_project": True, "k": 20}))
    assert {h["source"] for h in together["hits"]} == {"knowledge", "project"}
    project_only = structured(mcp.call("query_context", {"query": "security pillar"}))
    assert not any(h["filePath"].startswith(KNOWLEDGE_PREFIX) for h in project_only["hits"])
    with_docs = structured(mcp.call("query_context", {"query": "security pillar",
                                                      "contexts": ["aws-architecture"]}))
    assert any(h["page"] == 2 and h["contexts"] == ["aws-architecture"]
               for h in with_docs["hits"])

    # Removal from one context, then from all.
    structured(mcp.call("knowledge_remove", {"paths": ["library/fin-services-lens.docx"],
                                             "contexts": ["aws-architecture"]}))
    assert "fin-services-lens.docx" not in _docs(structured(mcp.call("knowledge_search", {
        "query": "fraud detection for banks", "contexts": ["aws-architecture"]})))
    removed = cli_json(root, env, "kb", "remove", str(lib["lens"]))
    assert removed["documents_deleted"] == [KNOWLEDGE_PREFIX +
                                            "library/fin-services-lens.docx"]


@pytest.mark.parametrize("tool, arguments, message", [
    ("knowledge_context_create", {"name": "bad name"}, "invalid context name"),
    ("knowledge_context_create", {"name": "Project"}, "reserved"),
    ("knowledge_context_create", {"name": "DUP"}, "already exists"),
    ("knowledge_context_show", {"name": "nope"}, "unknown context"),
    ("knowledge_context_delete", {"name": "default", "confirm": True}, "cannot be deleted"),
    ("knowledge_context_delete", {"name": "dup", "confirm": False}, "confirm=true"),
    ("knowledge_add", {"paths": ["library/missing.pdf"]}, "no such file"),
    ("knowledge_add", {"paths": ["/etc/hostname"]}, "refused"),
    ("knowledge_add", {"paths": ["{outside}"]}, "outside the folders an agent may add"),
    ("knowledge_add", {"paths": ["library/notes.md"], "contexts": ["nope"]}, "unknown context"),
    ("knowledge_search", {"query": "x", "contexts": ["nope"]}, "unknown context"),
    ("knowledge_search", {"query": "x", "context": "dup"}, "context"),  # seed's name: refused
    ("knowledge_remove", {"paths": ["library/never-added.md"]}, "no document"),
])
def test_bad_inputs_over_mcp_are_tool_errors_that_say_why(project, mcp, tool, arguments,
                                                           message):
    _, _, _, base = project
    outside = make_markdown(base / "outside.md", {"x": "not in the project"})
    arguments = {k: ([str(outside) if p == "{outside}" else p for p in v]
                     if isinstance(v, list) else v) for k, v in arguments.items()}
    mcp.call("knowledge_context_create", {"name": "dup"})  # exists after the first call
    before = structured(mcp.call("knowledge_context_list", {}))
    assert message in error_text(mcp.call(tool, arguments))
    assert structured(mcp.call("knowledge_context_list", {})) == before  # nothing changed


@pytest.mark.parametrize("args, message", [
    (["kb", "delete", "default", "--yes"], "'default' context cannot be deleted"),
    (["kb", "delete", "someone"], "unknown context"),
    (["kb", "create", "a b"], "invalid context name"),
    (["kb", "create", "all"], "reserved"),
    (["kb", "add", "library/missing.pdf"], "no such file or folder"),
    (["kb", "add", "library/notes.md", "-c", "nope"], "unknown context"),
    (["kb", "search", "x", "-c", "nope"], "unknown context"),
    (["kb", "remove", "library/wafr.pdf", "-c", "nope"], "unknown context"),
])
def test_bad_inputs_on_the_cli_are_one_line_and_exit_1(project, args, message):
    root, _, env, _ = project
    done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, env=env, cwd=root, timeout=120)
    assert done.returncode == 1, done.stdout
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert done.stdout == ""


def test_cli_errors_use_the_command_line_words_not_the_mcp_ones(project, mcp):
    """Issue 27: the CLI said "repeat with confirm=true" and "run search_knowledge again".
    The owner here is the MCP server: the CLI wording crosses its socket too."""
    root, _, env, _ = project
    cli(root, env, "kb", "create", "scratch")
    delete = cli(root, env, "kb", "delete", "scratch", check=False)
    assert delete.returncode == 1
    assert "--yes" in delete.stderr and "confirm=true" not in delete.stderr, delete.stderr
    assert "confirm=true" in error_text(mcp.call("knowledge_context_delete",
                                                 {"name": "scratch", "confirm": False}))
    show = cli(root, env, "search", "--show", "search_00000000", check=False)
    assert show.returncode == 2
    assert "contextd search" in show.stderr and "search_knowledge" not in show.stderr, \
        show.stderr


def test_cli_add_reports_unreadable_files_and_exits_1(project, tmp_path):
    root, _, env, _ = project
    folder = root / "bad-docs"
    make_encrypted_pdf(folder / "locked.pdf")
    make_markdown(folder / "fine.md", {"Fine": "Readable notes about release trains."})
    done = cli(root, env, "kb", "add", str(folder), check=False)
    assert done.returncode == 1
    assert "locked.pdf: encrypted PDF" in done.stderr
    assert "1 added" in done.stdout and "1 failed" in done.stdout


# Documents of the killed add: several write batches (32 documents each).
DOCUMENTS = 120


@pytest.mark.slow
def test_an_add_killed_mid_way_leaves_whole_documents_and_resumes(tmp_path):
    """SIGKILL the process adding a folder while it writes: every stored document has its
    chunks and memberships (one transaction each), nothing half-written remains, and adding
    the folder again stores the rest while the stored ones cost nothing."""
    root = make_repo(tmp_path / "repo")
    env = server_env(tmp_path / "run")
    folder = root / "many"
    for n in range(DOCUMENTS):
        make_markdown(folder / f"doc{n:02}.md", {f"Topic {n}": f"Text of document {n}. " * 40})
    proc = subprocess.Popen([sys.executable, "-m", "contextd", "--root", str(root), "kb", "add",
                             str(folder)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    db = root / ".contextd" / "context.duckdb"
    wal = Path(str(db) + ".wal")
    deadline = time.monotonic() + 120
    # Killed once the first batch is in the write-ahead log, while later ones are being read.
    while time.monotonic() < deadline and not (wal.exists() and wal.stat().st_size > 100_000):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = DuckDBStore(db)
    try:
        documents = store.kb_documents()
        files = store.file_states(KNOWLEDGE_PREFIX)
        chunks = {}
        for row in store.chunks_for_files():
            chunks[row.file_path] = chunks.get(row.file_path, 0) + 1
        assert set(files) == {d["path"] for d in documents}  # no file rows without document
        for doc in documents:
            assert doc["contexts"] == ["default"] and chunks[doc["path"]] == doc["chunks"] > 0
        stored_before = len(documents)
    finally:
        store.close()
    resumed = cli_json(root, env, "kb", "add", str(folder))
    assert resumed["unchanged"] == stored_before
    assert resumed["added"] == DOCUMENTS - stored_before and resumed["failed"] == 0
    listed = cli_json(root, env, "kb", "show", "default")
    assert len(listed["documents"]) == DOCUMENTS


def test_kb_cli_previews_the_matched_line_and_names_skipped_files(project, mcp):
    """Issue 27: the preview under a hit showed its heading, not the line that matched; a
    file a folder add skipped was never named, even with -v."""
    root, _, env, _ = project
    folder = root / "office"
    make_markdown(folder / "notes.md", {"Guest network": "Some words first.\n\nThe guest "
                                        "network password rotates every Monday."})
    (folder / "floorplan.xyz").write_text("not a document format")
    cli(root, env, "kb", "create", "office")
    quiet = cli(root, env, "kb", "add", str(folder), "-c", "office")
    assert "1 skipped (-v names them)" in quiet.stdout and "floorplan" not in quiet.stderr
    again = cli(root, env, "-v", "kb", "add", str(folder), "-c", "office")
    assert "skipped" in again.stderr and "floorplan.xyz" in again.stderr
    assert "unchanged" in again.stdout and " 0 chunks" not in again.stdout
    found = cli(root, env, "kb", "search", "guest network password Monday", "-c", "office")
    preview = found.stdout.splitlines()[1]
    assert "password rotates every Monday" in preview, found.stdout
