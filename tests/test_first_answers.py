"""Complete and current answers from the first query (issue 37): a literal match is found in a
project of one or two files and before any vector exists, a chunk holding the query's rare
identifier ranks first among look-alikes, and no answer shows a line that is not on disk now.

Real parts: a real git repository in a tmp dir, the real indexer and DuckDB store, the real
embedding model where vectors matter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from test_mcp_server import make_repo, server_env

from contextd.query.records import QueryRequest
from contextd.runtime.engine import Engine
from contextd.sessions.records import SearchRequest

GIT_ENV = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "HOME": "/nonexistent",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": os.environ["PATH"]}


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True, env=GIT_ENV).stdout


def lexically_answered(root: Path, ask):
    """``ask(engine)`` on an Engine over ``root`` whose files are indexed but hold no vector
    yet."""
    engine = Engine.open(str(root))
    try:
        engine.ensure_indexed(embed=False)
        return ask(engine)
    finally:
        engine.close()


def test_a_one_file_project_answers_its_literal_query(tmp_path):
    root = make_repo(tmp_path / "repo", {
        "tax.py": '"""Value added tax at the standard rate."""\n\nRATE = 0.2\n'})
    response = lexically_answered(root, lambda e: e.query(QueryRequest("value added tax")))
    assert response.hits, response.notes
    assert "Value added tax" in response.hits[0].snippet


def test_the_first_knowledge_search_on_a_two_file_project_finds_its_literal_match(tmp_path):
    root = make_repo(tmp_path / "repo", {
        "billing.py": 'def vat(amount):\n    """Value added tax at the standard rate."""\n'
                      '    return amount * 0.2\n',
        "shipping.py": 'def parcel_cost(weight):\n    """Courier price by weight."""\n'
                       '    return 4 + weight\n'})
    session = lexically_answered(
        root, lambda e: e.search_knowledge(SearchRequest("value added tax")))
    assert session.preview, session.notes
    assert session.preview[0].file_path == "billing.py"


def _look_alike(i: int) -> str:
    return (f'def check_session_token_{i}(request):\n'
            f'    """Check the session token of the request against zqtok61x72290{i:02d}."""\n'
            f'    return request.headers.get("X-Session-Token") == "zqtok61x72290{i:02d}"\n')


def test_a_unique_identifier_among_twenty_look_alikes_ranks_first(tmp_path):
    """Twenty handlers read like the question and hold a token one digit away; the one file
    holding the token asked for reads like nothing of it. Semantic search ranks it last."""
    files = {f"src/auth/tokens_{i:02d}.py": _look_alike(i) for i in range(20) if i != 8}
    files["src/legacy/clients.py"] = (
        '"""Customers still on the old API, by their historical identifier."""\n\n'
        'OLD_CLIENTS = {\n    "zqtok61x7229008": "Acme Ltd",\n    "plain-1": "Globex",\n}\n')
    files.update({f"src/misc/module_{i:03d}.py":
                  f'def helper_{i}(value):\n    """Format value {i} for display."""\n'
                  f'    return str(value).rjust({i % 7 + 1})\n' for i in range(180)})
    root = make_repo(tmp_path / "repo", files)
    engine = Engine.open(str(root))
    try:
        engine.ensure_indexed()  # vectors too: semantic search sees the look-alikes first
        response = engine.query(QueryRequest("where is the session token zqtok61x7229008 "
                                             "checked"))
    finally:
        engine.close()
    assert response.hits[0].file_path == "src/legacy/clients.py", [
        h.file_path for h in response.hits]
    assert not any(n.startswith("no strong match") for n in response.notes), response.notes


def _lines(root: Path, path: str, start: int, end: int) -> str:
    return "\n".join((root / path).read_text().splitlines()[start - 1:end])


def test_no_snippet_shows_a_line_that_differs_from_the_file_after_a_checkout(tmp_path):
    """Index one commit, check out another that rewrites the functions, query without any
    refresh: every snippet is the text on disk at its lines now."""
    before = {f"pricing/rules_{i}.py": "".join(
        f'def discount_{i}_{j}(order):\n    """Seasonal discount rule {j} for orders."""\n'
        f'    return order.total * 0.{j + 1}\n\n' for j in range(6)) for i in range(4)}
    root = make_repo(tmp_path / "repo", before)
    first = git(root, "rev-parse", "HEAD").strip()
    for i in range(4):
        path = root / f"pricing/rules_{i}.py"
        path.write_text('"""Pricing rules, rewritten."""\nimport math\n\n' + "".join(
            f'def discount_{i}_{j}(order):\n    """Seasonal discount rule {j} for orders, '
            f'capped."""\n    return min(order.total * 0.{j + 1}, math.inf)\n\n'
            for j in range(6)))
    git(root, "commit", "-q", "-am", "rewrite")
    git(root, "checkout", "-q", first)

    def after_checkout(engine: Engine):
        git(root, "checkout", "-q", "-")  # the rewritten tree, not indexed
        return engine.query(QueryRequest("seasonal discount rule for orders", k=10))

    response = lexically_answered(root, after_checkout)
    assert response.hits
    for hit in response.hits:
        assert hit.snippet == _lines(root, hit.file_path, hit.start_line, hit.end_line), hit
    assert any(hit.metadata.get("stale") or "moved_from" in hit.metadata
               for hit in response.hits)


def _cli(root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contextd", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_printed_latency_is_the_whole_wait_of_the_command(tmp_path):
    """A first query indexes the project before it searches: the latency it reports covers
    that wait, with the search's own time beside it."""
    root = make_repo(tmp_path / "repo")
    env = {**server_env(tmp_path / "run"), "CONTEXTD_LOAD_PLUGINS": ""}
    started = time.perf_counter()
    proc = _cli(root, env, "query", "invoice total", "--json")
    waited_ms = (time.perf_counter() - started) * 1000
    _cli(root, env, "stop")
    assert proc.returncode == 0, proc.stderr
    timings = json.loads(proc.stdout)["timings_ms"]
    assert timings["total"] < timings["command"] <= waited_ms


def test_the_first_answer_on_12000_files_finds_a_file_the_first_window_did_not_index(
        tmp_path):
    """The first query reads what it can in its window (source code first, smaller files
    first) and hands the rest to the background; the files it did not read are searched as
    text for the query's distinctive words in the same answer, so the one module holding the
    answer is found although it is not indexed yet (it is the largest source file: the
    bootstrap reads it last)."""
    root = tmp_path / "repo"
    for folder in range(40):  # a plain folder: a git index of 12,000 files costs seconds
        os.makedirs(root / "pkg" / f"part_{folder:02d}")
        os.makedirs(root / "docs" / f"part_{folder:02d}")
    for n in range(12_000):
        if n % 2:
            path, text = (f"pkg/part_{n % 40:02d}/module_{n:05d}.py",
                          f"def handler_{n}(request):\n    return request.value * {n}\n")
        else:
            path, text = (f"docs/part_{n % 40:02d}/notes_{n:05d}.md",
                          f"# Notes {n}\n\nShipping notes {n}.\n")
        with open(root / path, "w") as handle:
            handle.write(text)
    (root / "pkg" / "claims").mkdir()
    (root / "pkg" / "claims" / "refunds.py").write_text("".join(
        f"def rule_{i}(claim):\n    return claim.amount > {i}\n\n\n" for i in range(80))
        + 'def settle(claim):\n    """A damaged parcel is refunded in full once the courier '
          'confirms the claim."""\n    return claim.amount\n')
    (root / "context.toml").write_text("[owner]\nidle_exit_seconds = 5\n"
                                       "[contextualizer]\nstrategy = \"none\"\n")
    env = {**server_env(tmp_path / "run"), "CONTEXTD_LOAD_PLUGINS": ""}
    try:
        first = _cli(root, env, "--json", "query", "refunded damaged parcel courier claim")
        assert first.returncode == 0, first.stderr
        answer = json.loads(first.stdout)
        assert any("not indexed yet were searched as text" in n for n in answer["notes"]), \
            answer["notes"]
        top = answer["hits"][0]
        assert top["file_path"] == "pkg/claims/refunds.py", answer["hits"][:3]
        assert top["providers"] == ["text_scan"]  # found as text: not indexed yet
        assert top["snippet"] == _lines(root, top["file_path"], top["start_line"],
                                        top["end_line"])
    finally:
        _cli(root, env, "stop")
