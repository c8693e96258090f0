"""A project configured for a team PostgreSQL database, used as a person would: contextd query,
workspaces list|drop, store copy there and back, and the one-line error of a bad URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

TEAM_CONFIG = '[storage]\nbackend = "postgres"\nurl = "${DATABASE_URL}"\n'


def run(root, url, *args):
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def team_repo(tmp_path_factory):
    from golden import make_golden_copy

    root = make_golden_copy(tmp_path_factory.mktemp("team") / "repo")
    # Vectors in-line: these tests check semantic answers from the shared database, not the
    # hand-off to a background owner (test_first_query_hands_the_embedding_... does).
    (root / "context.toml").write_text(TEAM_CONFIG + "[owner]\nbackground = false\n")
    return root


@pytest.mark.slow
def test_query_on_a_postgres_project(team_repo, postgres_url):
    result = run(team_repo, postgres_url, "query", "where are JWT tokens validated", "--k",
                 "3", "--json")
    assert result.returncode == 0, result.stderr
    hit = json.loads(result.stdout)["hits"][0]
    assert hit["file_path"] == "src/shoptrack/auth.py" and hit["label"].endswith("validate_token")
    assert "semantic" in hit["providers"]
    assert not (team_repo / ".contextd" / "context.duckdb").exists()
    scoped = run(team_repo, postgres_url, "--json", "query", "where are JWT tokens validated",
                 "--provider", "semantic", "--path", "web/")
    hits = json.loads(scoped.stdout)["hits"]
    assert hits and all(h["file_path"].startswith("web/") for h in hits), scoped.stderr
    stats = json.loads(run(team_repo, postgres_url, "--json", "stats").stdout)
    assert stats["storage"]["backend"] == "postgres" and stats["storage"]["total_files"] > 5


@pytest.mark.slow
def test_workspaces_list_copy_there_and_back_and_drop(team_repo, postgres_url, tmp_path):
    run(team_repo, postgres_url, "refresh")
    listed = json.loads(run(team_repo, postgres_url, "--json", "workspaces", "list").stdout)
    mine = [w for w in listed if w["root"] == str(team_repo)]
    assert len(mine) == 1 and mine[0]["files"] > 5 and mine[0]["vectors"] > 0
    file = tmp_path / "copy.duckdb"
    back = run(team_repo, postgres_url, "--json", "store", "copy", "--to", "duckdb", "--path",
               str(file))
    assert back.returncode == 0, back.stderr
    rows = json.loads(back.stdout)["rows"]
    assert rows["chunks"] > 0 and rows["embeddings"] > 0
    # No terminal to confirm on and no --yes: refused, nothing dropped (issue 40).
    refused = run(team_repo, postgres_url, "workspaces", "drop", mine[0]["workspace_id"])
    assert refused.returncode != 0 and "--yes" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    listed = json.loads(run(team_repo, postgres_url, "--json", "workspaces", "list").stdout)
    assert [w["files"] for w in listed if w["root"] == str(team_repo)] == [mine[0]["files"]]
    dropped = run(team_repo, postgres_url, "workspaces", "drop", mine[0]["workspace_id"],
                  "--yes")
    assert dropped.returncode == 0, dropped.stderr
    again = run(team_repo, postgres_url, "--json", "store", "copy", "--to", "postgres",
                "--path", str(file))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["rows"] == rows
    listed = json.loads(run(team_repo, postgres_url, "--json", "workspaces", "list").stdout)
    restored = [w for w in listed if w["workspace_id"] == mine[0]["workspace_id"]][0]
    assert (restored["files"], restored["chunks"], restored["vectors"]) == \
        (mine[0]["files"], mine[0]["chunks"], mine[0]["vectors"])
    result = run(team_repo, postgres_url, "--json", "query", "cancel order", "--k", "2")
    assert result.returncode == 0 and json.loads(result.stdout)["hits"], result.stderr


def test_unreachable_database_is_one_line_without_the_password(team_repo):
    result = run(team_repo, "postgresql://alice:hunter2-secret@127.0.0.1:9/team", "query", "x")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to PostgreSQL" in lines[0], result.stderr
    assert "hunter2-secret" not in result.stderr and "alice:***@" in lines[0]


def test_validate_config_names_an_empty_url(tmp_path):
    (tmp_path / "context.toml").write_text('[storage]\nbackend = "postgres"\n')
    result = subprocess.run([sys.executable, "-m", "contextd", "--root", str(tmp_path),
                             "validate-config"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "storage.url" in result.stdout + result.stderr


@pytest.mark.slow
def test_knowledge_and_memory_on_a_postgres_project(postgres_url, tmp_path):
    """kb create/add/search/delete and stash add/search, as a person runs them, on a
    workspace of the shared database."""
    root = tmp_path / "kbproj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 0\n")
    (root / "docs").mkdir()
    (root / "docs" / "rotation.md").write_text(
        "# Key rotation\n\nSigning keys are rotated every 90 days by the vault operator.\n")
    (root / "context.toml").write_text(TEAM_CONFIG)

    def ok(*args):
        result = run(root, postgres_url, *args)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout) if "--json" in args else result.stdout

    ok("kb", "create", "security", "--description", "runbooks")
    ok("kb", "add", str(root / "docs" / "rotation.md"), "--context", "security")
    found = ok("--json", "kb", "search", "how often are signing keys rotated", "--context",
               "security")
    assert found["hits"] and "rotation.md" in found["hits"][0]["document"], found
    listed = {c["name"]: c for c in ok("--json", "kb", "list")["contexts"]}
    assert listed["security"]["documents"] == 1 and "default" in listed
    ok("stash", "add", "Decision: sessions live in Redis for sub-ms lookups", "--type",
       "decision")
    memory = ok("--json", "stash", "search", "sessions live in Redis")["segments"]
    assert [m["type"] for m in memory] == ["decision"] and "Redis" in memory[0]["text"]
    shown = ok("--json", "stash", "show", memory[0]["segment_id"])["segments"]
    assert shown[0]["text"] == memory[0]["text"]
    deleted = ok("--json", "kb", "delete", "security", "--yes")
    assert len(deleted["documents_deleted"]) == 1, deleted
    assert ok("--json", "kb", "search", "signing keys rotated")["hits"] == []


BACKGROUND_CONFIG = TEAM_CONFIG + "[owner]\nanswer_within_seconds = 0\nidle_exit_seconds = 600\n"


@pytest.mark.slow
def test_first_query_hands_the_embedding_to_one_background_owner(tmp_path, postgres_url):
    """Issue 27's blocker: the first query of a PostgreSQL project crashed writing owner.log
    into a .contextd/ nothing had made. Now it answers, one background owner embeds, and
    stats (asked while it runs) report its pid and its model, not the command's own."""
    from golden import make_golden_copy

    root = make_golden_copy(tmp_path / "repo")
    (root / "context.toml").write_text(BACKGROUND_CONFIG)
    try:
        first = run(root, postgres_url, "query", "where are JWT tokens validated", "--json")
        assert first.returncode == 0, first.stderr
        assert "in the background" in first.stderr
        assert (root / ".contextd" / "owner.log").exists()
        stats = {}
        for _ in range(300):  # the owner takes the lock, then loads its model
            stats = json.loads(run(root, postgres_url, "--json", "stats").stdout)
            ready = {p["id"]: p["available"] for p in stats["providers"]}
            if stats["owner"]["pid"] and ready["semantic"]:
                break
        owner_pid = stats["owner"]["pid"]
        assert owner_pid and not stats["owner"]["this_process"]
        assert ready["semantic"] and ready["stash"], stats["providers"]
        indexing = stats["indexing"]
        assert indexing["state"] == "embedding" or not indexing["embeddings_pending"], indexing
        second = run(root, postgres_url, "-v", "--json", "query", "cancel order")
        assert second.returncode == 0, second.stderr
        assert "background owner started" not in second.stderr  # the running one embeds
    finally:
        stopped = run(root, postgres_url, "--json", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["pid"] == owner_pid
