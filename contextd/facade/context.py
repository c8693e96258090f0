"""ProjectContext: one project's context behind one object.

A thin facade over three capabilities that share one index and one embedding model:

* the query pipeline (:mod:`contextd.query.pipeline`): ``get_task_context``, ``query``,
  ``retrieve``, ``render``;
* the knowledge base (:mod:`contextd.knowledge`): ``knowledge``, ``knowledge_search``;
* agent memory (:mod:`contextd.stash`): ``stash``.

The Engine (:mod:`contextd.runtime.engine`) builds one per project for the CLI, the MCP tools
and the owner's socket; an orchestrator gets one from ``ContextModule.open``
(:mod:`contextd.api.module`), which adds the choice of deployment mode on top.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Iterable, Sequence

from contextd.contextualizers.stage import stage_stats
from contextd.knowledge.scope import knowledge_request
from contextd.providers.base import EmbedderHandle
from contextd.query.pipeline import MODEL_WAIT_S, QueryPipeline
from contextd.query.records import QueryRequest, QueryResponse
from contextd.query.render import render_context
from contextd.query.task import build_query, task_field, task_scope
from contextd.records import TaskContext

log = logging.getLogger(__name__)


class ProjectContext:
    """Retrieves, fuses, de-duplicates and budgets context for a project's index; holds its
    knowledge base and agent memory."""

    def __init__(self, project: Any, store: Any):
        self.project = project
        self.store = store
        self.config = project.config
        self.embedder = EmbedderHandle(self.config)
        self.pipeline = QueryPipeline(project, store, self.embedder, lambda: self.stash)
        # ``query(QueryRequest) -> QueryResponse`` is the pipeline's own method: the Python API
        # and the query operation (CLI, MCP tools, socket) reach it with no wrapper between.
        self.query = self.pipeline.query
        self._lock = threading.RLock()
        self._stash: Any = None
        self._knowledge: Any = None
        self._embed_lock = threading.Lock()
        # The Engine this context was opened with (ContextModule.open): closed by shutdown().
        self._engine: Any = None

    # ----- what the pipeline holds ------------------------------------------------------------
    @property
    def budgets(self):
        """The :class:`contextd.query.budget.BudgetManager` of this project."""
        return self.pipeline.budgets

    @property
    def catalog(self):
        """The in-memory chunk catalog every provider shares."""
        return self.pipeline.catalog

    @property
    def knowledge_scope(self):
        """Knowledge contexts → the documents a query's scope holds."""
        return self.pipeline.knowledge_scope

    # ----- the query path -----------------------------------------------------------------------
    def get_task_context(self, task: Any) -> TaskContext:
        """Context for a task (dict or object with title, description, keywords, paths,
        languages, kinds, exclude_patterns, files, folders, contexts (knowledge contexts
        searched beside the project), projects ([projects.*] searched each on its own and
        fused), complexity 1-10, task_type, task_id, k, and memory: a
        session id (or "*") to add that agent memory to the context).

        With ``core.fallback_enabled`` any failure gives an empty TaskContext and a logged
        warning instead of an exception.
        """
        task_id = str(task_field(task, "task_id", ""))
        query = build_query(task)
        try:
            scope = task_scope(task)
            contexts = tuple(task_field(task, "contexts", ()))
            if contexts:
                scope = self.knowledge_scope.scope_for(
                    QueryRequest(query, scope=scope, contexts=contexts),
                    self.store.generation())
            budget = self.budgets.calculate(task_field(task, "complexity"),
                                            task_field(task, "task_type"))
            k = int(task_field(task, "k", self.config.query.default_k))
            projects = tuple(task_field(task, "projects", ())) or None
            return self.pipeline.retrieve(query, scope=scope, budget=budget, k=k, task_id=task_id,
                                 projects=projects)
        except Exception as exc:
            if not self.config.core.fallback_enabled:
                raise
            log.warning("context retrieval failed, continuing without context: %s", exc)
            return TaskContext.empty(task_id, query, f"context unavailable: {exc}")

    @staticmethod
    def build_query(task: Any) -> str:
        """Title, description and keywords of a task as one query text."""
        return build_query(task)

    def render(self, task_context: TaskContext, max_tokens: int | None = None) -> str:
        """The ``<project_context>`` block of a TaskContext."""
        return render_context(task_context, max_tokens)

    def task_prompt(self, task: Any, task_context: TaskContext | None = None,
                    max_tokens: int | None = None) -> str:
        """The task prompt: the task's header, its ``<project_context>``
        block and the Guidelines (the context is retrieved when not given)."""
        from contextd.query.prompt import render_task_prompt

        if task_context is None:
            task_context = self.get_task_context(task)
        return render_task_prompt(task, task_context, max_tokens)

    # ----- contextual retrieval --------------------------------------------------------------------
    @property
    def contextual(self):
        """Search with and without the contextual prefixes, and their statistics
        (:class:`contextd.facade.contextual.ContextualRetrieval`)."""
        from contextd.facade.contextual import ContextualRetrieval

        return ContextualRetrieval(self)

    # ----- agent memory (see contextd.stash) ------------------------------------------------------
    @property
    def stash(self) -> Any:
        """Agent memory of this project (:class:`contextd.stash.service.StashService`), one
        per project so its in-memory index is shared by the stash tools and the provider."""
        with self._lock:
            if self._stash is None:
                from contextd.stash.service import StashService

                self._stash = StashService(self.store, self.config, self.embedder)
            return self._stash

    # ----- knowledge base (see contextd.knowledge) ------------------------------------------------
    @property
    def knowledge(self):
        """The :class:`contextd.knowledge.service.KnowledgeBase` of this index."""
        with self._lock:
            if self._knowledge is None:
                from contextd.knowledge.service import KnowledgeBase

                self._knowledge = KnowledgeBase(self.project, self.store, self._embed_missing,
                                                self.config.embedding.model)
            return self._knowledge

    def _embed_missing(self, paths: Sequence[str]) -> int:
        """Vectors for the chunks of stored files ``paths`` lacking one (a knowledge add's
        new chunks), with the model the queries use; 0 when it cannot load (the add stays
        searchable by text)."""
        from contextd.indexer.embed_stage import embed_missing

        embedder = self.embedder.wait(MODEL_WAIT_S)
        if embedder is None:
            return 0
        return embed_missing(self.store, embedder, self.config.embedding.batch_size,
                             lock=self._embed_lock, paths=paths)

    def knowledge_search(self, query: str, contexts: Iterable[str] | None = None,
                         k: int | None = None, include_project: bool = False,
                         max_tokens: int | None = None, min_relevance: float | None = None
                         ) -> QueryResponse:
        """Search knowledge contexts (all when none is named), with the project's chunks
        too when ``include_project``; hits carry contexts, document, page and the
        document's metadata in metadata; ``min_relevance`` drops hits scoring below it."""
        return self.query(knowledge_request(query, list(contexts or ()), k, include_project,
                                            max_tokens, wait_for_model=True,
                                            min_relevance=min_relevance))

    # ----- token usage agents report -----------------------------------------------------------
    def report_task_usage(self, task_id: str, op: str, tokens_input: int, tokens_output: int,
                          agent: str | None = None, context_tokens: int | None = None,
                          notes: str | None = None) -> dict[str, Any]:
        """Record one task run's tokens (``op``: before_integration, a run without contextd,
        or after_integration); returns the token-reduction report including it."""
        from contextd.query.token_reduction import check_report

        canonical = check_report(op, task_id, tokens_input, tokens_output)
        self.store.record_task_usage(canonical, task_id.strip(), tokens_input, tokens_output,
                                     agent or None, context_tokens, notes or None)
        return self.token_reduction()

    def token_reduction(self) -> dict[str, Any]:
        """The token-reduction report (:mod:`contextd.query.token_reduction`)."""
        from contextd.query.token_reduction import token_reduction

        return token_reduction(self.store.task_usage())

    # ----- reporting and lifecycle ----------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Providers (id, name, type, enabled, available, stats), storage, average latencies
        and languages, for ``contextd stats`` and get_context_stats."""
        self.pipeline.usage.flush()
        providers = self.pipeline.provider_stats()
        storage = self.store.stats()
        return {"providers": providers, "storage": storage,
                "cache_hit_rate": self.store.cache_hit_rate(),
                "performance": self.pipeline.performance(),
                "languages": storage.get("languages", {}),
                "contextualizer": {**stage_stats(self.config, self.store),
                                   "contextualized_chunks": storage.get("contextualized_chunks")}}

    def shutdown(self) -> None:
        """Shut the pipeline's providers down (and close the index when opened with
        ``ContextModule.open``)."""
        with self._lock:
            engine, self._engine = self._engine, None
        self.pipeline.shutdown()
        if engine is not None:
            engine.close()
