"""Typed inputs and outputs of the MCP tools (the reference generated from them:
docs/MCP_TOOLS.md).

The tools' JSON Schemas are generated from these models and the tool signatures, so the
schema a client sees, the validation the server applies and the documentation cannot drift
apart. Field names are the spec's camelCase; nested inputs forbid unknown keys, so a
misspelt option is reported instead of silently ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

JobState = Literal["queued", "in_progress", "completed", "failed", "cancelled", "interrupted"]


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Scope(_Input):
    """Where to search; empty lists mean no restriction."""

    paths: list[str] = Field(default_factory=list, description=(
        "Files, directories or globs relative to the project root, e.g. ['src/auth/', "
        "'**/*_test.py']."))
    languages: list[str] = Field(default_factory=list, description=(
        "Languages to keep, e.g. ['python', 'typescript', 'markdown']."))
    kinds: list[str] = Field(default_factory=list, description=(
        "Chunk kinds to keep: CODE_FUNCTION, CODE_CLASS, CODE_BLOCK, MARKDOWN_SECTION, "
        "DOCSTRING, COMMENT, YAML_BLOCK, CONFIG_BLOCK, SQL_STATEMENT, PARAGRAPH."))
    memory: str | None = Field(None, description=(
        "Also search your stashed memory (stash_context): your session id, or '*' for every "
        "session's. Omit it for project context only."))
    memory_min_similarity: float | None = Field(None, alias="memoryMinSimilarity", ge=-1.0,
                                                le=1.0, description=(
        "Cosine similarity cut-off for that memory (default [stash] min_similarity); lower it "
        "when a retrieval of memory comes back empty."))
    files: list[str] = Field(default_factory=list, description=(
        "Exact files, relative to the project root, e.g. ['src/auth/jwt.py']."))
    folders: list[str] = Field(default_factory=list, description=(
        "Folders: 'hooks' = any folder of that name, '/src/hooks' = from the project root, "
        "'src/*/hooks' = a glob. Several are OR-ed; with files, both must hold."))
    roles: list[Literal["source", "test", "doc", "config"]] = Field(
        default_factory=list, description=(
            "File roles to keep, from path conventions and language: 'source' (code), 'test', "
            "'doc' (prose, docs/, examples/, README, CHANGES), 'config'."))


class Filters(_Input):
    """Cut-offs applied to the ranked results."""

    min_score: float = Field(0.0, alias="minScore", ge=0.0, le=1.0, description=(
        "Drop hits scoring below this (0-1)."))
    max_tokens: int | None = Field(None, alias="maxTokens", ge=50, description=(
        "Token budget of all snippets together; default from the project's configuration "
        "(budget.default_max_tokens), at most [query] max_budget_tokens (usually 6000)."))


class RebuildOptions(_Input):
    """How a rebuild runs."""

    clear_errors: bool = Field(True, alias="clearErrors",
                               description="Forget recorded indexing errors first.")
    vacuum: bool = Field(True, description="Compact the database file afterwards.")
    validate_only: bool = Field(False, alias="validateOnly", description=(
        "Dry run: report how many files would be re-indexed and how long it would take; "
        "changes nothing."))


class Offsets(BaseModel):
    """Where a snippet sits in its file: 1-based, inclusive line numbers."""

    start: int
    end: int


class Hit(BaseModel):
    """One ranked snippet."""

    chunk_id: str = Field(alias="chunkId")
    score: float
    file_path: str = Field(alias="filePath")
    label: str
    kind: str
    snippet: str
    language: str
    offsets: Offsets
    tokens: int
    document: str | None = Field(None, description=(
        "Knowledge hits: the file the document was read from."))
    contexts: list[str] | None = Field(None, description=(
        "Knowledge hits: the contexts holding the document."))
    page: int | None = Field(None, description="Knowledge hits of PDFs: the page.")
    providers: list[str] = Field(default_factory=list)
    role: str = Field("", description="The file's role: source, test, doc or config.")
    projects: list[str] | None = Field(None, description=(
        "The [projects.*] of context.toml holding the file (when projects are configured)."))


class QueryResult(BaseModel):
    """The answer of query_context."""

    query: str
    total: int = Field(description="Matches found before the budget and k cut the list.")
    hits: list[Hit]
    total_tokens: int = Field(alias="totalTokens")
    max_tokens: int = Field(alias="maxTokens", description="The token budget that applied.")
    notes: list[str] = Field(default_factory=list)


class RefreshResult(BaseModel):
    """The answer of refresh_context."""

    status: Literal["queued", "completed"]
    files_queued: int = Field(alias="filesQueued")
    message: str
    report: dict[str, Any] | None = Field(None, description="The indexing report (sync runs).")
    refused: list[dict[str, str]] = Field(default_factory=list, description=(
        "Paths not used, each with its reason: {path, reason}."))


class StatsResult(BaseModel):
    """The answer of get_context_stats."""

    enabled: bool
    mode: str
    providers: list[dict[str, Any]] = Field(description=(
        "id, name, type, enabled, available, stats of each provider."))
    storage: dict[str, Any] = Field(description=(
        "totalFiles, totalChunks, totalEmbeddings, dbSizeMB, lastIndexed, errors."))
    performance: dict[str, Any] = Field(description=(
        "queries, avgQueryLatencyMs, avgTokensPerQuery, providerLatencyMs, cacheHitRate "
        "(null until a query records one)."))
    languages: dict[str, int] = Field(description="Chunks per language.")
    indexing: dict[str, Any] = Field(description=(
        "state (idle, indexing, embedding), files indexed / total, ETA, embeddings pending, "
        "problem_files (path, reason), a one-line text."))
    recent_activity: list[dict[str, Any]] = Field(alias="recentActivity", description=(
        "The latest jobs (bootstrap, rebuilds) with their status and figures."))
    owner: dict[str, Any] = Field(description=(
        "The process owning the index: pid, this_process, rss_mb, peak_rss_mb, "
        "memory_limit_mb, log (the file it logs its jobs to, or stderr)."))
    contextualizer: dict[str, Any] = Field(default_factory=dict, description=(
        "strategy, contextualized_chunks, and what it did since the owner started."))
    embedding: dict[str, Any] = Field(default_factory=dict, description=(
        "backend, identity, dimension, query_backend; for a remote server its endpoint and "
        "request figures."))


class RebuildResult(BaseModel):
    """The answer of rebuild_context."""

    status: JobState
    job_id: str | None = Field(None, alias="jobId")
    scope: Literal["full", "partial"]
    estimated_files: int | None = Field(None, alias="estimatedFiles")
    estimated_time: float | None = Field(None, alias="estimatedTime",
                                         description="Seconds, estimated.")
    message: str
    progress: dict[str, Any] | None = Field(None, description=(
        "filesProcessed, filesTotal, percentComplete, currentFile, startedAt, ..."))
    details: dict[str, Any] | None = None


class JobStatusResult(BaseModel):
    """The answer of get_rebuild_status and cancel_rebuild."""

    job_id: str = Field(alias="jobId")
    status: JobState
    message: str
    progress: dict[str, Any] | None = Field(None, description=(
        "filesProcessed, filesTotal, percentComplete, currentFile, startedAt, ..."))
    result: dict[str, Any] | None = None
    error: str | None = None
    logs: list[str] | None = None
