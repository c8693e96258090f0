"""Engine records → the MCP tools' structured answers and readable texts.

The structured answer has camelCase fields, as docs/MCP_TOOLS.md lists them; the text is what most agents
read, so it leads with the answer and keeps each snippet with its location.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from contextd.errors import UsageError
from contextd.runtime.indexing_notes import STILL_INDEXING
from contextd.records import ContextScope, to_dict
from contextd.query.render import skipped_text
from contextd.mcp.schemas import (
    Hit, JobStatusResult, Offsets, QueryResult, RebuildResult, RefreshResult, Scope,
    StatsResult,
)

# Most files counted for refresh_context's estimate before it stops walking.
COUNT_LIMIT = 100_000


def default_budget(config: Any) -> int:
    """The token budget of a call that names none: ``[budget] default_max_tokens``, within
    ``[query] max_budget_tokens`` (the query handler refuses only what a caller asked for)."""
    return min(config.budget.default_max_tokens, config.query.max_budget_tokens)


def query_request(query: str, k: int, scope: Scope, max_tokens: int, min_score: float,
                  contexts: Sequence[str] | None = None, projects: Sequence[str] | None = None):
    """The Engine's QueryRequest for a query_context call (``contexts``: knowledge contexts
    searched beside the project; ``projects``: [projects.*] searched and fused)."""
    from contextd.query.records import QueryRequest

    return QueryRequest(query=query, k=k, max_tokens=max_tokens,
                        min_score=min_score or None, task_id="mcp",
                        contexts=tuple(contexts) if contexts else None,
                        projects=tuple(projects) if projects else None,
                        scope=ContextScope(paths=tuple(scope.paths),
                                           languages=tuple(scope.languages),
                                           kinds=tuple(scope.kinds), files=tuple(scope.files),
                                           folders=tuple(scope.folders), memory=scope.memory,
                                           memory_min_similarity=scope.memory_min_similarity,
                                           roles=tuple(scope.roles)))


def query_result(query: str, response, max_tokens: int, min_score: float) -> QueryResult:
    """The structured answer of query_context; ``minScore`` applies to the final scores."""
    hits = [Hit(chunkId=h.chunk_id, score=h.score, filePath=h.file_path, label=h.label,
                kind=h.kind, snippet=h.snippet, language=h.language,
                offsets=Offsets(start=h.start_line, end=h.end_line), tokens=h.tokens,
                providers=list(h.providers), document=h.metadata.get("document"),
                contexts=h.metadata.get("contexts"), page=h.metadata.get("page"), role=h.role,
                projects=h.metadata.get("projects"))
            for h in response.hits if h.score >= min_score]
    return QueryResult(query=query, total=response.total, hits=hits,
                       totalTokens=sum(h.tokens for h in hits), maxTokens=max_tokens,
                       notes=list(response.notes))


def query_text(result: QueryResult) -> str:
    """The hits as a readable list: location and label, then the snippet in a fence."""
    entries = []
    for hit in result.hits:
        label = f" {hit.label}" if hit.label else ""
        project = f"[{', '.join(hit.projects)}] " if hit.projects else ""
        entries.append((f"{project}{hit.file_path}:{hit.offsets.start}-{hit.offsets.end}{label} "
                        f"({hit.kind}, {hit.language}, {hit.role or 'unknown'} file, "
                        f"score {hit.score:.2f})",
                        hit.snippet, hit.language))
    # While the project is still being indexed the note says what is missing: an empty
    # answer is not "nothing matched".
    indexing = any(n.startswith(STILL_INDEXING) for n in result.notes)
    return listing(f"{len(result.hits)} result(s) of {result.total} found for "
                   f"{result.query!r} ({result.total_tokens} of {result.max_tokens} tokens).",
                   result.notes,
                   "" if indexing else "Nothing matched: try other words, a wider scope, or "
                   "get_context_stats to check that the project is indexed.", entries)


def listing(intro: str, notes: Sequence[str], empty_hint: str,
            entries: Sequence[tuple[str, str, str]]) -> str:
    """A readable answer: the intro, notes, ``empty_hint`` when there is no entry, then each
    (heading, snippet, language) as a ``##`` heading and the snippet in a fence."""
    lines = [intro] + [f"Note: {note}" for note in notes]
    if not entries and empty_hint:
        lines.append(empty_hint)
    for heading, snippet, language in entries:
        fence = "````" if "```" in snippet else "```"
        lines += [f"\n## {heading}", f"{fence}{language}\n{snippet.rstrip()}\n{fence}"]
    return "\n".join(lines)


def stats_result(stats: Any, config) -> StatsResult:
    """get_context_stats in the shape of docs/MCP_TOOLS.md, from the ``stats`` operation's
    :class:`contextd.operations.records.EngineStats`."""
    storage, performance = stats.storage, stats.performance
    return StatsResult(
        enabled=config.core.enabled, mode=config.core.mode,
        providers=list(stats.providers),
        storage={"totalFiles": storage.get("total_files"),
                 "totalChunks": storage.get("total_chunks"),
                 "knowledgeDocuments": storage.get("knowledge_documents"),
                 "knowledgeChunks": storage.get("knowledge_chunks"),
                 "totalEmbeddings": sum((storage.get("embeddings_by_model") or {}).values()),
                 "embeddingsByModel": storage.get("embeddings_by_model"),
                 "dbSizeMB": storage.get("db_size_mb"),
                 "lastIndexed": storage.get("last_indexed"),
                 "errors": storage.get("errors"),
                 "skippedFiles": storage.get("skipped") or {},
                 "skippedExamples": storage.get("skipped_examples") or []},
        performance={"queries": storage.get("queries"),
                     "avgQueryLatencyMs": storage.get("avg_query_latency_ms"),
                     "avgTokensPerQuery": storage.get("avg_tokens_per_query"),
                     "cacheHitRate": stats.cache_hit_rate,
                     "providerLatencyMs": performance.get("avg_ms", {})},
        languages=stats.languages, indexing=stats.indexing,
        recentActivity=list(stats.recent_jobs), owner=stats.owner,
        contextualizer=stats.contextualizer, embedding=stats.embedding)


def stats_text(result: StatsResult) -> str:
    """A few lines a person or agent can read at a glance."""
    storage, indexing = result.storage, result.indexing
    available = [p["id"] for p in result.providers if p.get("available")]
    waiting = [p["id"] for p in result.providers if p.get("enabled") and not p.get("available")]
    lines = [f"contextd {'enabled' if result.enabled else 'DISABLED'} ({result.mode}); "
             f"owner pid {result.owner.get('pid')}",
             f"index: {storage['totalFiles']} files, {storage['totalChunks']} chunks, "
             f"{storage['totalEmbeddings']} embeddings, {storage['dbSizeMB']} MB, "
             f"last indexed {storage['lastIndexed']}",
             f"indexing: {indexing.get('state')} ({indexing.get('text', '')}); "
             f"embeddings pending: {indexing.get('embeddings_pending')}",
             f"providers available: {', '.join(available) or 'none'}"
             + (f"; not ready: {', '.join(waiting)}" if waiting else ""),
             "languages: " + ", ".join(f"{k} {v}" for k, v in result.languages.items())]
    if storage.get("skippedFiles"):
        lines.append(skipped_text(storage["skippedFiles"]))
    lines += [f"not indexed as written: {problem['path']}: {problem['reason']}"
              for problem in indexing.get("problem_files") or []]
    embedding = result.embedding
    if embedding.get("identity"):
        lines.append(f"embedding: {embedding['identity']}; queries: "
                     f"{embedding.get('query_backend')}")
    if "requests" in embedding:
        lines.append(f"remote embedding: {embedding['texts']} texts in {embedding['requests']} "
                     f"requests, {embedding['tokens']} tokens, {embedding['retries']} retries, "
                     f"{embedding['rate_limit_wait_s']} s rate-limit waits")
    return "\n".join(lines)


def files_under(root: Path, paths: Sequence[str]) -> int:
    """How many files refresh_context will look at; refuses paths outside the root, so the
    agent hears about a typo instead of a silent no-op."""
    total = 0
    for raw in paths:
        path = Path(os.path.normpath(raw if os.path.isabs(raw) else root / raw))
        if path != root and root not in path.parents:
            raise UsageError(f"{raw} is outside the project root {root}; give paths relative "
                             "to the root")
        if path.is_dir():
            for _, dirs, files in os.walk(path):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                total += len(files)
                if total >= COUNT_LIMIT:
                    return total
        else:
            total += 1  # a deleted file still counts: the refresh removes it
    return total


def refresh_result(report) -> RefreshResult:
    """The answer of a synchronous refresh_context."""
    files = report.files_indexed + report.files_removed + report.files_failed
    return RefreshResult(status="completed", filesQueued=files, message=report.summary,
                         report=to_dict(report), refused=report.refused)


def with_refused(result: RefreshResult, refused) -> RefreshResult:
    """``result`` naming also the paths refused before the refresh ran."""
    rows = [{"path": r.path, "reason": r.reason} for r in refused]
    return result.model_copy(update={"refused": rows + result.refused})


def rebuild_result(result, partial: bool) -> RebuildResult:
    """The answer of rebuild_context."""
    return RebuildResult(status=result.status, jobId=result.job_id,
                         scope="partial" if partial else "full",
                         estimatedFiles=result.estimated_files,
                         estimatedTime=result.estimated_seconds, message=result.message,
                         progress=result.progress, details=result.details or None)


def job_status_result(status, include_logs: bool) -> JobStatusResult:
    """The answer of get_rebuild_status and cancel_rebuild; an unknown id is the agent's
    mistake to fix."""
    if status is None:
        raise UsageError("no job with that jobId: use the jobId that rebuild_context returned")
    progress = status.progress or {}
    message = f"Job {status.job_id} ({status.job_type}) is {status.status}"
    if status.status == "in_progress" and progress.get("filesTotal"):
        message += (f": {progress.get('filesProcessed', 0):,} / {progress['filesTotal']:,} "
                    f"files ({progress.get('percentComplete', 0)}%)")
    if status.error:
        message += f": {status.error}"
    return JobStatusResult(jobId=status.job_id, status=status.status, message=message + ".",
                           progress=progress, result=_without_log(status.result),
                           error=status.error, logs=status.logs if include_logs else None)


def _without_log(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """The final report without its log lines (they come with includeLogs)."""
    if result is None:
        return None
    return {key: value for key, value in result.items() if key != "log"}
