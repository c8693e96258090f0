"""context.toml's sections: typed, immutable settings with their defaults.

Each field carries its documentation and constraints (``_opt``): loading validates against
them (:mod:`contextd.config.loading`) and ``contextd init`` writes a documented file from them.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

from contextd.text.languages import DEFAULT_EXTENSIONS


def _opt(default: Any, *, help: str, min: float | None = None, max: float | None = None,
         choices: tuple[str, ...] | None = None) -> Any:
    """A config field with its documentation and constraints attached (used by validation
    and by ``contextd init`` to write a documented file)."""
    meta = {"help": help, "min": min, "max": max, "choices": choices}
    if isinstance(default, (list, dict, tuple)):
        return field(default_factory=functools.partial(type(default), default), metadata=meta)
    return field(default=default, metadata=meta)


DEFAULT_IGNORE_PATTERNS = (
    ".git", "node_modules", "target", "build", "dist", ".venv", "venv", "__pycache__",
    "*.class", "*.pyc", ".idea", ".vscode", ".contextd", ".mypy_cache", ".pytest_cache",
    ".tox", ".ruff_cache", "*.egg-info", ".*/",
)

DEFAULT_ALLOWED_EXTENSIONS = DEFAULT_EXTENSIONS

DEFAULT_BLOCKED_EXTENSIONS = (
    ".exe", ".bin", ".dll", ".so", ".dylib", ".o", ".a", ".jpg", ".jpeg", ".png", ".gif",
    ".bmp", ".ico", ".webp", ".pdf", ".zip", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".tar",
    ".jar", ".war", ".class", ".pyc", ".whl", ".mp3", ".mp4", ".mov", ".woff", ".woff2",
    ".ttf", ".otf", ".duckdb", ".db", ".sqlite", ".lock",
)

DEFAULT_SECRET_PATTERNS = (
    r"""password\s*=\s*["'].*["']""",
    r"""api[_-]?key\s*=\s*["'].*["']""",
    r"""token\s*=\s*["'].*["']""",
)


@dataclass(frozen=True)
class CoreConfig:
    enabled: bool = _opt(True, help="Master switch: false makes every query return no context.")
    mode: str = _opt("embedded", choices=("embedded", "standalone", "hybrid"),
                     help="ContextModule.open: embedded: in-process; standalone: every "
                          "call goes to the service at [engine] host/port (no database or "
                          "model in the caller); hybrid: the local index, falling back to "
                          "the service while it cannot be opened.")
    fallback_enabled: bool = _opt(True, help="On failure return an empty context and log a "
                                             "warning instead of raising.")


@dataclass(frozen=True)
class EngineConfig:
    host: str = _opt("127.0.0.1", help="Where the standalone service listens (`contextd "
                                       "server`) and where standalone/hybrid callers reach it.")
    port: int = _opt(9090, min=1, max=65535, help="Port of the standalone service.")
    timeout_ms: int = _opt(5000, min=1, help="Client: timeout of one request, in ms.")
    retry_attempts: int = _opt(3, min=0, max=20, help="Client: retries of a request that "
                                                     "could not reach the service or got 5xx.")
    # ----- standalone service (contextd/http) -----
    backoff_ms: int = _opt(200, min=0, max=60000, help="Client: first wait between retries, "
                                                       "doubled each time.")
    url: str = _opt("", help="Client: full service URL (https://host:port); overrides host "
                             "and port, e.g. behind a TLS proxy.")
    api_key_env: str = _opt("CONTEXTD_API_KEY", help="Client: environment variable holding "
                                                     "the API key sent as a Bearer token.")
    tls_cert: str = _opt("", help="Service: PEM certificate; with tls_key it serves HTTPS.")
    tls_key: str = _opt("", help="Service: PEM private key of tls_cert.")
    max_body_mb: float = _opt(8.0, min=0.001, max=1024.0,
                              help="Service: larger request bodies are refused (413).")
    rate_limit_per_s: float = _opt(50.0, min=0.0, help="Service: requests per second per API "
                                   "key (per client address without keys); 0 = unlimited.")
    rate_limit_burst: int = _opt(100, min=1, help="Service: requests allowed at once above "
                                                  "the rate.")
    max_concurrent_queries: int = _opt(2, min=1, max=64, help="Service: queries run at "
                                       "once; more wait their turn (a query is CPU-bound).")


@dataclass(frozen=True)
class StorageConfig:
    db_path: str = _opt(".contextd/context.duckdb",
                        help="DuckDB file, relative to the project root or absolute.")
    backup_enabled: bool = _opt(False, help="The owner takes a consistent snapshot every "
                                            "backup_interval_hours (`contextd backup`).")
    backup_interval_hours: int = _opt(24, min=1, help="Hours between backups.")
    # ----- team scale: a shared PostgreSQL + pgvector database (docs/ARCHITECTURE.md) -----
    backend: str = _opt("duckdb", choices=("duckdb", "postgres"),
                        help="duckdb: a file in the project (db_path); postgres: a shared "
                             "PostgreSQL database with pgvector (url), one workspace per project.")
    url: str = _opt("", help='PostgreSQL URL for backend = "postgres", e.g. "${DATABASE_URL}"; '
                             "its password is never logged.")
    workspace: str = _opt("", help="Workspace name in the shared database (empty: derived from "
                                   "the git remote and the project's place in the repository, "
                                   "else from the project path).")
    backup_keep: int = _opt(7, min=1, max=1000, help="Newest backups kept in <db dir>/backups.")


@dataclass(frozen=True)
class WatcherConfig:
    enabled: bool = _opt(True, help="Watch the project and re-index files as they change.")
    debounce_ms: int = _opt(500, min=0, max=60000,
                            help="Wait this long after the last event before indexing a burst.")
    watch_paths: list[str] = _opt(["auto"], help='Directories to index, relative to the root or '
                                  'absolute; ["auto"] detects the project root.')
    ignore_patterns: list[str] = _opt(list(DEFAULT_IGNORE_PATTERNS),
                                      help="gitignore-style patterns never indexed.")
    use_gitignore: bool = _opt(True, help="Also apply every .gitignore in the tree.")
    use_contextignore: bool = _opt(True, help="Also apply every .contextignore in the tree.")
    use_dockerignore: bool = _opt(False, help="Also apply .dockerignore files, read with "
                                              ".gitignore's rules.")


@dataclass(frozen=True)
class IndexingConfig:
    allowed_extensions: list[str] = _opt(list(DEFAULT_ALLOWED_EXTENSIONS),
                                         help="Only these extensions are indexed; [] allows "
                                              "every text file not blocked.")
    blocked_extensions: list[str] = _opt(list(DEFAULT_BLOCKED_EXTENSIONS),
                                         help="Extensions never indexed.")
    max_file_size_mb: float = _opt(5.0, min=0.0, help="Files larger than this are skipped.")
    warn_file_size_mb: float = _opt(2.0, min=0.0, help="Files larger than this are logged.")
    size_exceptions: list[str] = _opt([], help="Paths (globs) indexed despite the size limit.")
    follow_symlinks: bool = _opt(False, help="Follow symbolic links (never out of the "
                                             "boundary).")
    max_symlink_depth: int = _opt(3, min=0, max=40, help="Most links followed in one path.")
    binary_detection: str = _opt("all", choices=("extension", "mime", "content", "all"),
                                 help="How binary files are recognised: extension (the "
                                      "binary extensions), mime (the file's magic number: "
                                      "PNG, PDF, ZIP, ELF, ...), content (NUL bytes or "
                                      "binary_threshold), all (the three).")
    binary_threshold: int = _opt(30, min=1, max=100,
                                 help="Percent of non-text bytes in the first 8 KB that "
                                      "marks a file binary.")


@dataclass(frozen=True)
class EmbeddingConfig:
    model: str = _opt("sentence-transformers/all-MiniLM-L6-v2",
                      help="Embedding model: all-MiniLM-L6-v2 ships with contextd; else a local "
                           "sentence-transformers directory. Never downloaded.")
    dimension: int = _opt(384, min=1, help="Vector dimension of the model.")
    batch_size: int = _opt(64, min=1, max=4096, help="Chunks per embedding batch.")
    normalize: bool = _opt(True, help="L2-normalise vectors.")
    cache_enabled: bool = _opt(True, help="Reuse the vector of a query text asked again (an "
                                          "in-memory cache on the query path; chunk vectors "
                                          "are always reused by text hash).")
    backend: str = _opt("onnx",
                        help="onnx: ONNX Runtime (the default install, no torch); torch: "
                             "sentence-transformers reference (pip install "
                             "'contextd[torch]'); or a plugin's backend name "
                             "(`contextd embedders list`).")
    quantize: str = _opt("int8", choices=("int8", "none"),
                         help="int8: dynamic per-channel quantisation (ONNX only).")
    max_seq_length: int = _opt(256, min=8, max=8192, help="Tokens the model reads per chunk.")
    threads: int = _opt(0, min=0, max=256, help="Inference threads; 0 = one per core.")
    # ----- remote backends (openai, ollama): contextd/embedders/remote/ -------------------
    base_url: str = _opt("", help="openai/ollama: the server's base URL, e.g. "
                                  "http://gpu-box:8080/v1 (POST {base_url}/embeddings) or "
                                  "http://localhost:11434 (POST /api/embed); empty: "
                                  "https://api.openai.com/v1 or http://localhost:11434.")
    api_key_env: str = _opt("", help="Name of the environment (or .env) variable holding "
                                     "the API key, sent as a Bearer token; empty: "
                                     "OPENAI_API_KEY for api.openai.com, "
                                     "OPENAI_COMPATIBLE_API_KEY for other servers.")
    query_backend: str = _opt("same", choices=("same", "local"),
                              help="same: queries are embedded by the backend that embeds "
                                   "chunks; local: in-process by local_model, only if the "
                                   "server runs that same model (one probe vector is compared "
                                   "at start-up, cosine >= 0.99, else queries go remote).")
    local_model: str = _opt("sentence-transformers/all-MiniLM-L6-v2",
                            help="query_backend = local: the installed model the server's "
                                 "model is the same as.")
    max_batch_items: int = _opt(32, min=1, max=2048, help="Remote: most texts per request "
                                                          "(TEI's default limit is 32).")
    max_batch_tokens: int = _opt(8192, min=64, help="Remote: most (estimated) tokens per "
                                                    "request.")
    concurrency: int = _opt(4, min=1, max=64, help="Remote: requests in flight at once.")
    timeout_s: float = _opt(60.0, min=0.1, max=600.0, help="Remote: seconds per request.")
    max_retries: int = _opt(5, min=0, max=20, help="Remote: retries of a request after a "
                                                   "429, a 5xx, a timeout or a dropped "
                                                   "connection (exponential backoff with "
                                                   "jitter, Retry-After honoured).")
    requests_per_minute: int = _opt(0, min=0, help="Remote: request rate limit (0: none).")
    tokens_per_minute: int = _opt(0, min=0, help="Remote: token rate limit (0: none).")
    # Set by contextd.config.env: the project's .env, read for remote settings and the key.
    env_file: str = field(default="", metadata={"internal": True})


@dataclass(frozen=True)
class LanguageChunking:
    max_tokens: int = _opt(256, min=16, max=8192,
                           help="Largest chunk; never above the model's window.")
    overlap_percent: int = _opt(15, min=0, max=50, help="Overlap when a long body is split.")
    split_by_headings: bool = _opt(True, help="Markdown: one chunk per heading.")
    preserve_code_blocks: bool = _opt(True, help="Markdown: code fences as own chunks.")
    split_by_function: bool = _opt(True, help="Code: one chunk per function.")
    split_by_class: bool = _opt(True, help="Code: split large classes into methods.")
    split_by_export: bool = _opt(True, help="TypeScript/JavaScript: every exported "
                                            "declaration is a chunk, values too (export const "
                                            "X = {...}); false: only functions and classes.")
    preserve_docstrings: bool = _opt(True, help="Keep the doc comment above a definition "
                                                "(JSDoc, KDoc, Javadoc, ///, #) in its "
                                                "chunk; false: it stays with the code around. "
                                                "A docstring inside the body (Python) is "
                                                "always kept.")


@dataclass(frozen=True)
class QueryConfig:
    default_k: int = _opt(12, min=1, max=200, help="Results returned by default.")
    max_k: int = _opt(50, min=1, max=1000, help="Most results one query may ask for (the "
                      "CLI, the MCP tools and the HTTP service alike).")
    # 6000: one MCP tool answer must stay well under what clients accept (Claude Code warns
    # at 10k tokens and stops at 25k), and the text and the structured copy both count.
    max_budget_tokens: int = _opt(6000, min=50, help="Largest token budget one query may ask "
                                  "for (the CLI, the MCP tools and the HTTP service alike).")
    # 0.7, not the spec's 0.5: on the public evaluation (benchmarks/eval, bench_retrieval)
    # 0.7 ranks better and the budgeted context holds the answer more often (docstring
    # queries: Recall@10 74.2% -> 76.8%, gold in context 74.8% -> 78.8%), task queries equal.
    mmr_lambda: float = _opt(0.7, min=0.0, max=1.0,
                             help="MMR: 1.0 pure relevance, 0.0 pure diversity.")
    min_score_threshold: float = _opt(0.0, min=0.0, max=1.0,
                                      help="Drop results scoring below this (0..1, the "
                                           "scale of --min-score and filters.minScore, "
                                           "which replace it for one query).")
    rerank_enabled: bool = _opt(True, help="Apply MMR re-ranking.")
    understanding_enabled: bool = _opt(True, help="Send each provider the query meant for "
                                       "it (prose, words, symbol names) and apply the "
                                       "[ranking] boosts.")


@dataclass(frozen=True)
class BudgetConfig:
    default_max_tokens: int = _opt(1500, min=1, help="Token budget of one context.")
    reserve_for_prompt: int = _opt(500, min=0, help="Tokens held back for the prompt.")
    warn_threshold_percent: int = _opt(80, min=1, max=100,
                                       help="Warn when a budget exceeds this share.")


@dataclass(frozen=True)
class ProviderConfig:
    enabled: bool = _opt(True, help="Query this provider.")
    weight: float = _opt(1.0, min=0.0, max=100.0, help="Relative weight in fusion.")
    timeout_ms: int = _opt(2000, min=1, help="A slower answer is dropped.")
    index_ast: bool = _opt(True, help="symbol: answer from the symbol (AST) index; false: "
                                      "the symbol provider is left out of every query.")
    max_commits: int = _opt(100, min=1, help="git_history: commits examined.")
    combines: list[str] = _opt([], help="hybrid: providers fused.")
    fusion_strategy: str = _opt("rrf", choices=("rrf", "weighted_average", "cascade"),
                                help="hybrid: how results are fused.")
    rrf_k: int = _opt(60, min=1, help="hybrid: the k of reciprocal rank fusion.")
    options: dict[str, Any] = _opt({}, help="Provider-specific settings of third parties.")


# Keys of [providers.*] that only one kind of provider reads: set on another provider they
# have no effect, which loading reports as a note and ``contextd init`` does not write.
PROVIDER_ONLY_KEYS = {
    "index_ast": ("symbol",),
    "max_commits": ("git_history",),
    "combines": ("hybrid",),
    "fusion_strategy": ("hybrid",),
    "rrf_k": ("hybrid",),
}


def default_providers() -> dict[str, ProviderConfig]:
    return {
        "semantic": ProviderConfig(weight=0.6),
        "symbol": ProviderConfig(weight=0.3),
        "full_text": ProviderConfig(weight=0.3),
        "git_history": ProviderConfig(weight=0.2),
        "dependency": ProviderConfig(weight=0.4),
        "hybrid": ProviderConfig(combines=["semantic", "symbol", "full_text", "git_history",
                                           "dependency"]),
    }


def default_chunking() -> dict[str, LanguageChunking]:
    return {"markdown": LanguageChunking(), "python": LanguageChunking()}


@dataclass(frozen=True)
class MetricsConfig:
    enabled: bool = _opt(True, help="Record usage metrics in the index.")
    track_latency: bool = _opt(True, help="Record query latency.")
    track_token_usage: bool = _opt(True, help="Record tokens returned.")
    track_cache_hits: bool = _opt(True, help="Record in usage_metrics.cache_hits how many of "
                                             "a query's embeddings came from the query-vector "
                                             "cache (false: NULL).")


@dataclass(frozen=True)
class BootstrapConfig:
    enabled: bool = _opt(True, help="Index the whole project when the index is empty; false: "
                                    "start empty and index only what `contextd refresh` "
                                    "(refresh_context) or the watcher is given.")
    parallel_workers: int = _opt(0, min=0, max=256, help="Chunking workers; 0 = cores - 1 "
                                                         "(at least 1).")
    batch_size: int = _opt(128, min=1, help="Chunks per embedding batch during bootstrap "
                                            "and rebuilds (fetched, embedded and stored "
                                            "together; an interruption loses one at most); "
                                            "[embedding] batch_size elsewhere.")
    priority_extensions: list[str] = _opt([".py", ".ts", ".kt", ".java", ".go", ".rs", ".md"],
                                          help="Extensions read first within each part of the "
                                               "project (source, docs, tests, config).")
    max_initial_files: int = _opt(0, min=0, help="Index at most this many files (0 = all).")
    fail_fast: bool = _opt(False, help="Stop at the first file that fails.")
    show_progress: bool = _opt(True, help="Show progress while indexing.")
    progress_interval_seconds: int = _opt(10, min=1, help="Seconds between progress lines "
                                                          "when not on a terminal, and in "
                                                          "the owner's log.")


@dataclass(frozen=True)
class SecurityConfig:
    scrub_secrets: bool = _opt(True, help="Redact secrets before anything is stored.")
    secret_patterns: list[str] = _opt(list(DEFAULT_SECRET_PATTERNS),
                                      help="Extra regexes whose matches are redacted.")
    encrypt_db: bool = _opt(False, help="Keep the index and its backups sealed with AES-256-GCM "
                                        "at rest; the open index lives in /dev/shm "
                                        "(docs/SERVICE.md).")
    key_env: str = _opt("CONTEXTD_DB_KEY", help="Environment variable holding the database "
                                                "key (16+ characters) when encrypt_db is on.")
    key_file: str = _opt("", help="File holding the database key instead (overrides "
                                  "key_env).")


@dataclass(frozen=True)
class ContextualizerConfig:
    strategy: str = _opt("structural", choices=("structural", "llm", "none"),
                         help="Contextual prefix before embedding: structural (path, docstrings, "
                              "class, heading/key path; no LLM), llm (generated by the "
                              "endpoint below, falling back to structural) or none.")
    max_prefix_tokens: int = _opt(48, min=0, max=256,
                                  help="Structural prefix cap; the chunk is never trimmed, and "
                                       "prefix + chunk stays within the model window.")
    llm_api: str = _opt("openai", choices=("openai", "ollama"),
                        help="openai: POST {endpoint}/v1/chat/completions; ollama: POST "
                             "{endpoint}/api/chat.")
    llm_endpoint: str = _opt("", help="Base URL of a user-run LLM server, e.g. "
                                      "http://127.0.0.1:11434; required for strategy llm "
                                      "(there is no default remote endpoint).")
    llm_model: str = _opt("", help="Model name sent to the endpoint; also keys the prefix "
                                   "cache.")
    llm_api_key_env: str = _opt("", help="Environment variable holding the API key (sent as a "
                                         "Bearer token); empty sends none.")
    llm_timeout_s: float = _opt(30.0, min=0.1, max=600.0, help="Seconds per LLM request.")
    llm_concurrency: int = _opt(4, min=1, max=64, help="LLM requests in flight at once.")
    llm_max_retries: int = _opt(2, min=0, max=10,
                                help="Extra attempts after a failed or rejected answer.")
    llm_temperature: float = _opt(0.3, min=0.0, max=2.0, help="Sampling temperature.")
    llm_max_output_tokens: int = _opt(160, min=16, max=4096, help="Answer length limit.")
    llm_max_document_tokens: int = _opt(6000, min=256, help="Longer documents are cut "
                                                            "around the chunk in the prompt.")
    price_per_1k_input_tokens: float = _opt(0.0, min=0.0, help="For the cost counter.")
    price_per_1k_output_tokens: float = _opt(0.0, min=0.0, help="For the cost counter.")
    min_words: int = _opt(50, min=1, help="Quality check: shortest acceptable LLM prefix.")
    max_words: int = _opt(100, min=1, help="Quality check: longest acceptable LLM prefix.")
    min_key_term_share: float = _opt(0.2, min=0.0, max=1.0,
                                     help="Quality check: share of the chunk's key terms "
                                          "the prefix must mention.")


@dataclass(frozen=True)
class RankingConfig:
    definition_over_reference: float = _opt(1.3, min=0.0, max=10.0,
                                            help="Score factor for a chunk that defines a "
                                                 "symbol the task names.")
    source_over_tests: float = _opt(0.7, min=0.0, max=10.0,
                                    help="Score factor for test files (unless the task is "
                                         "about tests).")
    vendored_penalty: float = _opt(0.5, min=0.0, max=10.0,
                                   help="Score factor for vendored/third-party code.")
    docs_penalty: float = _opt(0.85, min=0.0, max=10.0,
                               help="Score factor for documentation files when the task "
                                    "names code symbols.")
    file_aggregation_decay: float = _opt(0.5, min=0.0, max=1.0,
                                         help="Files: each further chunk of a file counts "
                                              "this factor times the one before it "
                                              "(geometric), weighed by its score over the "
                                              "best candidate's (see file_coherence_share).")
    file_coherence_share: float = _opt(0.2, min=0.0, max=10.0,
                                       help="Files: the most a file's further matching chunks "
                                            "add to its best chunk, as a share of the best "
                                            "candidate's score (the file with the most such "
                                            "chunks gets all of it, the others in proportion).")
    chunks_kept_per_file: int = _opt(3, min=1, max=100,
                                     help="Snippets: a file's best chunks that keep their "
                                          "place in the answer's order; the ones after them "
                                          "step back (further_chunk_factor).")
    further_chunk_factor: float = _opt(0.5, min=0.0, max=1.0,
                                       help="Snippets: a file's chunks after its best "
                                            "chunks_kept_per_file step back by this factor per "
                                            "chunk of the file already taken, so the answer "
                                            "covers several files (1: no step back).")
    max_symbol_candidates: int = _opt(12, min=0, max=200,
                                      help="Symbol names taken from one task description.")
    test_path_patterns: list[str] = _opt(["tests/*", "test/*", "*/tests/*", "*/test/*",
                                          "test_*", "*_test.*", "*.test.*", "*.spec.*",
                                          "__tests__/*", "*/__tests__/*"],
                                         help="Globs (on the relative path) of test files.")
    vendored_path_patterns: list[str] = _opt(["vendor/*", "*/vendor/*", "third_party/*",
                                              "*/third_party/*", "*/_vendor/*",
                                              "node_modules/*", "*.min.js"],
                                             help="Globs of vendored code.")
    # ----- retrieval precision (issue 14): exact evidence, intent x file role, confidence ----
    exact_evidence_boost: float = _opt(1.0, min=0.0, max=10.0,
                                       help="A chunk holding the query verbatim (or the names "
                                            "it writes) gets its score times 1 + this.")
    implementation_doc_factor: float = _opt(0.6, min=0.0, max=10.0,
                                            help="Score factor for documentation when the query "
                                                 "asks for an implementation or a change.")
    implementation_test_factor: float = _opt(0.5, min=0.0, max=10.0,
                                             help="Further score factor for tests when the "
                                                  "query asks for an implementation or a change.")
    implementation_config_factor: float = _opt(0.7, min=0.0, max=10.0,
                                               help="Score factor for config files when the "
                                                    "query asks for an implementation or a change.")
    name_words_boost: float = _opt(0.2, min=0.0, max=10.0,
                                   help="A definition whose name the query's own words spell "
                                        "(copy, write_heading) gets its score times 1 + this "
                                        "times the share of the name's words found.")
    path_words_boost: float = _opt(0.5, min=0.0, max=10.0,
                                   help="A chunk of a code file whose path spells words the "
                                        "query writes (redirects/api.py for 'the redirects "
                                        "API') gets its score times 1 + this times the share "
                                        "of the path's distinctive words found (tempered "
                                        "when they are a small share of a long query's).")
    area_path_boost: float = _opt(0.5, min=0.0, max=10.0,
                                  help="A chunk of a code file under the area a change "
                                       "request's title names ('cmd/promtool: add ...', "
                                       "'fix(clearorders): ...') gets its score times 1 + "
                                       "this times the share of the area's words its path "
                                       "spells.")
    file_stem_share_boost: float = _opt(0.5, min=0.0, max=10.0,
                                        help="A chunk of a source file whose file name and "
                                             "folder spell the query's keywords "
                                             "(documents/forms.py for 'Support partial "
                                             "document forms') gets this times the share of "
                                             "the keywords they spell times the best score "
                                             "added to its score; 0 turns it off. Not for "
                                             "an exact symbol lookup.")
    strong_match_confidence: float = _opt(0.5, min=0.0, max=1.0,
                                          help="Below this confidence the best hit is reported "
                                               "as no strong match (a note).")


# ----- search sessions and reports (contextd/sessions/) ---------------------------------
@dataclass(frozen=True)
class SessionsConfig:
    max_sessions: int = _opt(10, min=1, max=10000,
                             help="Search sessions kept (search_knowledge); older ones are "
                                  "dropped first.")
    expire_after_hours: float = _opt(24.0, min=0.0,
                                     help="A session is forgotten this long after it was "
                                          "made; 0 keeps sessions until max_sessions pushes "
                                          "them out.")
    results_per_session: int = _opt(20, min=1, max=100,
                                    help="Results a search keeps in its session.")
    preview_results: int = _opt(5, min=0, max=100,
                                help="Results search_knowledge shows in its answer.")
    default_limit: int = _opt(5, min=1, max=100,
                              help="Results per session get_search_results returns by "
                                   "default.")
    min_similarity: float = _opt(0.0, min=0.0, max=1.0,
                                 help="Default min_similarity: results scoring below it "
                                      "(0-1, fused relevance) are not kept.")


@dataclass(frozen=True)
class ReportsConfig:
    output_dir: str = _opt("rag-reports",
                           help="Where create_rag_report writes, relative to the root or "
                                "absolute; reports may go only under the project root or "
                                "this folder, which is never indexed.")
    default_template: str = _opt("basic",
                                 help="Template used when a report names none (basic, "
                                      "paper, bullet_points, or one of templates_dir).")
    templates_dir: str = _opt("",
                              help="Folder of your own templates (NAME.md.j2 with an "
                                   "optional NAME.json schema), relative to the root or "
                                   "absolute; empty: built-in templates only.")
    max_quote_lines: int = _opt(12, min=1, max=1000,
                                help="Longest quote a citation keeps (lines).")


@dataclass(frozen=True)
class UiConfig:
    """The web Index Manager (``contextd ui``, MCP open_index_manager)."""

    port: int = _opt(0, min=0, max=65535,
                     help="Port on 127.0.0.1 for the Index Manager; 0 = a free port.")
    open_browser: bool = _opt(False, help="Open the browser when the manager starts.")
    progress_log_lines: int = _opt(2000, min=10, max=1000000,
                                   help="Lines kept in .contextd/progress.jsonl.")


# ----- [stash]: agent memory (contextd/stash) -------------------------------------------
@dataclass(frozen=True)
class StashConfig:
    enabled: bool = _opt(True, help="Offer agent memory (stash, retrieve, merge segments).")
    similarity_weight: float = _opt(0.6, min=0.0, max=1.0,
                                    help="Score = this x cosine similarity + ...")
    age_weight: float = _opt(0.2, min=0.0, max=1.0,
                             help="... + this x exp(-age of the segment / age_decay_days) + ...")
    recency_weight: float = _opt(0.2, min=0.0, max=1.0,
                                 help="... + this x exp(-time since stashed / "
                                      "recency_decay_days).")
    age_decay_days: float = _opt(30.0, min=0.001, help="Decay constant of the segment's age.")
    recency_decay_days: float = _opt(7.0, min=0.001,
                                     help="Decay constant of the time since it was stashed.")
    # Calibrated on all-MiniLM-L6-v2's int8 graph (benchmarks/bench_memory_thresholds.py): 0.20
    # keeps 96% of paraphrased questions and lets 0.9% of unrelated text through; 0.7 keeps 17%.
    min_similarity: float = _opt(0.2, min=0.0, max=1.0,
                                 help="Default cut-off on cosine similarity for retrieval "
                                      "(calibrated for all-MiniLM-L6-v2).")
    default_top_k: int = _opt(5, min=1, max=100, help="Segments retrieved by default.")
    max_hops: int = _opt(2, min=0, max=10, help="Reference chains followed from each hit.")
    reference_decay: float = _opt(0.5, min=0.0, max=1.0,
                                  help="A segment reached by h references scores "
                                       "hit score x this^h.")
    dedupe_similarity: float = _opt(0.97, min=0.0, max=1.0,
                                    help="Retrieved segments at least this similar to a "
                                         "better one are collapsed into it.")
    default_max_tokens: int = _opt(4000, min=1, help="Token budget of one retrieval.")
    preview_chars: int = _opt(500, min=20, help="Characters of text in a retrieval preview.")
    max_segments: int = _opt(100_000, min=1, help="Stash size cap; stashing beyond it fails "
                                                  "until gc or delete make room.")
    max_segment_bytes: int = _opt(1_000_000, min=100, help="Largest segment accepted "
                                                          "(UTF-8 bytes).")
    default_ttl_days: float = _opt(0.0, min=0.0, help="Expiry of a segment stashed without "
                                                      "expires_in_days; 0 = never.")
    gc_max_age_days: float = _opt(30.0, min=0.0, help="gc also removes unprotected segments "
                                                      "stashed longer ago; 0 = never.")


# ----- [knowledge]: the knowledge base (contextd.knowledge) -------------------------------
DEFAULT_KNOWLEDGE_FORMATS = ("markdown", "text", "rst", "html", "pdf", "docx", "code")
# Places whose files are never read into the knowledge base, whoever asks: credentials and
# system configuration. "~" is the home directory.
DEFAULT_REFUSED_PATHS = ("~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.kube", "~/.docker",
                         "~/.config/gcloud", "~/.netrc", "~/.pgpass", "~/.password-store",
                         "/etc", "/proc", "/sys", "/dev", "/root/.ssh", "/var/lib/secrets")


@dataclass(frozen=True)
class KnowledgeConfig:
    auto_create_contexts: bool = _opt(False, help="An add naming a context that does not "
                                                  "exist creates it (else the add is refused).")
    allowed_roots: list[str] = _opt([], help="Directories an agent may add documents from "
                                             "over MCP (absolute, or relative to the project "
                                             "root); [] = the project root only. The CLI and "
                                             "Python API may add from anywhere not refused.")
    refused_paths: list[str] = _opt(list(DEFAULT_REFUSED_PATHS),
                                    help="Never read from these (files or directories), "
                                         "whoever asks; '~' is the home directory.")
    formats: list[str] = _opt(list(DEFAULT_KNOWLEDGE_FORMATS), choices=DEFAULT_KNOWLEDGE_FORMATS,
                              help="Formats accepted: markdown, text, rst, html, pdf, docx, "
                                   "code (files our chunkers know).")
    max_file_size_mb: float = _opt(50.0, min=0.01, help="Larger documents are refused.")
    max_pages: int = _opt(5000, min=1, help="PDFs with more pages are refused.")
    max_files_per_add: int = _opt(10000, min=1, help="A folder add stops with an error "
                                                     "beyond this many files.")
    max_contexts: int = _opt(100, min=1, help="Most knowledge contexts ('default' counts); "
                                              "creating one more is refused.")


# ----- [owner]: the background owner a CLI command hands a long first embedding to (issue 13)
@dataclass(frozen=True)
class OwnerConfig:
    background: bool = _opt(True, help="Let a CLI command answer from the lexical and symbol "
                                       "indexes at once and hand a long embedding to a "
                                       "background process, which also serves later "
                                       "commands warm (and takes over the reading an MCP "
                                       "server had not finished when its session ended); "
                                       "false: the command embeds itself.")
    answer_within_seconds: float = _opt(
        2.0, min=0.0, max=60.0,
        help="A CLI command embeds in-line only what fits in this many seconds (the model "
             "load included) and hands the rest of the vectors to the background owner, "
             "whatever the project's size; 0: always hand off.")
    index_within_seconds: float = _opt(
        1.5, min=0.0, max=600.0,
        help="A CLI command on a project not fully indexed reads files (source code first) "
             "until this many seconds after it started (its imports and the opening of the "
             "index count; at least 0.5 s of reading is left, and its first 50 files are read "
             "whatever the time), answers from what it read and "
             "the text of the files not read, and hands the rest to the background owner; 0: "
             "read every file before answering.")
    warm_after_load_ms: int = _opt(
        150, min=0,
        help="A CLI command whose indexes took longer than this to load (a large project in "
             "a cold process) leaves a background owner behind, so the commands after it "
             "answer warm; 0: never.")
    memory_limit_mb: int = _opt(
        600, min=128,
        help="Memory the owner process is sized for: DuckDB's buffer pool gets an eighth of "
             "it, chunk texts and float32 vectors are kept in a spool file instead of memory, "
             "the embedder runs in token-capped batches (smaller near this limit) and hands "
             "its scratch memory back, and an embedding batch and the lexical index's fold "
             "take turns; `contextd stats` shows the owner's resident size against it.")
    idle_exit_seconds: int = _opt(900, min=5, help="A background owner exits after this "
                                                    "long without calls, once its work is "
                                                    "done.")


# ----- [mcp]: the MCP server's tool list ---------------------------------------------------
# The opt-in tool groups of ``contextd serve`` (contextd.mcp.tool_kinds says which tool is in
# which; docs/MCP_TOOLS.md lists them). The core tools (query_context, refresh_context,
# get_context_stats) are always offered; "all" turns every group on.
MCP_TOOL_GROUPS = ("admin", "memory", "knowledge", "reports", "contextual", "related")


@dataclass(frozen=True)
class McpConfig:
    tools: list[str] = _opt([], choices=(*MCP_TOOL_GROUPS, "all"),
                            help="Tool groups `contextd serve` offers beside the core tools "
                                 "(query_context, refresh_context, get_context_stats): admin, "
                                 "memory, knowledge, reports, contextual, related, or all; "
                                 "`serve --tools` overrides it. Every tool listed costs an "
                                 "agent context on each request, so the default is none.")
    compatibility: str = _opt("none", choices=("none", "seed002"),
                              help="Extra tool names for agents written against another "
                                   "server: seed002 offers every tool group and adds "
                                   "rebuild_index, index_status, "
                                   "cancel_index_generation, reinitialize_schema and the "
                                   "deprecated generate_report; none keeps the list short "
                                   "(every tool's description costs an agent context).")


# ----- [projects.NAME]: several projects in one index -----------------------------------
@dataclass(frozen=True)
class ProjectScopeConfig:
    """One named project of a monorepo: the files under its watch paths, less its ignore
    patterns. Queries may name projects (``contextd query --project``, query_context's
    ``projects``); each hit then says which project it comes from."""

    watch_paths: list[str] = _opt([], help="Directories of this project, relative to the "
                                           "root (e.g. [\"backend/src/\", \"backend/docs/\"]).")
    ignore_patterns: list[str] = _opt([], help="gitignore-style patterns (relative to the "
                                               "root) left out of this project.")


@dataclass(frozen=True)
class ContextConfig:
    """The whole configuration; ``source`` is the file it came from (None: defaults)."""

    core: CoreConfig = field(default_factory=CoreConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    watcher: WatcherConfig = field(default_factory=WatcherConfig)
    indexing: IndexingConfig = field(default_factory=IndexingConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    chunking: dict[str, LanguageChunking] = field(default_factory=default_chunking)
    query: QueryConfig = field(default_factory=QueryConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    providers: dict[str, ProviderConfig] = field(default_factory=default_providers)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)
    security: SecurityConfig = field(default_factory=SecurityConfig)
    contextualizer: ContextualizerConfig = field(default_factory=ContextualizerConfig)
    ranking: RankingConfig = field(default_factory=RankingConfig)
    sessions: SessionsConfig = field(default_factory=SessionsConfig)
    reports: ReportsConfig = field(default_factory=ReportsConfig)
    ui: UiConfig = field(default_factory=UiConfig)
    stash: StashConfig = field(default_factory=StashConfig)
    knowledge: KnowledgeConfig = field(default_factory=KnowledgeConfig)
    owner: OwnerConfig = field(default_factory=OwnerConfig)
    mcp: McpConfig = field(default_factory=McpConfig)
    projects: dict[str, ProjectScopeConfig] = field(default_factory=dict)
    source: str | None = field(default=None, metadata={"internal": True})
    # Dotted keys the file set (e.g. "embedding.model"): they win over the environment. Not
    # compared: two configurations with the same values are the same configuration.
    explicit_keys: frozenset[str] = field(default=frozenset(), compare=False,
                                          metadata={"internal": True})
    # What loading accepted but wants said (another spelling of a key, a key with no effect
    # here): ``contextd validate-config`` lists them as warnings.
    notes: tuple = field(default=(), compare=False, metadata={"internal": True})

    def chunking_for(self, language: str) -> LanguageChunking:
        """Chunking settings of a language, falling back to the defaults."""
        return self.chunking.get(language) or LanguageChunking()

    def provider(self, provider_id: str) -> ProviderConfig:
        """Settings of a provider; an unconfigured (e.g. third-party) provider gets defaults."""
        return self.providers.get(provider_id) or ProviderConfig()


SECTIONS = {f.name: f for f in dataclasses.fields(ContextConfig) if not f.metadata.get("internal")}
