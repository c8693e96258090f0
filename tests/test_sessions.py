"""Search sessions and reports in one process, on real parts: a scope's folder forms against
the scope matcher, the store's session table and its pruning, expiry through the Engine, file
name sanitising and the citation checks on real files."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest

from contextd.runtime.engine import Engine
from contextd.errors import UsageError
from contextd.providers.base import ScopeFilter
from contextd.sessions.citations import CitationResolver
from contextd.sessions.records import SearchRequest
from contextd.sessions.reports import sanitise
from contextd.sessions.scope import search_scope
from contextd.store.base import StoredSearchSession
from contextd.store.duckdb import DuckDBStore

from test_mcp_server import make_repo

PATHS = ["hooks/a.ts", "src/hooks/b.ts", "lib/ui/hooks/c.ts", "src/x/hooks/d.ts",
         "src/hooksy/e.ts", "docs/api/f.md", "src/hooks.ts"]


def matching(scope) -> list[str]:
    accepts = ScopeFilter(scope).accepts
    return [p for p in PATHS if accepts(p, "typescript", "CODE_BLOCK")]


@pytest.mark.parametrize("folder, expected", [
    ("hooks", ["hooks/a.ts", "src/hooks/b.ts", "lib/ui/hooks/c.ts", "src/x/hooks/d.ts"]),
    ("/src/hooks", ["src/hooks/b.ts"]),
    ("/docs/api/", ["docs/api/f.md"]),
    ("src/*/hooks", ["src/x/hooks/d.ts"]),
    ("**/hooks/**", ["src/hooks/b.ts", "lib/ui/hooks/c.ts", "src/x/hooks/d.ts"]),
    ("missing", []),
])
def test_seed_002_folder_forms(folder, expected):
    assert matching(search_scope(folders=[folder])) == expected


def test_files_and_folders():
    assert matching(search_scope()) == PATHS
    assert matching(search_scope(files=["./src/hooks.ts"])) == ["src/hooks.ts"]
    assert matching(search_scope(files=["src/hooks/b.ts", "docs/api/f.md"],
                                 folders=["hooks"])) == ["src/hooks/b.ts"]
    assert matching(search_scope(files=["docs/api/f.md"], folders=["hooks"])) == []
    for bad in (["../x"], ["/"], [""]):
        with pytest.raises(UsageError):
            search_scope(folders=bad)
    with pytest.raises(UsageError):
        search_scope(files=["a/../../b"])


def test_store_keeps_the_newest_and_drops_the_old(tmp_path):
    store = DuckDBStore(tmp_path / "index.duckdb")
    start = datetime(2026, 1, 1)
    for n in range(5):
        store.put_search_session(StoredSearchSession(
            f"search_{n:08x}", f"q{n}", start + timedelta(hours=n), {"folders": ["src"]}, 1,
            ({"rank": 1, "text": "ü"},)))
    assert [s.session_id for s in store.list_search_sessions()] == [
        f"search_{n:08x}" for n in (4, 3, 2, 1, 0)]
    got = store.get_search_sessions(["search_00000002", "search_nope"])
    assert list(got) == ["search_00000002"]
    assert got["search_00000002"].results == ({"rank": 1, "text": "ü"},)
    assert got["search_00000002"].params == {"folders": ["src"]}
    assert store.prune_search_sessions(keep=4) == 1
    assert store.prune_search_sessions(keep=4, created_before=start + timedelta(hours=3)) == 2
    assert [s.query for s in store.list_search_sessions()] == ["q4", "q3"]
    store.close()


def test_sessions_expire(tmp_path):
    root = make_repo(tmp_path / "repo")
    (root / "context.toml").write_text("[sessions]\nexpire_after_hours = 0.0005\n")  # 1.8 s
    engine = Engine.open(str(root))
    try:
        engine.ensure_indexed()
        made = engine.search_knowledge(SearchRequest("invoice total")).session
        assert engine.get_search_results([made.session_id]).sessions[0].expires_at
        assert [s.session_id for s in engine.list_search_results().sessions] == [
            made.session_id]
        time.sleep(2.0)
        assert engine.list_search_results().sessions == ()
        with pytest.raises(UsageError, match="expire after 0.0005 h"):
            engine.get_search_results([made.session_id])
    finally:
        engine.close()


@pytest.mark.parametrize("text, ascii_only, expected", [
    ("../../etc/passwd", False, "etc_passwd"),
    ("Report: Q3 / results.md", False, "Report_Q3_results"),
    (".hidden", False, "hidden"),
    ("日本語の調査", False, "日本語の調査"),
    ("日本語の調査", True, ""),
    ("Größe café", True, "Grosse_cafe"),
    ("a" * 200, False, "a" * 80),
])
def test_file_names_are_sanitised(text, ascii_only, expected):
    assert sanitise(text, ascii_only) == expected


def test_citations_are_checked_against_the_file(tmp_path):
    root = make_repo(tmp_path / "repo")
    (tmp_path / "outside.py").write_text("x = 1\n")
    (root / "src" / "link.py").symlink_to(tmp_path / "outside.py")
    resolver = CitationResolver(root, max_quote_lines=2)
    cited = resolver.resolve_all({"sections": [
        {"file": "src/billing/tax.py", "start_line": 1, "end_line": 3},
        {"file": (root / "src/billing/tax.py").as_uri(), "start_line": 1, "end_line": 3},
        {"file": "src/billing/invoice.py", "quote": "class InvoiceMailer:"},
        {"file": "src/link.py", "start_line": 1},
    ], "other": ["plain", 1]})
    tax, same, mailer, escaped = cited["sections"]
    assert tax["quote"] == 'def vat(amount: float, rate: float = 0.2) -> float:\n' \
                           '    """Value added tax on an amount."""\n…'
    assert tax["link"] == f"[src/billing/tax.py:1-3]({(root / 'src/billing/tax.py').as_uri()}#L1-L3)"
    assert same["number"] == tax["number"] == 1 and mailer["number"] == 2
    assert (mailer["start_line"], mailer["end_line"], mailer["location"]) == (
        9, 9, "src/billing/invoice.py:9")
    assert escaped == {"file": "src/link.py", "start_line": 1}
    assert cited["other"] == ["plain", 1]
    assert len(resolver.check.references) == 2
    assert resolver.check.errors == ["sections[3].file: src/link.py is outside the project "
                                     f"root {root.resolve()}"]


def test_documents_are_cited_by_page(tmp_path):
    root = make_repo(tmp_path / "repo")
    (root / "docs" / "manual.pdf").write_bytes(b"%PDF-1.7\n\0\0binary")
    resolver = CitationResolver(root, max_quote_lines=5)
    cited = resolver.resolve_all({"sections": [
        {"file": "docs/manual.pdf", "pages": [3, 4], "quote": "Refunds take 14 days."},
        {"file": "docs/manual.pdf", "start_line": 2}]})
    page, lines = cited["sections"]
    assert page["location"] == "docs/manual.pdf p.3-4"
    assert page["uri"].endswith("docs/manual.pdf#page=3") and page["quote"]
    assert lines == {"file": "docs/manual.pdf", "start_line": 2}
    assert resolver.check.errors == ["sections[1]: docs/manual.pdf is not a text file; cite "
                                     "it by pages"]
