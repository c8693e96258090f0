"""Retrieval precision (issue 14) on real code: names as written (``_split_opt``,
``Client.#retryDelay``), no header-only chunks, heading-only Markdown sections joined, matched
lines as previews, absolute scores with a "no strong match" note and a working ``min_score``,
file roles in hits and as a scope, and query intent ranking source first.

The project is a temporary directory holding real files: click's option parser (installed
with contextd), the standard library's argparse, a JavaScript class with private methods,
documentation and a test, indexed once by the real indexer with the real embedding model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import click.parser
import pytest

from contextd.chunkers.chunking import chunk_file
from contextd.cli.query_cmds import preview
from contextd.config.sections import ContextConfig, RankingConfig
from contextd.errors import UsageError
from contextd.query.intent import QueryIntent, classify
from contextd import ContextModule
from contextd.providers.symbol import extract_candidates
from contextd.query.records import QueryRequest
from contextd.query.understanding import apply_boosts, boost_factor, understand
from contextd.records import ContextScope, ContextSnippet
from contextd.boundary.roles import FileRole, file_role

ARGPARSE = Path(sysconfig.get_paths()["stdlib"]) / "argparse.py"

CLIENT_JS = """\
export class Client {
    #retries = 3;

    constructor(options) {
        this.options = options;
    }

    // Exponential backoff: each retry waits twice as long as the previous one.
    #retryDelay(attempt) {
        const base = this.options.backoffFactor ?? 0.3;
        return Math.min(base * 2 ** attempt, 30) * 1000;
    }

    async request(url) {
        for (let attempt = 0; attempt <= this.#retries; attempt++) {
            try {
                return await fetch(url);
            } catch (error) {
                await new Promise((resolve) => setTimeout(resolve, this.#retryDelay(attempt)));
            }
        }
        throw new Error(`request to ${url} failed after retries`);
    }
}
"""

GUIDE_MD = """\
# Guide

## Retries

The client retries failed requests with an exponential backoff delay.
Set `backoffFactor` to change how long the retry delay grows.

# Reference
## Client
### request(url)

Fetches a URL, retrying on network errors.
"""

TEST_JS = """\
import { Client } from "../src/client.js";

test("retry delay grows exponentially", () => {
    const client = new Client({ backoffFactor: 1 });
    expect(client.request).toBeDefined();
});
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("precision") / "proj"
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "tests").mkdir()
    shutil.copy(click.parser.__file__, root / "src" / "parser.py")
    shutil.copy(ARGPARSE, root / "src" / "argparse_copy.py")
    (root / "src" / "client.js").write_text(CLIENT_JS)
    (root / "docs" / "guide.md").write_text(GUIDE_MD)
    (root / "tests" / "client.test.js").write_text(TEST_JS)
    return root


@pytest.fixture(scope="module")
def module(project):
    module = ContextModule.open(str(project))
    yield module
    module.shutdown()


def ask(module: ContextModule, text: str, **kwargs):
    return module.query(QueryRequest(text, wait_for_model=True, **kwargs))


# ----- names as written ----------------------------------------------------------------------
def test_candidates_keep_leading_underscore_hash_dollar_and_double_colon():
    candidates, _ = extract_candidates("why does _split_opt differ from Client.#retryDelay, "
                                       "$scope and Foo::bar", frozenset({".py"}), 12)
    texts = {c.text for c in candidates}
    assert {"_split_opt", "Client.#retryDelay", "#retryDelay", "$scope", "Foo.bar"} <= texts
    assert "split_opt" not in texts


@pytest.mark.parametrize("name, label", [("_split_opt", "_split_opt"),
                                         ("Client.#retryDelay", "Client.#retryDelay"),
                                         ("#retryDelay", "Client.#retryDelay")])
def test_symbol_provider_finds_names_as_written(module, name, label):
    answer = ask(module, name, providers=("symbol",))
    assert answer.hits, name
    assert answer.hits[0].label == label


# ----- chunk shape ---------------------------------------------------------------------------
def _header_only(text: str) -> bool:
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    return len(lines) == 1 and lines[0].startswith(("class ", "def ", "async def ")) \
        and lines[0].endswith(":")


def test_no_chunk_is_a_definition_header_alone_in_real_code():
    config = ContextConfig()
    for path in (ARGPARSE, Path(click.parser.__file__)):
        chunks = chunk_file(str(path), path.read_bytes(), config).chunks
        assert chunks
        assert not [c.label for c in chunks if _header_only(c.text)], path
    # argparse's BooleanOptionalAction is over the cap and has no docstring: its header goes
    # with its first member.
    chunks = chunk_file(str(ARGPARSE), ARGPARSE.read_bytes(), config).chunks
    first = next(c for c in chunks if c.text.lstrip().startswith("class BooleanOptionalAction"))
    assert "def __init__" in first.text
    assert {d.name for d in first.defines} >= {"BooleanOptionalAction",
                                               "BooleanOptionalAction.__init__"}


def test_heading_only_markdown_sections_join_their_content():
    chunks = chunk_file("docs/guide.md", GUIDE_MD.encode(), ContextConfig()).chunks
    for chunk in chunks:
        lines = [line for line in chunk.text.split("\n") if line.strip()]
        assert not all(line.startswith("#") for line in lines), chunk.text
    reference = next(c for c in chunks if "Fetches a URL" in c.text)
    assert reference.text.startswith("# Reference\n## Client\n### request(url)")
    assert reference.label == "Reference > Client > request(url)"


def test_preview_shows_the_lines_that_matched(module):
    answer = ask(module, "request failed after retries error", k=3)
    top = answer.hits[0]
    assert top.label == "Client.request"
    shown = preview(top)
    assert any("failed after retries" in line for _, line in shown)
    # Not simply the chunk's first lines: the throw is its second-last line.
    assert max(n for n, _ in shown) > top.start_line + 2


# ----- exact evidence ------------------------------------------------------------------------
def test_verbatim_docstring_puts_its_chunk_first(module):
    answer = ask(module, "It's modelled after optparse and brings a similar but vastly "
                         "simplified API.")
    top = answer.hits[0]
    assert top.file_path == "src/parser.py"
    assert "modelled after optparse" in top.snippet


# ----- confidence ----------------------------------------------------------------------------
def test_a_name_that_does_not_exist_gets_a_no_strong_match_note(module):
    missing = ask(module, "FrobnicateQuuxWidgetFactory")
    assert any(note.startswith("no strong match") for note in missing.notes)
    assert all(hit.score < 0.5 for hit in missing.hits)
    found = ask(module, "_normalize_opt")
    assert not any(note.startswith("no strong match") for note in found.notes)
    assert found.hits[0].label == "_normalize_opt" and found.hits[0].score >= 0.5
    assert found.hits[0].score > max((h.score for h in missing.hits), default=0.0)


def test_min_score_applies_to_calibrated_scores(module):
    assert ask(module, "FrobnicateQuuxWidgetFactory", min_score=0.5).hits == ()
    kept = ask(module, "_normalize_opt", min_score=0.5).hits
    assert kept and all(hit.score >= 0.5 for hit in kept)


# ----- roles and intent ----------------------------------------------------------------------
def test_file_roles_from_path_conventions_and_language():
    assert file_role("src/click/core.py", "python") is FileRole.SOURCE
    assert file_role("src/click/testing.py", "python") is FileRole.SOURCE
    assert file_role("tests/test_core.py", "python") is FileRole.TEST
    assert file_role("src/app.spec.ts", "typescript") is FileRole.TEST
    assert file_role("pkg/server_test.go", "go") is FileRole.TEST
    assert file_role("docs/conf.py", "python") is FileRole.DOC
    assert file_role("CHANGES.rst", "rst") is FileRole.DOC
    assert file_role("README", "") is FileRole.DOC
    assert file_role("pyproject.toml", "toml") is FileRole.CONFIG
    # Example folders named with a suffix (fastapi's docs_src/) show usage too.
    assert file_role("docs_src/handling_errors/tutorial001.py", "python") is FileRole.DOC
    assert file_role("examples-js/app.js", "javascript") is FileRole.DOC
    assert file_role("src/docstrings/parse.py", "python") is FileRole.SOURCE
    assert file_role(".github/workflows/ci.yml", "yaml") is FileRole.CONFIG


def test_hits_carry_roles_and_a_role_scope_keeps_only_those(module):
    answer = ask(module, "retry delay backoff")
    assert {h.role for h in answer.hits} >= {"source", "doc"}
    for hit in answer.hits:
        assert hit.role == file_role(hit.file_path, hit.language).value
    docs = ask(module, "retry delay backoff", scope=ContextScope(roles=("doc",)))
    assert docs.hits and {h.role for h in docs.hits} == {"doc"}
    with pytest.raises(UsageError, match="choose from: source, test, doc, config"):
        ask(module, "retry", scope=ContextScope(roles=("docs",)))


@pytest.mark.parametrize("query, intent", [
    ("Fix the retry delay growing without bound", QueryIntent.IMPLEMENTATION),
    ("Add a jitter to the backoff", QueryIntent.IMPLEMENTATION),
    # Commit subjects of a large project (wagtail) open with these verbs too.
    ("Exclude items in descendants of private collections", QueryIntent.IMPLEMENTATION),
    ("Normalize rich_text_schema result to envelope format", QueryIntent.IMPLEMENTATION),
    ("Align document API fields with images", QueryIntent.IMPLEMENTATION),
    # The area a commit title names before its verb (prometheus, the Linux kernel's style).
    ("tsdb: fix the stale series eviction", QueryIntent.IMPLEMENTATION),
    ("cmd/promtool: Add a flag for the push url path", QueryIntent.IMPLEMENTATION),
    ("v3 API: remove the markdown format", QueryIntent.IMPLEMENTATION),
    ("revert(250e019): undo sanitization in QueryBuilder", QueryIntent.IMPLEMENTATION),
    ("tsdb: stale series eviction", QueryIntent.NEUTRAL),
    ("where is the retry delay computed", QueryIntent.IMPLEMENTATION),
    ("how are timeouts configured", QueryIntent.IMPLEMENTATION),
    ("the retry delay should not exceed 30 seconds", QueryIntent.IMPLEMENTATION),
    ("how do I change the retry delay", QueryIntent.USAGE),
    ("how to configure retries", QueryIntent.USAGE),
    ("retry delay", QueryIntent.NEUTRAL),
])
def test_query_intent_from_wording(query, intent):
    assert classify(query, about_tests=False) is intent


def test_boosts_of_no_candidates_for_a_quotation_are_none():
    query = understand("It's modelled after optparse and brings a similar API.", RankingConfig())
    assert query.exact.phrases
    assert apply_boosts([], query, RankingConfig()) == []


def test_intent_decides_whether_docs_and_tests_step_back():
    settings = RankingConfig()

    def snippet(path: str, language: str) -> ContextSnippet:
        return ContextSnippet("c", 0.5, path, "", "PARAGRAPH", "text", language, 1, 2, 3)

    doc, test = snippet("docs/guide.md", "markdown"), snippet("tests/a.test.js", "javascript")
    change = understand("Fix the retry delay growing without bound", settings)
    usage = understand("how do I change the retry delay", settings)
    about_tests = understand("test for the retry delay", settings)
    assert boost_factor(doc, change, settings) == settings.implementation_doc_factor
    assert boost_factor(doc, usage, settings) == 1.0
    assert boost_factor(test, about_tests, settings) == 1.0


def test_where_is_it_implemented_ranks_source_first(module):
    answer = ask(module, "where is the delay between retries computed", k=5)
    assert answer.hits[0].role == "source"
    assert answer.hits[0].file_path == "src/client.js"


# ----- the CLI, as a user runs it --------------------------------------------------------------
def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_cli_role_filter_and_matched_line_preview(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "src" / "client.js").write_text(CLIENT_JS)
    (tmp_path / "docs" / "guide.md").write_text(GUIDE_MD)
    docs = _cli(tmp_path, "query", "retry delay backoff", "--role", "doc", "--json")
    assert docs.returncode == 0, docs.stderr
    hits = json.loads(docs.stdout)["hits"]
    assert hits and {h["role"] for h in hits} == {"doc"}
    listing = _cli(tmp_path, "query", "request failed after retries error", "--k", "1")
    assert listing.returncode == 0, listing.stderr
    assert "(source)" in listing.stdout
    assert "failed after retries" in listing.stdout
    wrong = _cli(tmp_path, "query", "retry", "--role", "docs")
    assert wrong.returncode == 2 and "docs" in wrong.stderr
