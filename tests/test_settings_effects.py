"""Every documented context.toml key changes what contextd does, or is refused (issue 30).

:data:`EFFECTS` holds one entry per documented key (``documented_keys()`` of
test_settings_truth: the dataclasses, the repository's context.toml, ``contextd init``'s file;
map sections as ``chunking.*.x``, ``providers.*.x``, ``projects.*.x``): a non-default value and
a *probe*. A probe builds the real component from a configuration loaded from a context.toml on
disk (the boundary over a real tree, the chunker, the query pipeline over a real DuckDB index,
the LLM contextualizer against a local HTTP server, the service client, the owner's store...)
and returns what it observably does: which files it keeps, where chunks start, the hits and
their order, the request it sends, the error it raises. The walk asserts
``probe(default) != probe(changed)`` for each key; a second test asserts the table covers
exactly the documented keys, so a key added without a probe fails.

Probes never read a setting back from the configuration: a key that only lands in a dataclass
proves nothing. Both configurations of a key share its entry's ``base`` (the settings that make
the key matter, e.g. ``strategy = "llm"`` for the LLM keys), so the key alone differs.

Shared, cheap fixtures: one lexically indexed project (no model) for the query keys, one tree
for the boundary keys, one small stash for the memory keys (the bundled model, offline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import settings_probes
from contextd.errors import ConfigError
from contextd.text.tokens import estimate_tokens
from settings_probes import (
    boundary, budget_log, chunks_probe, Effect, files_probe, index_texts, key_parts, LEXICAL,
    llm_base, llm_cost, llm_key_header, llm_outcome, llm_parallel, llm_prompt_size, llm_request,
    llm_server, loaded, LONG_PYTHON, MANY_LINES, MARKDOWN, merged, notes_probe, projects_probe,
    quality, query_probe, Shared, slow_provider_probe, task_probe, third_party_options, TS_FILE,
    usage_flags,
)
from settings_probes_runtime import (
    backups, chunk_texts, cli_progress, command_handoff, command_handoff_past_the_floor,
    debounce, embedder_outcome, embedder_settings, embedding_rounds, idle_exit, indexed, indexed_paths, key_file,
    knowledge_adds, leaves_warm_owner, local_route, MEDIUM_FILES, opened_module, opened_store,
    owner_duties, owner_memory, pdf_pages, postgres_url, query_cache_hits, query_limits, rate_limit_waits, remote_base,
    remote_client, remote_part, retrieved, self_signed_pair, service_client, service_part,
    sessions, shared_workspace, stash_fresh, tools, ui, unused_port, vector_norm, workers,
    written_report,
)
from test_settings_truth import documented_keys


@pytest.fixture(scope="module", autouse=True)
def shared(tmp_path_factory):
    """The fixtures the probes share, built on first use, closed after the module."""
    settings_probes.SHARED = Shared(tmp_path_factory.mktemp("shared"))
    yield settings_probes.SHARED
    for close in reversed(settings_probes.SHARED.closers):
        close()
    settings_probes.SHARED = None


# ===== the table ==========================================================================

IMPLEMENT = "implement the retry backoff of the client"

EFFECTS: dict[str, Effect] = {
    # ----- [core]
    "core.enabled": Effect(False, query_probe("retry backoff"), base=LEXICAL),
    "core.fallback_enabled": Effect(False, task_probe({"title": "retry backoff",
                                                        "languages": ["cobol"]}), base=LEXICAL),
    # ----- [watcher] (boundary part)
    "watcher.watch_paths": Effect(["src"], boundary),
    "watcher.ignore_patterns": Effect(["*.txt"], boundary),
    "watcher.use_gitignore": Effect(False, boundary),
    "watcher.use_contextignore": Effect(False, boundary),
    "watcher.use_dockerignore": Effect(True, boundary),
    # ----- [indexing]
    "indexing.allowed_extensions": Effect([".py", ".custom"], boundary),
    "indexing.blocked_extensions": Effect([".py"], boundary),
    "indexing.max_file_size_mb": Effect(0.001, boundary),
    "indexing.warn_file_size_mb": Effect(0.001, boundary),
    "indexing.size_exceptions": Effect(["medium.txt"], boundary,
                                       base={"indexing": {"max_file_size_mb": 0.001}}),
    "indexing.follow_symlinks": Effect(True, boundary),
    "indexing.max_symlink_depth": Effect(0, boundary,
                                         base={"indexing": {"follow_symlinks": True}}),
    "indexing.binary_detection": Effect("content", boundary),
    "indexing.binary_threshold": Effect(10, boundary),
    # ----- [chunking.LANGUAGE]
    "chunking.*.max_tokens": Effect(32, chunks_probe("billing.py", LONG_PYTHON),
                                    table="chunking.python"),
    "chunking.*.overlap_percent": Effect(50, chunks_probe("ledger.py", MANY_LINES),
                                         table="chunking.python",
                                         base={"chunking.python": {"max_tokens": 64}}),
    "chunking.*.split_by_headings": Effect(False, chunks_probe("setup.md", MARKDOWN),
                                           table="chunking.markdown"),
    "chunking.*.preserve_code_blocks": Effect(False, chunks_probe("setup.md", MARKDOWN),
                                              table="chunking.markdown"),
    "chunking.*.split_by_function": Effect(False, chunks_probe("billing.py", LONG_PYTHON),
                                           table="chunking.python"),
    "chunking.*.split_by_class": Effect(False, chunks_probe("billing.py", LONG_PYTHON),
                                        table="chunking.python",
                                        base={"chunking.python": {"max_tokens": 64}}),
    "chunking.*.split_by_export": Effect(False, chunks_probe("lib.ts", TS_FILE),
                                         table="chunking.typescript"),
    "chunking.*.preserve_docstrings": Effect(False, chunks_probe("lib.ts", TS_FILE),
                                             table="chunking.typescript"),
    # ----- [contextualizer]
    "contextualizer.strategy": Effect("none", index_texts),
    "contextualizer.max_prefix_tokens": Effect(8, index_texts),
    "contextualizer.llm_api": Effect("ollama", llm_request, base=llm_base()),
    "contextualizer.llm_endpoint": Effect(lambda: llm_server().url + "/proxy", llm_request,
                                          base=llm_base()),
    "contextualizer.llm_model": Effect("other-model", llm_request, base=llm_base()),
    "contextualizer.llm_api_key_env": Effect("EFFECTS_LLM_KEY", llm_key_header,
                                             base=llm_base()),
    "contextualizer.llm_timeout_s": Effect(0.2, llm_outcome,
                                           base=llm_base(llm_model="slow-0.6")),
    "contextualizer.llm_concurrency": Effect(1, llm_parallel,
                                             base=llm_base(llm_model="slow-0.3")),
    "contextualizer.llm_max_retries": Effect(0, llm_outcome, base=llm_base(min_words=80)),
    "contextualizer.llm_temperature": Effect(0.9, llm_request, base=llm_base()),
    "contextualizer.llm_max_output_tokens": Effect(64, llm_request, base=llm_base()),
    "contextualizer.llm_max_document_tokens": Effect(256, llm_prompt_size, base=llm_base()),
    "contextualizer.price_per_1k_input_tokens": Effect(2.0, llm_cost, base=llm_base()),
    "contextualizer.price_per_1k_output_tokens": Effect(2.0, llm_cost, base=llm_base()),
    "contextualizer.min_words": Effect(61, quality),
    "contextualizer.max_words": Effect(59, quality),
    "contextualizer.min_key_term_share": Effect(0.9, quality),
    # ----- [query]
    "query.default_k": Effect(1, query_probe("retry backoff"), base=LEXICAL),
    "query.max_k": Effect(2, query_limits, base=LEXICAL),
    "query.max_budget_tokens": Effect(500, query_limits, base=LEXICAL),
    "query.mmr_lambda": Effect(0.0, query_probe("retry backoff policy", k=3), base=LEXICAL),
    "query.min_score_threshold": Effect(0.9, query_probe("retry backoff"), base=LEXICAL),
    "query.rerank_enabled": Effect(False, query_probe("retry backoff policy", k=3),
                                   base={**LEXICAL, "query": {"mmr_lambda": 0.0}}),
    "query.understanding_enabled": Effect(False, query_probe(IMPLEMENT), base=LEXICAL),
    # ----- [budget]
    "budget.default_max_tokens": Effect(80, task_probe({"title": "retry backoff policy"}),
                                        base=LEXICAL),
    "budget.reserve_for_prompt": Effect(1400, task_probe({"title": "retry backoff policy"}),
                                        base=LEXICAL),
    "budget.warn_threshold_percent": Effect(100, budget_log, base=LEXICAL),
    # ----- [metrics]
    "metrics.enabled": Effect(False, usage_flags, base=LEXICAL),
    "metrics.track_latency": Effect(False, usage_flags, base=LEXICAL),
    "metrics.track_token_usage": Effect(False, usage_flags, base=LEXICAL),
    # ----- [ranking]
    "ranking.definition_over_reference": Effect(
        3.0, query_probe("where is RetryPolicy.retry_backoff defined"), base=LEXICAL),
    "ranking.source_over_tests": Effect(0.1, query_probe("retry backoff"), base=LEXICAL),
    "ranking.vendored_penalty": Effect(1.0, query_probe("retry backoff"), base=LEXICAL),
    "ranking.docs_penalty": Effect(0.1, query_probe("RetryPolicy retry_backoff"),
                                   base=LEXICAL),
    "ranking.file_aggregation_decay": Effect(1.0, files_probe("retry backoff"), base=LEXICAL),
    "ranking.file_coherence_share": Effect(0.0, files_probe("retry backoff"), base=LEXICAL),
    # src/retry.py has three chunks among the hits: the first keeps its place alone
    "ranking.chunks_kept_per_file": Effect(1, query_probe("retry backoff"), base=LEXICAL),
    "ranking.further_chunk_factor": Effect(1.0, query_probe("retry backoff"), base={
        **LEXICAL, "ranking": {"chunks_kept_per_file": 1}}),
    "ranking.max_symbol_candidates": Effect(0, query_probe("RetryPolicy should_retry"),
                                            base=LEXICAL),
    "ranking.test_path_patterns": Effect([], query_probe("retry backoff"), base=LEXICAL),
    "ranking.vendored_path_patterns": Effect([], query_probe("retry backoff"), base=LEXICAL),
    "ranking.exact_evidence_boost": Effect(0.0, query_probe("retry_backoff"), base=LEXICAL),
    "ranking.implementation_doc_factor": Effect(1.0, query_probe(IMPLEMENT), base=LEXICAL),
    "ranking.implementation_test_factor": Effect(1.0, query_probe(IMPLEMENT), base=LEXICAL),
    "ranking.implementation_config_factor": Effect(1.0, query_probe(IMPLEMENT),
                                                   base=LEXICAL),
    "ranking.name_words_boost": Effect(0.0, query_probe("compute the retry backoff"),
                                       base=LEXICAL),
    "ranking.path_words_boost": Effect(0.0, query_probe("how the client waits between tries"),
                                       base=LEXICAL),
    "ranking.area_path_boost": Effect(0.0, query_probe("client: wait longer between tries"),
                                      base=LEXICAL),
    # src/client.py's stem spells one of the message's keywords: its score is added to
    "ranking.file_stem_share_boost": Effect(0.0, query_probe("make the client wait longer"),
                                            base=LEXICAL),
    # One word of two found (BM25 coverage): a confidence of about 0.33.
    "ranking.strong_match_confidence": Effect(0.1, notes_probe("banana status"),
                                              base=LEXICAL),
    # ----- [providers.ID]
    "providers.*.enabled": Effect(False, query_probe("RetryPolicy retry backoff"),
                                  table="providers.symbol", base=LEXICAL),
    "providers.*.weight": Effect(5.0, query_probe("RetryPolicy retry backoff"),
                                 table="providers.full_text", base=LEXICAL),
    "providers.*.timeout_ms": Effect(100, slow_provider_probe,
                                     table="providers.slow_probe", base=LEXICAL),
    "providers.*.index_ast": Effect(False, query_probe("RetryPolicy retry backoff"),
                                    table="providers.symbol", base=LEXICAL),
    "providers.*.max_commits": Effect(1, query_probe("retry backoff client",
                                                      providers=("git_history",)),
                                      table="providers.git_history", base=LEXICAL),
    "providers.*.combines": Effect(["full_text"], query_probe("RetryPolicy retry backoff"),
                                   table="providers.hybrid", base=LEXICAL),
    "providers.*.fusion_strategy": Effect("weighted_average",
                                          query_probe("RetryPolicy retry backoff"),
                                          table="providers.hybrid", base=LEXICAL),
    "providers.*.rrf_k": Effect(1, query_probe("RetryPolicy retry backoff"),
                                table="providers.hybrid", base=LEXICAL),
    "providers.*.options": Effect({"url": "http://tickets"}, third_party_options,
                                  table="providers.tickets"),
    # ----- [projects.NAME]
    "projects.*.watch_paths": Effect(["backend/"], projects_probe("backend"),
                                     table="projects.backend", base=LEXICAL),
    "projects.*.ignore_patterns": Effect(["frontend/"], projects_probe("app"),
                                         table="projects.app",
                                         base={**LEXICAL, "projects.app": {
                                             "watch_paths": ["backend/", "frontend/"]}}),
    # ----- [reports]
    "reports.output_dir": Effect("out", boundary),
    "reports.default_template": Effect("bullet_points", written_report),
    "reports.templates_dir": Effect("mine", written_report, base={"reports": {
        "default_template": "basic"}}),
    "reports.max_quote_lines": Effect(3, written_report),
    # ----- [core] mode
    "core.mode": Effect("standalone", opened_module),
    # ----- [watcher] (the owner's watcher)
    "watcher.enabled": Effect(False, owner_duties),
    "watcher.debounce_ms": Effect(50, debounce),
    # ----- [metrics] cache hits, [embedding]
    "metrics.track_cache_hits": Effect(False, query_cache_hits),
    "embedding.cache_enabled": Effect(False, query_cache_hits),
    "embedding.model": Effect("/nonexistent/model", embedder_outcome),
    "embedding.dimension": Effect(128, embedder_outcome),
    "embedding.batch_size": Effect(8, embedder_settings),
    "embedding.threads": Effect(1, embedder_settings),
    "embedding.normalize": Effect(False, vector_norm),
    "embedding.backend": Effect("torch", embedder_outcome),
    "embedding.quantize": Effect("none", embedder_outcome),
    "embedding.max_seq_length": Effect(128, embedder_outcome),
    "embedding.base_url": Effect("http://embeddings.internal:8080/v1", remote_client,
                                 base={"embedding": {"backend": "openai"}}),
    "embedding.api_key_env": Effect("EFFECTS_REMOTE_KEY", remote_part("outcome"),
                                    base=lambda: {"embedding": {
                                        k: v for k, v in remote_base()()["embedding"].items()
                                        if k != "api_key_env"}}),
    "embedding.query_backend": Effect("local", remote_client, base=remote_base()),
    "embedding.local_model": Effect("/nonexistent/local-model", local_route,
                                    base=remote_base(query_backend="local")),
    "embedding.max_batch_items": Effect(2, remote_part("batches"), base=remote_base()),
    "embedding.max_batch_tokens": Effect(64, remote_part("batches"), base=remote_base()),
    # Four stalled answers (a second each): together, or one after the other.
    "embedding.concurrency": Effect(1, remote_part("quick", *["stall"] * 4),
                                    base=remote_base(max_batch_items=1)),
    "embedding.timeout_s": Effect(0.5, remote_part("requests", "stall"),
                                  base=remote_base()),
    "embedding.max_retries": Effect(0, remote_part("outcome", "500"), base=remote_base()),
    # The 21st request of a minute waits (three seconds) for the bucket to refill.
    "embedding.requests_per_minute": Effect(20, rate_limit_waits,
                                            base=remote_base(max_batch_items=1)),
    "embedding.tokens_per_minute": Effect(lambda: 20 * (estimate_tokens("t00") + 2),
                                          rate_limit_waits,
                                          base=remote_base(max_batch_items=1)),
    # ----- [bootstrap]
    "bootstrap.enabled": Effect(False, indexed(indexed_paths)),
    "bootstrap.parallel_workers": Effect(2, workers),
    "bootstrap.batch_size": Effect(1, embedding_rounds),
    "bootstrap.priority_extensions": Effect([".sql"], indexed(indexed_paths, MEDIUM_FILES),
                                            base={"bootstrap": {"max_initial_files": 1}}),
    "bootstrap.max_initial_files": Effect(1, indexed(indexed_paths)),
    "bootstrap.fail_fast": Effect(True, indexed(indexed_paths)),
    "bootstrap.show_progress": Effect(False, cli_progress),
    "bootstrap.progress_interval_seconds": Effect(1, cli_progress),
    # ----- [security]
    "security.scrub_secrets": Effect(False, indexed(chunk_texts)),
    "security.secret_patterns": Effect(["SESSION_TOKEN_NAME = .*"], indexed(chunk_texts)),
    "security.encrypt_db": Effect(True, opened_store),
    "security.key_env": Effect("EFFECTS_DB_KEY", opened_store,
                               base={"security": {"encrypt_db": True}}),
    "security.key_file": Effect(lambda: str(key_file()), opened_store,
                                base={"security": {"encrypt_db": True}}),
    # ----- [storage]
    "storage.db_path": Effect("index/elsewhere.duckdb", opened_store),
    "storage.backend": Effect("postgres", opened_store),
    "storage.url": Effect(postgres_url, opened_store,
                          base={"storage": {"backend": "postgres"}}),
    "storage.workspace": Effect("team-shared", shared_workspace,
                                base=lambda: {"storage": {"backend": "postgres",
                                                          "url": postgres_url()}}),
    "storage.backup_enabled": Effect(True, owner_duties),
    "storage.backup_interval_hours": Effect(1, backups),
    "storage.backup_keep": Effect(1, backups),
    # ----- [engine]: the client's side, read from the client it builds
    "engine.host": Effect("10.1.2.3", service_client),
    "engine.port": Effect(9191, service_client),
    "engine.url": Effect("https://contextd.internal:8443", service_client),
    "engine.api_key_env": Effect("EFFECTS_ENGINE_KEY", service_client),
    "engine.timeout_ms": Effect(750, service_client),
    "engine.retry_attempts": Effect(0, service_client),
    "engine.backoff_ms": Effect(50, service_client),
    # ----- [engine]: the service's side, over HTTP
    "engine.max_body_mb": Effect(1.0, service_part("big body")),
    "engine.rate_limit_per_s": Effect(0.5, service_part("limited"),
                                      base={"engine": {"rate_limit_burst": 1}}),
    "engine.rate_limit_burst": Effect(1, service_part("limited"),
                                      base={"engine": {"rate_limit_per_s": 0.5}}),
    "engine.max_concurrent_queries": Effect(5, service_part("service")),
    "engine.tls_cert": Effect(lambda: self_signed_pair()[0], service_part("scheme"),
                              base=lambda: {"engine": {"tls_key": self_signed_pair()[1]}}),
    "engine.tls_key": Effect(lambda: self_signed_pair()[1], service_part("scheme"),
                             base=lambda: {"engine": {"tls_cert": self_signed_pair()[0]}}),
    # ----- [owner]
    "owner.background": Effect(False, command_handoff,
                               base={"owner": {"answer_within_seconds": 0.0}}),
    "owner.answer_within_seconds": Effect(0.0, command_handoff),
    "owner.index_within_seconds": Effect(0.001, command_handoff_past_the_floor),
    "owner.warm_after_load_ms": Effect(1, leaves_warm_owner),
    "owner.memory_limit_mb": Effect(2048, owner_memory),
    "owner.idle_exit_seconds": Effect(5, idle_exit),
    # ----- [ui]
    "ui.port": Effect(unused_port, ui),
    "ui.open_browser": Effect(True, ui),
    "ui.progress_log_lines": Effect(10, ui),
    # ----- [mcp]
    "mcp.compatibility": Effect("seed002", tools),
    "mcp.tools": Effect(["memory"], tools),
    # ----- [stash]
    "stash.enabled": Effect(False, retrieved),
    "stash.similarity_weight": Effect(1.0, retrieved),
    "stash.age_weight": Effect(0.0, retrieved),
    "stash.recency_weight": Effect(0.0, retrieved),
    "stash.age_decay_days": Effect(1000.0, retrieved),
    "stash.recency_decay_days": Effect(0.001, retrieved),
    "stash.min_similarity": Effect(0.64, retrieved),
    "stash.default_top_k": Effect(1, retrieved),
    "stash.max_hops": Effect(0, retrieved),
    "stash.reference_decay": Effect(0.1, retrieved),
    "stash.dedupe_similarity": Effect(0.8, retrieved),
    "stash.default_max_tokens": Effect(30, retrieved),
    "stash.preview_chars": Effect(20, retrieved),
    "stash.max_segments": Effect(1, stash_fresh),
    "stash.max_segment_bytes": Effect(100, stash_fresh),
    "stash.default_ttl_days": Effect(10.0, stash_fresh),
    "stash.gc_max_age_days": Effect(0.0, stash_fresh),
    # ----- [knowledge]
    "knowledge.auto_create_contexts": Effect(True, knowledge_adds),
    "knowledge.allowed_roots": Effect(["../outside"], knowledge_adds),
    "knowledge.refused_paths": Effect(["../outside"], knowledge_adds),
    "knowledge.formats": Effect(["markdown"], knowledge_adds),
    "knowledge.max_file_size_mb": Effect(0.01, knowledge_adds),
    "knowledge.max_pages": Effect(1, pdf_pages),
    "knowledge.max_files_per_add": Effect(1, knowledge_adds),
    "knowledge.max_contexts": Effect(2, knowledge_adds),
    # ----- [sessions]
    "sessions.max_sessions": Effect(1, sessions, base=LEXICAL),
    "sessions.expire_after_hours": Effect(0.0001, sessions, base=LEXICAL),
    "sessions.results_per_session": Effect(1, sessions, base=LEXICAL),
    "sessions.preview_results": Effect(0, sessions, base=LEXICAL),
    "sessions.default_limit": Effect(1, sessions, base=LEXICAL),
    "sessions.min_similarity": Effect(0.9, sessions, base=LEXICAL),
}


# ===== the tests ==========================================================================

def _resolved(value: Any) -> Any:
    return value() if callable(value) else value


def observe(key: str, effect: Effect, tmp: Path, changed: bool) -> Any:
    """What the probe sees under the default configuration of ``key`` (its entry's base) or
    under the changed one, written to ``tmp``; a configuration that does not load is refused,
    and the refusal is what is seen."""
    table, name = key_parts(key, effect)
    change = {name: _resolved(effect.value)} if changed else {}
    label = "changed" if changed else "default"
    try:
        config = loaded(tmp / label, merged(_resolved(effect.base), table, change))
    except ConfigError as exc:
        return "refused", str(exc).replace(str(tmp), "<tmp>")
    (tmp / f"probe-{label}").mkdir()
    return effect.probe(config, tmp / f"probe-{label}")


def test_the_table_covers_exactly_the_documented_keys():
    documented = set().union(*documented_keys().values())
    assert set(EFFECTS) == documented, (
        f"keys without a probe: {sorted(documented - set(EFFECTS))}; "
        f"probes of keys not documented: {sorted(set(EFFECTS) - documented)}")


# Keys whose probe starts a server or a browser, or waits for an idle exit (20-70 s each):
# run with the slow tests.
SLOW_KEYS = {"owner.idle_exit_seconds", "ui.open_browser", "ui.port", "ui.progress_log_lines",
             "engine.rate_limit_burst", "engine.rate_limit_per_s", "engine.max_body_mb",
             "engine.max_concurrent_queries", "engine.tls_key", "engine.tls_cert"}


@pytest.mark.parametrize("key", [pytest.param(key, marks=pytest.mark.slow) if key in SLOW_KEYS
                                 else key for key in sorted(EFFECTS)])
def test_each_documented_key_changes_what_contextd_does(key, tmp_path):
    effect = EFFECTS[key]
    before = observe(key, effect, tmp_path, changed=False)
    after = observe(key, effect, tmp_path, changed=True)
    assert before != after, f"{key} = {_resolved(effect.value)!r} changed nothing: {before!r}"
