"""Operations that answer: queries, code related to a location, search sessions, contextual
retrieval and the token usage agents report."""

from __future__ import annotations

import os
import posixpath
from typing import Any, Sequence

from contextd.errors import UsageError
from contextd.operations.declare import operation
from contextd.query.records import QueryRequest, QueryResponse
from contextd.query.related import RelatedResult
from contextd.records import to_dict
from contextd.sessions.records import SearchRequest, SearchResults, SearchSession, SessionList


@operation(mcp=("query_context", "knowledge_search"), http=("/query_context",), cli=("query",),
           api=("ServiceModule.query",))
def query(engine, request: QueryRequest) -> QueryResponse:
    """Answer a request, saying what the answer cannot include yet: while files are still
    being indexed an empty answer waits briefly for them, then says how far indexing is
    (never a bare "nothing matched"); while vectors are still being computed, how far that
    is. ``k`` and the token budget are limited by ``[query] max_k`` and
    ``max_budget_tokens`` here, so every surface refuses the same requests the same way."""
    limits = engine.project.config.query
    if request.k is not None and request.k > limits.max_k:
        raise UsageError(f"k: at most {limits.max_k} results per query ([query] max_k in "
                         f"context.toml), got {request.k}")
    if request.max_tokens is not None and request.max_tokens > limits.max_budget_tokens:
        raise UsageError(f"budget: at most {limits.max_budget_tokens} tokens per query "
                         f"([query] max_budget_tokens in context.toml), got {request.max_tokens}")
    return answer_within_engine(engine, request)


def answer_within_engine(engine, request: QueryRequest) -> QueryResponse:
    """A query asked by the engine itself (a search session keeps every result it asks for,
    so its budget is not a caller's and not held to ``max_budget_tokens``)."""
    from contextd.runtime.indexing_notes import answer_while_indexing

    return answer_while_indexing(engine.indexer, lambda: engine.module.query(request))


@operation(mcp=("search_knowledge",), cli=("search",))
def search_knowledge(engine, request: SearchRequest) -> SearchSession:
    """Run a search, keep its best results as a new session; its id and preview."""
    return engine.sessions.search(request)


@operation(mcp=("get_search_results", "create_rag_report", "generate_report"), cli=("search",))
def get_search_results(engine, session_ids: Sequence[str],
                       limit: int | None = None) -> SearchResults:
    """Full results of stored sessions."""
    return engine.sessions.results(session_ids, limit)


@operation(mcp=("list_search_results",), cli=("search",))
def list_search_results(engine) -> SessionList:
    """Live sessions, newest first."""
    return engine.sessions.list()


@operation(mcp=("generate_context_for_chunk",))
def generate_context_for_chunk(engine, chunk: str, document: str,
                               metadata: dict[str, Any] | None = None,
                               max_words: int = 100) -> dict[str, Any]:
    """The configured contextualizer's prefix for one chunk of a document, with its quality
    score and tokens (:mod:`contextd.contextualizers.single`)."""
    from contextd.contextualizers.single import generate_for_chunk

    return to_dict(generate_for_chunk(engine.project.config, chunk, document, metadata,
                                      max_words))


@operation(mcp=("reindex_with_context",))
def reindex_with_context(engine, batch_size: int | None = None,
                         max_workers: int | None = None, llm_provider: str | None = None,
                         wait: bool = False) -> dict[str, Any]:
    """Re-index every file with contextual prefixes as a tracked, resumable job
    (:mod:`contextd.runtime.contextual_jobs`); the job and its progress."""
    from contextd.runtime import contextual_jobs

    contextual_jobs.check_request(engine.project.config, batch_size, max_workers,
                                  llm_provider)
    result = engine.rebuild(wait=wait, created_by=contextual_jobs.CREATED_BY)
    return {"success": result.status not in ("failed",), "job_id": result.job_id,
            "message": result.message, "progress": engine.reindexing_progress()}


@operation(mcp=("get_reindexing_progress",))
def reindexing_progress(engine) -> dict[str, Any]:
    """The latest contextual re-index job's progress."""
    from contextd.runtime import contextual_jobs

    job = next((j for j in engine.store.list_jobs(limit=200)
                if j.created_by == contextual_jobs.CREATED_BY), None)
    return contextual_jobs.progress(job)


@operation(mcp=("search_with_contextual_retrieval",), cli=("query",))
def contextual_search(engine, query: str, limit: int = 10,
                      score_threshold: float | None = None, ab: bool = False,
                      expect: Sequence[str] = ()) -> dict[str, Any]:
    """Search with the contextual prefixes, with the A/B comparison against the plain
    chunks when ``ab`` (``expect``: files known to answer the query, whose rank each side
    reports)."""
    return to_dict(engine.module.contextual.search(query, limit, score_threshold, ab,
                                                   expect))


@operation(mcp=("get_contextual_retrieval_stats",))
def contextual_stats(engine) -> dict[str, Any]:
    """How many chunks carry a contextual prefix, and what generating them cost."""
    return engine.module.contextual.stats()


@operation(mcp=("report_token_usage",), cli=("tokens",))
def report_task_usage(engine, task_id: str, op: str, tokens_input: int, tokens_output: int,
                      agent: str | None = None, context_tokens: int | None = None,
                      notes: str | None = None) -> dict[str, Any]:
    """Record one task run's tokens (``op``: before_integration, a run without contextd, or
    after_integration); the token-reduction report including it."""
    return engine.module.report_task_usage(task_id, op, tokens_input, tokens_output, agent,
                                           context_tokens, notes)


@operation(mcp=("get_token_reduction_report",), cli=("tokens",))
def token_reduction(engine) -> dict[str, Any]:
    """The token-reduction report over every reported task run."""
    return engine.module.token_reduction()


@operation(mcp=("find_related",), cli=("related",))
def related(engine, path: str, line: int, k: int = 10,
            wait_for_model: bool = True) -> RelatedResult:
    """The code most like the chunk at ``path``:``line`` (project-relative): near-copies and
    code that calls alike (:mod:`contextd.query.related`), compared by the vectors the index
    holds when the model is ready (``wait_for_model``: load it first, at most
    MODEL_WAIT_S)."""
    from contextd.query.pipeline import MODEL_WAIT_S
    from contextd.query.related import related_in

    if k < 1 or line < 1:
        raise UsageError(f"k and line start at 1 (got k={k}, line={line})")
    if os.path.isabs(path):  # inside the root, as the catalog names it
        path = os.path.relpath(path, engine.project.root).replace(os.sep, "/")
    path = posixpath.normpath(path.strip())
    module = engine.module
    semantic = module.pipeline.provider("semantic")
    if wait_for_model and semantic is not None:
        module.embedder.wait(MODEL_WAIT_S)

    def vectors_of(chunk_ids: Sequence[str]) -> dict[str, Any]:
        if semantic is None or not semantic.is_available():
            return {}
        return semantic.vectors(chunk_ids)

    return related_in(module.catalog, vectors_of, path, line, k)
