"""Several projects in one index (issue 30): [projects.NAME] in context.toml,
queries naming projects through the CLI, the MCP client over stdio and Python; results fused
under one budget and each hit naming its project."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from test_mcp_server import mcp_session, server_env, structured
from test_settings_truth import contextd


CONFIG = """\
[contextualizer]
strategy = "none"

[projects.backend]
watch_paths = ["backend/src/", "backend/docs/"]
ignore_patterns = ["backend/src/legacy"]

[projects.frontend]
watch_paths = ["frontend/src/"]
"""

BACKEND = '''\
def {name}_session_timeout(session):
    """Expire the {name} session after its idle timeout: session timeout handling.

    {detail}"""
    if session.idle_seconds > SESSION_TIMEOUT:
        session.expire()
    return session
'''
# Each backend file its own words beside the shared ones: copies of one text would collapse
# into a single hit (near-duplicates step back) and no longer crowd the frontend out.
DETAILS = {
    "auth": "Login tokens are revoked and the refresh cookie is cleared from the browser.",
    "admin": "Operators in the console get a warning email and an audit entry is written.",
    "billing": "Open invoices stay locked, card payments pending capture are released.",
    "api": "Bearer clients receive HTTP 440 with a retry hint in the JSON error body.",
    "worker": "Background jobs holding the lease are requeued for another consumer.",
    "legacy": "The old XML gateway drops its SOAP envelope cache as before.",
}

FRONTEND = '''\
// Warn the user before the session times out (session timeout banner).
export function showSessionTimeoutBanner(secondsLeft: number): string {
  return `Your session ends in ${secondsLeft} s`;
}
'''


def monorepo(base: Path) -> Path:
    root = base / "mono"
    files = {f"backend/src/{name}.py": BACKEND.format(name=name, detail=DETAILS[name])
             for name in ("auth", "admin", "billing", "api", "worker")}
    files["backend/src/legacy/old.py"] = BACKEND.format(name="legacy", detail=DETAILS["legacy"])
    files["backend/docs/sessions.md"] = "# Sessions\n\nA session timeout expires idle sessions.\n"
    files["frontend/src/banner.ts"] = FRONTEND
    files["tools/notes.md"] = "# Notes\n\nThe session timeout is 30 minutes.\n"
    files["context.toml"] = CONFIG
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = monorepo(tmp_path_factory.mktemp("projects"))
    contextd(root, "refresh")
    return root


def query(root: Path, *args: str) -> dict:
    return json.loads(contextd(root, "--json", "query", "session timeout", *args).stdout)


def test_a_cross_project_query_fuses_both_and_names_each_hits_project(root):
    whole = query(root, "--k", "3")
    assert all(h["file_path"].startswith("backend/") for h in whole["hits"]), \
        "the fixture is meant to let the backend crowd out the frontend"
    both = query(root, "--k", "3", "--project", "backend", "--project", "frontend")
    where = {h["file_path"]: h["metadata"]["projects"] for h in both["hits"]}
    assert "frontend/src/banner.ts" in where, where
    assert any(p.startswith("backend/src/") for p in where)
    for path, projects in where.items():
        assert projects == [path.split("/", 1)[0]]
    assert both["total_tokens"] <= 1000


def test_one_project_keeps_to_its_paths_and_ignore_patterns(root):
    hits = query(root, "--k", "20", "--project", "backend")["hits"]
    paths = {h["file_path"] for h in hits}
    assert paths and all(p.startswith(("backend/src/", "backend/docs/")) for p in paths)
    assert "backend/src/legacy/old.py" not in paths
    everything = {h["file_path"] for h in query(root, "--k", "20", "--budget", "6000")["hits"]}
    assert "backend/src/legacy/old.py" in everything and "tools/notes.md" in everything


def test_a_query_without_projects_still_says_where_each_hit_belongs(root):
    hits = query(root, "--k", "20", "--budget", "6000")["hits"]
    projects = {h["file_path"]: h["metadata"]["projects"] for h in hits}
    assert projects["tools/notes.md"] == []
    assert projects["frontend/src/banner.ts"] == ["frontend"]


def test_an_unknown_project_is_refused_with_the_known_ones(root):
    done = contextd(root, "query", "session timeout", "--project", "mobile", check=False)
    assert done.returncode == 2
    assert "unknown project(s) mobile; configured: backend, frontend" in done.stderr


def test_query_context_over_mcp_takes_projects(root, tmp_path):
    with mcp_session(root, server_env(tmp_path / "run"), tmp_path / "log") as session:
        result = session.call("query_context", {"query": "session timeout", "k": 3,
                                                "projects": ["*"]})
        answer = structured(result)
    projects = {h["filePath"]: h["projects"] for h in answer["hits"]}
    assert projects["frontend/src/banner.ts"] == ["frontend"]
    assert any(p == ["backend"] for p in projects.values())
    assert "[frontend] frontend/src/banner.ts" in result.content[0].text


def test_python_task_context_names_projects(root):
    from contextd import ContextModule
    from contextd.query.records import QueryRequest

    module = ContextModule.open(str(root))
    try:
        context = module.get_task_context({"title": "session timeout banner",
                                           "projects": ["frontend"]})
        assert context.snippets
        assert {s.file_path for s in context.snippets} == {"frontend/src/banner.ts"}
        assert all(s.metadata["projects"] == ["frontend"] for s in context.snippets)
        response = module.query(QueryRequest("session timeout", k=3,
                                             projects=("backend", "frontend")))
        assert {tuple(h.metadata["projects"]) for h in response.hits} == {("backend",),
                                                                          ("frontend",)}
    finally:
        module.shutdown()


def test_validate_config_checks_project_paths(tmp_path):
    root = monorepo(tmp_path)
    (root / "context.toml").write_text(
        '[projects.outside]\nwatch_paths = ["../elsewhere"]\n'
        '[projects.later]\nwatch_paths = ["mobile/src"]\n'
        '[projects.bad]\nwatch_paths = ["backend"]\nignore_patterns = ["[oops"]\n')
    report = json.loads(contextd(root, "--json", "validate-config", check=False).stdout)
    errors = {e["key"]: e["message"] for e in report["errors"]}
    warnings = {w["key"]: w["message"] for w in report["warnings"]}
    assert "is outside the project root" in errors["projects.outside.watch_paths[0]"]
    assert "[oops" in errors["projects.bad.ignore_patterns[0]"]
    assert "not a directory" in warnings["projects.later.watch_paths[0]"]


def test_project_stats_counts_each_projects_files(root):
    stats = json.loads(contextd(root, "--json", "project-stats").stdout)
    assert {p["path"]: p["files"] for p in stats["projects"]} == {"backend": 6, "frontend": 1}
    assert "frontend" in contextd(root, "project-stats").stdout
