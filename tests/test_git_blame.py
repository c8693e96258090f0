"""git_history blame (issue 14) in a real git repository made in a temp dir:
a hit names the last change of its lines (commit, author, subject) with that change's diff,
and carries only the commits that changed those lines."""

from __future__ import annotations

import pytest

from golden import git
from contextd import ContextModule
from contextd.providers.blame import parse_porcelain
from contextd.query.records import QueryRequest

LEXER_V1 = '''\
def tokenize(text):
    """Split source text into tokens."""
    return text.split(" ")


def parse_number(token):
    """Read an integer literal."""
    return int(token)
'''

LEXER_V2 = LEXER_V1.replace('return text.split(" ")', "return text.replace(\"\\t\", \" \").split(\" \")")

LEXER_V3 = LEXER_V2.replace("    return int(token)\n", """\
    if token.startswith("-"):
        return -int(token[1:])
    return int(token)
""")

GIT_AUTHORS = {"Ada": "ada@example.com", "Grace": "grace@example.com"}


def _commit(root, author: str, message: str, day: int) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "--author", f"{author} <{GIT_AUTHORS[author]}>",
        "--date", f"2026-01-{day:02d}T12:00:00", "-m", message)


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    root = tmp_path_factory.mktemp("blame") / "repo"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "src" / "lexer.py").write_text(LEXER_V1)
    _commit(root, "Ada", "Initial lexer", 1)
    (root / "src" / "lexer.py").write_text(LEXER_V2)
    _commit(root, "Ada", "Handle tabs when splitting on whitespace in tokenize", 2)
    (root / "src" / "lexer.py").write_text(LEXER_V3)
    _commit(root, "Grace", "Parse negative numbers in parse_number", 3)
    module = ContextModule.open(str(root))
    yield module
    module.shutdown()


def _history(module, text: str):
    return module.query(QueryRequest(text, providers=("git_history",), wait_for_model=True)).hits


def test_a_hit_names_the_last_change_of_its_lines_with_its_diff(module):
    hits = _history(module, "Parse negative numbers")
    hit = next(h for h in hits if h.file_path == "src/lexer.py")
    assert hit.label == "parse_number"
    blame = hit.metadata["blame"]
    assert blame["last_change"]["subject"] == "Parse negative numbers in parse_number"
    assert blame["last_change"]["author"] == "Grace"
    # The function's lines: three from Grace's change, the rest from the initial import.
    assert sum(entry["lines"] for entry in blame["line_commits"]) == \
        hit.end_line - hit.start_line + 1
    assert len(blame["line_commits"]) == 2
    assert "+    if token.startswith(\"-\"):" in hit.metadata["recent_change"]["diff"]
    assert [c["subject"] for c in hit.metadata["commits"]] == [
        "Parse negative numbers in parse_number"]


def test_commits_that_did_not_touch_the_lines_are_not_attached(module):
    # Both commit messages match, so the file is found through both; the hit is one function
    # and only the commit that changed that function's lines is attached to it.
    hits = _history(module, "tabs tokenize negative numbers")
    hit = next(h for h in hits if h.file_path == "src/lexer.py")
    subjects = [c["subject"] for c in hit.metadata["commits"]]
    expected = {"tokenize": ["Handle tabs when splitting on whitespace in tokenize"],
                "parse_number": ["Parse negative numbers in parse_number"]}[hit.label]
    assert subjects == expected


def test_porcelain_parsing_repeats_commit_details_per_line():
    sha = "a" * 40
    text = (f"{sha} 1 1 2\nauthor Ada\nauthor-time 1700000000\nsummary First\nfilename x.py\n"
            f"\tline one\n{sha} 2 2\n\tline two\n")
    changes = parse_porcelain(text)
    assert [(c.sha, c.author, c.timestamp, c.subject) for c in changes] == [
        (sha, "Ada", 1700000000, "First")] * 2
