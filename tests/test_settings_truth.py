"""Every key of context.toml does what its comment says (issue 30).

One test walks every documented key (the config dataclasses, the repository's context.toml and
the file ``contextd init`` writes) and proves each is read by the code or removed with a
migration note; the others set the keys the audit found lying and show the behaviour change
through the real surfaces (the CLI in a subprocess, the Python module on a real index).
tests/test_settings_effects.py walks the same keys and proves each one changes behaviour.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import tomli

from contextd.config import sections
from contextd.config.loading import REMOVED_KEYS, SPEC_ALIASES, load_config

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "contextd"


def contextd(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, CONTEXTD_LOAD_PLUGINS="", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env,
                          cwd=root, timeout=180)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def project(tmp_path: Path, files: dict[str, str], config: str = "") -> Path:
    root = tmp_path / "proj"
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if config:
        (root / "context.toml").write_text(config)
    return root


# ----- the walk over every documented key -------------------------------------------------

def _dotted(table: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        out |= _dotted(value, dotted + ".") if isinstance(value, dict) and key != "options" \
            else {dotted}
    return out


def _section_fields() -> dict[str, type]:
    """Section name -> dataclass of its keys (a map section by its value type)."""
    out = {}
    for name, fld in sections.SECTIONS.items():
        value = fld.default_factory()
        if isinstance(value, dict):
            out[name] = {"chunking": sections.LanguageChunking,
                         "providers": sections.ProviderConfig,
                         "projects": sections.ProjectScopeConfig}[name]
        else:
            out[name] = type(value)
    return out


def _names_read_by_code() -> set[str]:
    """Attribute names read anywhere in the package outside the config loader itself."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "config":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                names.add(node.attr)
    return names


def documented_keys() -> dict[str, set[str]]:
    """Dotted keys (map sections shown as ``chunking.*.key``) of each place keys are
    documented: the dataclasses, the repository's context.toml, ``contextd init``'s file."""
    from contextd.cli.boundary_cmds import render_documented_config

    def starred(keys: set[str]) -> set[str]:
        out = set()
        for key in keys:
            parts = key.split(".")
            if parts[0] in ("chunking", "providers", "projects") and len(parts) == 3:
                parts[1] = "*"
            out.add(".".join(parts))
        return out

    dataclass_keys = {f"{sec}.*.{f.name}" if sec in ("chunking", "providers", "projects")
                      else f"{sec}.{f.name}"
                      for sec, cls in _section_fields().items()
                      for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    repo = tomli.loads((REPO / "context.toml").read_text())
    init = tomli.loads(render_documented_config())
    return {"sections.py": dataclass_keys, "context.toml": starred(_dotted(repo)),
            "init": starred(_dotted(init))}


# Keys only third-party code reads (test_provider_options_reach_a_third_party_provider).
READ_BY_PLUGINS = {"providers.*.options"}


def test_provider_options_reach_a_third_party_provider(tmp_path):
    from contextd.config.project import Project
    from contextd.providers.base import ContextProvider, ProviderContext
    from contextd.store.duckdb import DuckDBStore

    root = project(tmp_path, {}, "[providers.tickets]\noptions = { url = \"http://t\" }\n")
    proj = Project.open(root)

    class Tickets(ContextProvider):
        id = "tickets"

    provider = Tickets()
    store = DuckDBStore(proj.db_path)
    try:
        provider.initialize(ProviderContext(proj, proj.config, store, None))
        assert provider.settings.options == {"url": "http://t"}
    finally:
        store.close()


def test_every_documented_key_is_read_by_the_code_or_removed_with_a_migration_note(tmp_path):
    keys = documented_keys()
    # The two files document exactly the dataclasses' keys (projects.* is shown commented).
    expected = keys["sections.py"] - {k for k in keys["sections.py"] if k.startswith("projects")}
    assert keys["context.toml"] == expected, keys["context.toml"] ^ expected
    assert keys["init"] == expected, keys["init"] ^ expected
    read = _names_read_by_code()
    unread = sorted(k for k in keys["sections.py"] if k.rsplit(".", 1)[1] not in read
                    and k not in READ_BY_PLUGINS)
    assert unread == [], f"keys nothing reads (make them work or move them to REMOVED_KEYS): {unread}"
    # The repository's file and init's load without a single note (no key without effect).
    assert load_config(REPO / "context.toml").notes == ()
    contextd(tmp_path, "init")
    assert load_config(tmp_path / "context.toml").notes == ()
    # A removed key still loads, with its one-line migration message naming the replacement.
    for (section, key), message in REMOVED_KEYS.items():
        (tmp_path / "context.toml").write_text(f"[{section}]\n{key} = 5\n")
        checked = json.loads(contextd(tmp_path, "--json", "validate-config").stdout)
        assert checked["valid"] is True
        assert [w["message"] for w in checked["warnings"] if w["key"] == f"{section}.{key}"] \
            == [message]
        assert "\n" not in message and "removed" in message


SPEC_004_FILE = """\
# context.toml with the other spellings of keys that loading accepts with a note
[context]
enabled = true
mode = "embedded"
fallback_enabled = true

[context.engine]
host = "localhost"
port = 9090
timeout_ms = 5000
retry_attempts = 3

[context.storage]
db_path = "./context.duckdb"
backup_enabled = false
backup_interval_hours = 24

[context.watcher]
enabled = true
debounce_ms = 500
watch_paths = ["auto"]
ignore_patterns = [".git", "node_modules", "build", "dist", ".venv", "target"]
max_file_size_mb = 1
use_gitignore = true
use_contextignore = true
use_dockerignore = true

[context.indexing]
allowed_extensions = [".kt", ".py", ".ts", ".md", ".yaml", ".txt"]
blocked_extensions = [".exe", ".bin", ".jpg", ".zip"]
warn_file_size_mb = 0.5
size_exceptions = ["docs/api-reference.md"]
follow_symlinks = false
max_symlink_depth = 3
binary_detection = "mime"
binary_threshold = 30

[context.embedding]
model = "sentence-transformers/all-MiniLM-L6-v2"
dimension = 384
batch_size = 128
normalize = true
cache_enabled = true

[context.chunking.markdown]
max_tokens = 400
split_by_headings = true
preserve_code_blocks = true

[context.chunking.python]
max_tokens = 600
split_by_function = true
overlap_percent = 15
preserve_docstrings = true

[context.chunking.kotlin]
max_tokens = 600
split_by_class = true
split_by_function = true
preserve_kdoc = false

[context.chunking.typescript]
max_tokens = 600
split_by_export = true
preserve_jsdoc = false

[context.query]
default_k = 12
mmr_lambda = 0.5
min_score_threshold = 0.3
rerank_enabled = true

[context.budget]
default_max_tokens = 1500
reserve_for_prompt = 500
warn_threshold_percent = 80

[context.providers.semantic]
enabled = true
weight = 0.6

[context.providers.symbol]
enabled = true
weight = 0.3
index_ast = true

[context.providers.full_text]
enabled = false
weight = 0.1

[context.providers.git_history]
enabled = true
weight = 0.2
max_commits = 100

[context.providers.hybrid]
enabled = true
combines = ["semantic", "symbol", "git_history"]
fusion_strategy = "rrf"

[context.metrics]
enabled = true
track_latency = true
track_token_usage = true
track_cache_hits = true
export_interval_minutes = 5

[context.bootstrap]
enabled = true
parallel_workers = 7
batch_size = 128
priority_extensions = [".kt", ".py", ".ts", ".java", ".md"]
max_initial_files = 0
fail_fast = false
show_progress = true
progress_interval_seconds = 30

[context.security]
scrub_secrets = true
secret_patterns = ["password\\\\s*=\\\\s*.*"]
encrypt_db = false
"""


def test_a_context_toml_in_other_spellings_loads_with_a_note_per_alias(tmp_path):
    root = project(tmp_path, {"a.py": "x = 1\n"}, SPEC_004_FILE)
    config = load_config(root / "context.toml")
    assert config.indexing.max_file_size_mb == 1
    assert config.chunking["kotlin"].preserve_docstrings is False
    assert config.chunking["typescript"].preserve_docstrings is False
    assert config.indexing.binary_detection == "mime"
    assert config.core.mode == "embedded"
    checked = json.loads(contextd(root, "--json", "validate-config").stdout)
    assert checked["valid"] is True, checked["errors"]
    noted = {w["key"]: w["message"] for w in checked["warnings"]}
    assert noted["context.chunking.kotlin.preserve_kdoc"] == \
        "another spelling of chunking.kotlin.preserve_docstrings; accepted"
    assert noted["context.watcher.max_file_size_mb"] == \
        "another spelling of indexing.max_file_size_mb; accepted"
    assert noted["context.enabled"] == "another spelling of core.enabled; accepted"
    assert noted["context.metrics.export_interval_minutes"].startswith("removed: ")
    assert {k for k, _ in SPEC_ALIASES} <= {"chunking", "watcher"}


def test_ours_wins_over_another_spelling_given_too(tmp_path):
    root = project(tmp_path, {}, "[watcher]\nmax_file_size_mb = 1\n"
                                 "[indexing]\nmax_file_size_mb = 3\n")
    config = load_config(root / "context.toml")
    assert config.indexing.max_file_size_mb == 3
    assert [n.message for n in config.notes] == [
        "ignored: indexing.max_file_size_mb is set too, and wins"]


def test_a_provider_key_on_the_wrong_provider_is_noted(tmp_path):
    root = project(tmp_path, {}, "[providers.semantic]\nindex_ast = false\n")
    assert [(n.key, n.message) for n in load_config(root / "context.toml").notes] == [
        ("providers.semantic.index_ast",
         "has no effect here: index_ast applies to [providers.symbol] only")]


# ----- the keys that lied, one by one -----------------------------------------------------

def test_bootstrap_disabled_leaves_the_index_empty_until_refresh(tmp_path):
    root = project(tmp_path, {"src/app.py": "def alpha(x):\n    return x + 1\n"},
                   "[bootstrap]\nenabled = false\n")
    answer = json.loads(contextd(root, "--json", "query", "alpha").stdout)
    assert answer["hits"] == []
    assert any("bootstrap.enabled = false" in n for n in answer["notes"])
    report = json.loads(contextd(root, "--json", "refresh").stdout)
    assert report["files_indexed"] == 2  # src/app.py and context.toml
    answer = json.loads(contextd(root, "--json", "query", "alpha").stdout)
    assert [h["file_path"] for h in answer["hits"]] == ["src/app.py"]


def test_bootstrap_enabled_indexes_at_the_first_query(tmp_path):
    root = project(tmp_path, {"src/app.py": "def alpha(x):\n    return x + 1\n"})
    answer = json.loads(contextd(root, "--json", "query", "alpha").stdout)
    assert [h["file_path"] for h in answer["hits"]] == ["src/app.py"]


def _embedding_rounds(tmp_path: Path, batch_size: int) -> tuple[int, int]:
    from contextd.config.project import Project
    from contextd.indexer import Indexer
    from contextd.indexer.progress import Progress
    from contextd.store.duckdb import DuckDBStore

    files = {f"m{i}.py": f"def f{i}(x):\n    return x * {i}\n" for i in range(40)}
    root = project(tmp_path, files, f"[bootstrap]\nbatch_size = {batch_size}\n")

    class Rounds(Progress):
        count = 0

        def embedding(self, done: int, pending: int) -> None:
            if done:
                Rounds.count += 1

    proj = Project.open(root)
    indexer = Indexer(proj, DuckDBStore(proj.db_path), embed=True)
    try:
        report = indexer.ensure_indexed(progress=Rounds())
        assert report.mode == "bootstrap"
    finally:
        indexer.store.close()
    return Rounds.count, report.chunks_embedded


def test_bootstrap_batch_size_sets_the_embedding_rounds_of_a_bootstrap(tmp_path):
    # A round is batch_size x 8 texts: 41 chunks (40 functions and context.toml) take 6
    # rounds at batch_size 1, one at 128.
    assert _embedding_rounds(tmp_path / "small", 1) == (6, 41)
    assert _embedding_rounds(tmp_path / "large", 128) == (1, 41)


@pytest.mark.parametrize("mode, indexed", [("content", True), ("extension", True),
                                           ("mime", False), ("all", False)])
def test_binary_detection_mime_reads_the_magic_number(tmp_path, mode, indexed):
    # A PDF whose first 8 KB are plain text: only its magic number says it is binary.
    root = project(tmp_path, {"notes.txt": "%PDF-1.4\n" + "1 0 obj << /Type /Catalog >>\n" * 50},
                   f'[indexing]\nbinary_detection = "{mode}"\n')
    checked = json.loads(contextd(root, "--json", "check-file", "notes.txt",
                                  check=False).stdout)
    assert checked["indexable"] is indexed
    if not indexed:
        assert checked["detail"] == "PDF document (magic number)"


def test_a_text_file_starting_like_a_signature_stays_text(tmp_path):
    root = project(tmp_path, {"MZ.txt": "MZ is a prefix, and this is prose.\n"},
                   '[indexing]\nbinary_detection = "mime"\n')
    assert json.loads(contextd(root, "--json", "check-file", "MZ.txt").stdout)["indexable"]


TS_FILE = """\
/** Settings of the app. */
export const CONFIG = {
  retries: 3,
  backoff: 200,
};

/**
 * Adds two numbers.
 */
export function add(a: number, b: number): number {
  return a + b;
}
"""


def _chunks(tmp_path: Path, config: str) -> list[dict]:
    root = project(tmp_path, {"src/lib.ts": TS_FILE}, config)
    return json.loads(contextd(root, "--json", "chunks", "src/lib.ts").stdout)["chunks"]


def test_split_by_export_makes_an_exported_value_its_own_chunk(tmp_path):
    on = _chunks(tmp_path / "on", "")
    off = _chunks(tmp_path / "off", "[chunking.typescript]\nsplit_by_export = false\n")
    assert "CONFIG" in [c["label"] for c in on]
    assert "CONFIG" not in [c["label"] for c in off]
    assert "add" in [c["label"] for c in off]


def test_preserve_jsdoc_keeps_the_doc_comment_in_the_function_chunk(tmp_path):
    kept = next(c for c in _chunks(tmp_path / "on", "") if c["label"] == "add")
    off = _chunks(tmp_path / "off", "[chunking.typescript]\npreserve_jsdoc = false\n")
    left = next(c for c in off if c["label"] == "add")
    assert kept["start_line"] == 7 and left["start_line"] == 10


@pytest.mark.slow
def test_index_ast_false_leaves_the_symbol_provider_out(tmp_path):
    files = {"src/app.py": "class RetryPolicy:\n    def backoff(self):\n        return 2\n"}
    on = project(tmp_path / "on", files)
    hits = json.loads(contextd(on, "--json", "query", "RetryPolicy", "--provider",
                               "symbol").stdout)["hits"]
    assert hits and hits[0]["file_path"] == "src/app.py"
    off = project(tmp_path / "off", files, "[providers.symbol]\nindex_ast = false\n")
    answer = json.loads(contextd(off, "--json", "query", "RetryPolicy", "--provider",
                                 "symbol").stdout)
    assert answer["hits"] == []
    stats = json.loads(contextd(off, "--json", "stats").stdout)
    symbol = next(p for p in stats["providers"] if p["id"] == "symbol")
    assert symbol["available"] is False


def _usage(tmp_path: Path, config: str, columns: str, queries: int = 1) -> list[tuple]:
    """usage_metrics ``columns`` after ``queries`` identical queries through the module."""
    from contextd import ContextModule
    from contextd.query.records import QueryRequest

    root = project(tmp_path, {"src/app.py": "def alpha(x):\n    return x + 1\n"}, config)
    module = ContextModule.open(str(root))
    try:
        for _ in range(queries):
            module.query(QueryRequest("where is alpha computed", wait_for_model=True))
        module.pipeline.usage.flush()
        db = module.project.db_path
    finally:
        module.shutdown()
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(f"SELECT {columns} FROM usage_metrics ORDER BY metric_id").fetchall()


def _cache_hits(tmp_path: Path, config: str) -> list:
    return [row[0] for row in _usage(tmp_path, config, "cache_hits", queries=2)]


def test_cache_hits_count_the_query_vector_cache(tmp_path):
    assert _cache_hits(tmp_path / "on", "") == [0, 1]
    assert _cache_hits(tmp_path / "nocache", "[embedding]\ncache_enabled = false\n") == \
        [None, None]
    assert _cache_hits(tmp_path / "untracked", "[metrics]\ntrack_cache_hits = false\n") == \
        [None, None]


def test_a_disabled_provider_is_not_combined_by_the_hybrid(tmp_path):
    files = {"src/app.py": "class RetryPolicy:\n    def backoff(self):\n        return 2\n"}
    on = project(tmp_path / "on", files)
    found = {p for h in json.loads(contextd(on, "--json", "query", "RetryPolicy").stdout)["hits"]
             for p in h["providers"]}
    assert "symbol" in found
    off = project(tmp_path / "off", files, "[providers.symbol]\nenabled = false\n"
                                           "[providers.full_text]\nenabled = false\n")
    hits = json.loads(contextd(off, "--json", "query", "RetryPolicy").stdout)["hits"]
    assert hits and not {p for h in hits for p in h["providers"]} & {"symbol", "full_text"}


def _usage_rows(tmp_path: Path, config: str) -> list[tuple]:
    return _usage(tmp_path, config, "context_tokens, query_latency_ms")


def test_metrics_switches(tmp_path):
    [(tokens, latency)] = _usage_rows(tmp_path / "on", "")
    assert tokens > 0 and latency > 0
    assert _usage_rows(tmp_path / "off", "[metrics]\nenabled = false\n") == []
    assert _usage_rows(tmp_path / "quiet", "[metrics]\ntrack_latency = false\n"
                                           "track_token_usage = false\n") == [(0, 0.0)]


def test_use_dockerignore_applies_the_dockerignore(tmp_path):
    files = {"fixtures/big.txt": "recorded traffic\n", ".dockerignore": "fixtures\n"}
    off = project(tmp_path / "off", files)
    assert json.loads(contextd(off, "--json", "check-file", "fixtures/big.txt").stdout
                      )["indexable"] is True
    on = project(tmp_path / "on", files, "[watcher]\nuse_dockerignore = true\n")
    checked = json.loads(contextd(on, "--json", "check-file", "fixtures/big.txt",
                                  check=False).stdout)
    assert (checked["indexable"], checked["reason"]) == (False, "dockerignore")


@pytest.mark.slow
def test_min_score_threshold_cuts_the_final_scores_unless_the_query_sets_its_own(tmp_path):
    files = {"src/retry.py": "def retry_backoff(attempt):\n    \"\"\"Retry backoff.\"\"\"\n"
                             "    return 2 ** attempt\n",
             "docs/notes.md": "# Notes\n\nMeeting notes about lunch.\n"}
    low = project(tmp_path / "low", files)
    every = json.loads(contextd(low, "--json", "query", "retry backoff").stdout)["hits"]
    assert any(h["score"] < 0.9 for h in every)
    high = project(tmp_path / "high", files, "[query]\nmin_score_threshold = 0.9\n")
    kept = json.loads(contextd(high, "--json", "query", "retry backoff").stdout)["hits"]
    assert kept and all(h["score"] >= 0.9 for h in kept) and len(kept) < len(every)
    own = json.loads(contextd(high, "--json", "query", "retry backoff", "--min-score",
                              "0.01").stdout)["hits"]
    assert len(own) > len(kept)
