"""ContextModule: the one entry point of the query path (spec 004 §5.1).

CLI, MCP tools, the owner's socket and an orchestrator's pre-task hook all come here:

    task/query → query understanding (a dense, a lexical and a symbol query)
               → scope + budget → enabled providers in parallel (isolated, time-limited),
                 each sent the query meant for its kind
               → fusion → [ranking] boosts (intent x file role, exact evidence)
               → de-duplication → calibration (absolute scores, "no strong match" note,
                 ``min_score``)
               → MMR on embeddings within the token budget
               → matched lines of each snippet (``metadata["matched_lines"]``)
               → TaskContext / QueryResponse (snippets, tokens, attribution, timings;
                 files ranked by their chunks when asked ``by_file``)

Python API (embedded, in-process)::

    from contextd import ContextModule
    module = ContextModule.open("path/to/project")   # indexes it first if it never was
    context = module.get_task_context({"title": "Fix token refresh",
                                       "description": "Expired tokens are not refreshed",
                                       "complexity": 5, "task_type": "BUGFIX"})
    print(module.render(context))
    module.shutdown()
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import queue
import threading
import time
from typing import Any, Iterable

from contextd.budget import BudgetManager
from contextd.confidence import NO_MATCH_NOTE, calibrate
from contextd.contextualize import stage_stats
from contextd.errors import StoreError, UsageError
from contextd.evidence import ExactQuery, matched_lines, words
from contextd.providers.base import (
    DEFAULT_CANDIDATES, EmbedderHandle, ProviderContext, ProviderQuery,
)
from contextd.providers.catalog import ChunkCatalog
from contextd.providers.runner import ProviderRun, run_providers
from contextd.knowledge.scope import KnowledgeScope, knowledge_request
from contextd.query_api import FileResult, Hit, QueryRequest, QueryResponse
from contextd.query_understanding import (
    UnderstoodQuery, aggregate_files, apply_boosts, understand,
)
from contextd.ranking import FusionStrategy, deduplicate, fuse, mmr_select
from contextd.records import ContextScope, ContextSnippet, TaskContext, TokenBudget
from contextd.roles import checked_roles
from contextd.render import render_context
from contextd.scope_check import check_scope
from contextd.scrub import scrub_secrets

__all__ = ["ContextModule", "Hit", "QueryRequest", "QueryResponse"]

log = logging.getLogger(__name__)

HYBRID_ID = "hybrid"
SEMANTIC_ID = "semantic"
STASH_ID = "stash"
# Candidates fetched per provider: a multiple of k, so MMR and the budget have a choice.
CANDIDATES_PER_RESULT = 4
# Latencies kept for the averages of ``stats()``.
PERFORMANCE_WINDOW = 1000
# How long a request with wait_for_model waits (the very first run exports the model).
MODEL_WAIT_S = 120.0
# Usage rows arriving within this long of each other are written in one transaction.
USAGE_BATCH_DELAY_S = 0.2
# Lines of a snippet named as the ones that matched the query (a listing's preview).
MATCHED_LINES = 3


def _task_field(task: Any, name: str, default: Any = None) -> Any:
    """A field of a task given as a dict or as an object (dataclass, pydantic model...)."""
    value = task.get(name, default) if isinstance(task, dict) else getattr(task, name, default)
    return default if value is None else value


# Queued after the last row to end the usage thread.
_STOP = object()


class UsageRecorder:
    """Writes usage_metrics rows on a background thread, in order; ``flush`` waits for them.

    Rows are written in batches, one transaction per USAGE_BATCH_DELAY_S at most: a write per
    query would compete with the next query for the CPU on a loaded 2-core machine.
    """

    def __init__(self, store: Any):
        self.store = store
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, *row: Any) -> None:
        """Queue one ``store.record_usage(*row)``."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="contextd-usage",
                                                daemon=True)
                self._thread.start()
        self._queue.put(row)

    def _run(self) -> None:
        stopping = False
        while not stopping:
            rows = [self._queue.get()]
            # Gather what arrives within the delay; a stop request ends the wait at once.
            deadline = time.monotonic() + USAGE_BATCH_DELAY_S
            while rows[-1] is not _STOP and (left := deadline - time.monotonic()) > 0:
                try:
                    rows.append(self._queue.get(timeout=left))
                except queue.Empty:
                    break
            stopping = _STOP in rows
            batch = [row for row in rows if row is not _STOP]
            try:
                if batch:
                    self.store.record_usage_many(batch)
            except Exception as exc:  # metrics must never cost anyone an answer
                log.warning("could not record usage metrics: %s", exc)
            finally:
                for _ in rows:
                    self._queue.task_done()

    def flush(self) -> None:
        """Wait until every queued row is written."""
        self._queue.join()

    def stop(self) -> None:
        """Write what is queued and end the thread. A thread left waiting would keep the
        store (and its DuckDB connection) alive until the interpreter exits, where DuckDB's
        bindings report it as leaked."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(_STOP)
            thread.join()


class ContextModule:
    """Retrieves, fuses, de-duplicates and budgets context for a project's index."""

    def __init__(self, project: Any, store: Any):
        self.project = project
        self.store = store
        self.config = project.config
        self.budgets = BudgetManager(self.config.budget)
        self.embedder = EmbedderHandle(self.config)
        # Chunk rows, paths, symbols and links in memory, shared by every provider.
        self.catalog = ChunkCatalog(store)
        self._lock = threading.RLock()
        self._factories: dict[str, Any] | None = None
        self._providers: dict[str, Any] = {}
        # Set by shutdown(): a warm-up still running in the background stops instead of
        # building providers again over a closing store.
        self._shut_down = False
        self._latency: dict[str, collections.deque] = collections.defaultdict(
            lambda: collections.deque(maxlen=PERFORMANCE_WINDOW))
        self._engine: Any = None
        self._stash: Any = None
        self._usage = UsageRecorder(store)
        # Knowledge contexts → the documents a query's scope holds (cached per generation).
        self.knowledge_scope = KnowledgeScope(store)
        self._knowledge: Any = None
        self._embed_lock = threading.Lock()

    # ----- construction -----------------------------------------------------------------
    @classmethod
    def open(cls, root: str = ".", config_path: str | None = None, *,
             wait_for_model: bool = True, progress: Any = None,
             mode: str | None = None) -> "ContextModule":
        """The module of a project directory, embedded in this process.

        Indexes the project first when it never was (through the indexer), and with
        ``wait_for_model`` loads the embedding model before returning, so the first task
        already gets semantic results. ``shutdown()`` closes the index too.

        ``mode`` (default ``core.mode``): ``standalone`` and ``hybrid`` return a module with
        the same methods whose calls go to the service (see :mod:`contextd.service.modes`).
        """
        from contextd.project import Project

        project = Project.open(root, config_path)
        mode = mode or project.config.core.mode
        if mode in ("standalone", "hybrid"):
            from contextd.service.modes import open_module

            return open_module(project, mode)
        if mode != "embedded":
            raise UsageError(f"mode must be embedded, standalone or hybrid, not {mode!r}")
        from contextd.engine import Engine

        engine = Engine(project)
        if engine.store.generation() == 0:
            engine.ensure_indexed(progress=progress)
        module = engine.module
        module._engine = engine
        module.warm_up(wait=wait_for_model)
        return module

    def provider_factories(self) -> dict[str, Any]:
        """Registered provider factories by id (from the plugin hook, first registration
        wins)."""
        with self._lock:
            if self._factories is None:
                from contextd.plugins import collect

                found = collect("register_providers", key=lambda args: args[0].id)
                self._factories = {pid: reg.value for pid, reg in found.items()}
            return self._factories

    def provider(self, provider_id: str) -> Any:
        """The initialised provider with this id (created on first use), or None if unknown."""
        with self._lock:
            instance = self._providers.get(provider_id)
            if instance is None:
                factory = self.provider_factories().get(provider_id)
                if factory is None:
                    return None
                instance = factory()
                instance.initialize(ProviderContext(project=self.project, config=self.config,
                                                    store=self.store, embedder=self.embedder,
                                                    provider=self.provider,
                                                    catalog=self.catalog,
                                                    extras={"stash": lambda: self.stash}))
                self._providers[provider_id] = instance
            return instance

    def enabled_ids(self) -> list[str]:
        """Ids of registered providers enabled in the configuration."""
        return [pid for pid in self.provider_factories() if self.config.provider(pid).enabled]

    def warm_up(self, wait: bool = False, timeout: float | None = None) -> None:
        """Load the embedding model and build the in-memory indexes, in the background
        (``wait``: before returning)."""
        self.embedder.start()

        def build() -> None:
            try:
                self.catalog.sync()
                self.embedder.wait(timeout)
                for pid in self.enabled_ids():
                    if self._shut_down:
                        return
                    self.provider(pid).warm_up()
            except StoreError:
                if not self._shut_down:
                    raise

        if wait:
            build()
        else:
            threading.Thread(target=build, name="contextd-warm-up", daemon=True).start()

    @property
    def stash(self) -> Any:
        """Agent memory of this project (:class:`contextd.stash.service.StashService`), one
        per module so its in-memory index is shared by the stash tools and the provider."""
        with self._lock:
            if self._stash is None:
                from contextd.stash.service import StashService

                self._stash = StashService(self.store, self.config, self.embedder)
            return self._stash

    # ----- the query path ---------------------------------------------------------------
    def get_task_context(self, task: Any) -> TaskContext:
        """Context for a task (dict or object with title, description, keywords, paths,
        languages, kinds, exclude_patterns, files, folders, contexts (knowledge contexts
        searched beside the project), complexity 1-10, task_type, task_id, k, and memory: a
        session id (or "*") to add that agent memory to the context).

        With ``core.fallback_enabled`` any failure gives an empty TaskContext and a logged
        warning instead of an exception.
        """
        task_id = str(_task_field(task, "task_id", ""))
        query = self.build_query(task)
        try:
            scope = ContextScope(
                paths=tuple(_task_field(task, "paths", ())),
                languages=tuple(_task_field(task, "languages", ())),
                kinds=tuple(_task_field(task, "kinds", ())),
                exclude_patterns=tuple(_task_field(task, "exclude_patterns", ())),
                files=tuple(_task_field(task, "files", ())),
                folders=tuple(_task_field(task, "folders", ())),
                memory=_task_field(task, "memory"),
                roles=tuple(_task_field(task, "roles", ())))
            contexts = tuple(_task_field(task, "contexts", ()))
            if contexts:
                scope = self.knowledge_scope.scope_for(
                    QueryRequest(query, scope=scope, contexts=contexts),
                    self.store.generation())
            budget = self.budgets.calculate(_task_field(task, "complexity"),
                                            _task_field(task, "task_type"))
            k = int(_task_field(task, "k", self.config.query.default_k))
            return self.retrieve(query, scope=scope, budget=budget, k=k, task_id=task_id)
        except Exception as exc:
            if not self.config.core.fallback_enabled:
                raise
            log.warning("context retrieval failed, continuing without context: %s", exc)
            return TaskContext.empty(task_id, query, f"context unavailable: {exc}")

    @staticmethod
    def build_query(task: Any) -> str:
        """Title, description and keywords of a task as one query text."""
        keywords = _task_field(task, "keywords", ())
        if isinstance(keywords, str):
            keywords = [keywords]
        parts = [str(_task_field(task, "title", "")), str(_task_field(task, "description", "")),
                 " ".join(map(str, keywords))]
        return "\n".join(p.strip() for p in parts if p and p.strip())

    def query(self, request: QueryRequest) -> QueryResponse:
        """Answer a QueryRequest (CLI, MCP tool, socket)."""
        if request.wait_for_model:
            self.embedder.wait(MODEL_WAIT_S)
        budget = (self.budgets.for_snippets(request.max_tokens) if request.max_tokens
                  else self.budgets.calculate())
        k = request.k or self.config.query.default_k
        generation = self.store.generation()
        scope = self.knowledge_scope.scope_for(request, generation)
        context, pool = self._retrieve(request.query, scope=scope, budget=budget, k=k,
                                       providers=request.providers,
                                       min_score=request.min_score, task_id=request.task_id,
                                       mmr_lambda=request.mmr_lambda)
        hits = self.knowledge_scope.annotate([Hit.from_snippet(s) for s in context.snippets],
                                             self.store.generation())
        files = self._files(pool, k) if request.by_file else ()
        return QueryResponse(query=request.query, total=len(hits), hits=hits,
                             total_tokens=context.total_tokens, providers=context.providers,
                             timings_ms=context.timings_ms, notes=context.notes, files=files)

    def _files(self, pool: list[ContextSnippet], k: int) -> tuple[FileResult, ...]:
        """The best ``k`` files of the whole candidate pool. Not of the snippets MMR chose:
        those are cut to the token budget, which bounds what an agent reads, not how many
        files it is told about."""
        return tuple(FileResult.from_file_hit(hit)
                     for hit in aggregate_files(pool, self.config.ranking)[:k])

    def retrieve(self, query: str, *, scope: ContextScope, budget: TokenBudget, k: int,
                 providers: Iterable[str] | None = None, min_score: float | None = None,
                 task_id: str = "") -> TaskContext:
        """The whole pipeline for one query text; see the module docstring. A scope whose
        knowledge part is not set (``documents`` None) searches the project only."""
        if scope.documents is None:
            scope = self.knowledge_scope.scope_for(QueryRequest(query, scope=scope),
                                                   self.store.generation())
        return self._retrieve(query, scope=scope, budget=budget, k=k, providers=providers,
                              min_score=min_score, task_id=task_id)[0]

    def _retrieve(self, query: str, *, scope: ContextScope, budget: TokenBudget, k: int,
                  providers: Iterable[str] | None, min_score: float | None, task_id: str,
                  mmr_lambda: float | None = None
                  ) -> tuple[TaskContext, list[ContextSnippet]]:
        """:meth:`retrieve`'s TaskContext plus the pool MMR chose from (fused, boosted and
        de-duplicated candidates, best first), which ``by_file`` ranks files from."""
        started = time.perf_counter()
        if not self.config.core.enabled:
            return TaskContext.empty(task_id, query,
                                     "context disabled (core.enabled = false)"), []
        if not query.strip():
            return TaskContext.empty(task_id, query, "empty query"), []
        # Agent memory joins only when the scope asks for it.
        selected = [p for p in self._select(providers) if p.id != STASH_ID or scope.memory]
        checked_roles(scope.roles)  # a misspelt role is the caller's error, not a provider's
        generation = self.store.generation()
        self._check_scope(scope, generation)
        understood = self._understand(query)
        # min_score applies to the calibrated scores below, not to each provider's own scale.
        provider_query = ProviderQuery(query, max(DEFAULT_CANDIDATES, k * CANDIDATES_PER_RESULT),
                                       0.0, generation,
                                       understood.texts_by_kind() if understood else {})
        runs, candidates, notes = self._gather(selected, provider_query, scope, budget)
        if understood:
            candidates = apply_boosts(candidates, understood, self.config.ranking)
        unique, confidence = calibrate(deduplicate(candidates),
                                       understood.exact if understood else None)
        if unique and confidence < self.config.ranking.strong_match_confidence:
            notes.append(NO_MATCH_NOTE.format(confidence))
        if min_score:
            unique = [s for s in unique if s.score >= min_score]
        vectors = self._vectors([s.chunk_id for s in unique], generation)
        selection = mmr_select(unique, vectors,
                               self.config.query.mmr_lambda if mmr_lambda is None else mmr_lambda,
                               self.budgets.available(budget), k,
                               rerank=self.config.query.rerank_enabled)
        if selection.used_word_overlap and self.embedder.started:  # else no vector was asked for
            notes.append("MMR used word overlap for snippets without an embedding yet")
        if unique and not selection.snippets:
            smallest = min(s.tokens for s in unique)
            notes.append(f"{len(unique)} snippet(s) matched but none fits the token budget of "
                         f"{self.budgets.available(budget)} tokens (the smallest needs "
                         f"{smallest}); raise the budget")
        self.budgets.log_usage(budget, selection.total_tokens)
        # MMR decides which snippets make the cut; they are shown most relevant first.
        chosen = self._mark_matches(sorted(selection.snippets, key=lambda s: -s.score),
                                    query, understood)
        attribution = collections.Counter(p for s in chosen for p in s.providers)
        timings = {pid: round(run.elapsed_ms, 2) for pid, run in runs.items()}
        timings["total"] = round((time.perf_counter() - started) * 1000, 2)
        self._record(task_id, query, chosen, selection.total_tokens, timings)
        return TaskContext(task_id=task_id, query=query, snippets=tuple(chosen),
                           total_tokens=selection.total_tokens, providers=dict(attribution),
                           timings_ms=timings, notes=tuple(dict.fromkeys(notes))), unique

    @staticmethod
    def _mark_matches(snippets: list[ContextSnippet], query: str,
                      understood: UnderstoodQuery | None) -> list[ContextSnippet]:
        """Each snippet with ``metadata["matched_lines"]``: the lines holding most of the
        query, so a listing can show why it was found instead of its first lines."""
        terms = frozenset(understood.lexical.split() if understood else words(query))
        exact = understood.exact if understood else ExactQuery.of(query, ())
        return [dataclasses.replace(s, metadata={**s.metadata, "matched_lines": lines})
                if (lines := matched_lines(terms, exact, s.text, s.start_line, MATCHED_LINES))
                else s for s in snippets]

    def _check_scope(self, scope: ContextScope, generation: int) -> None:
        """Refuse filters no indexed chunk can match (:mod:`contextd.scope_check`)."""
        if not (scope.languages or scope.kinds or scope.paths):
            return
        languages = self.store.stats().get("languages", {}) if scope.languages else ()
        paths = self.catalog.file_paths(generation) if scope.paths else ()
        check_scope(scope, languages, paths)

    def _understand(self, query: str) -> UnderstoodQuery | None:
        """The per-provider texts and boost inputs of a query, or None when
        ``query.understanding_enabled`` is off (every provider then gets the raw text and no
        boost applies)."""
        if not self.config.query.understanding_enabled:
            return None
        return understand(query, self.config.ranking)

    def _select(self, providers: Iterable[str] | None) -> list[Any]:
        """Requested providers, or the enabled set (hybrid plus what it does not combine)."""
        if providers is not None:
            ids = list(dict.fromkeys(providers))
            unknown = [pid for pid in ids if pid not in self.provider_factories()]
            if unknown:
                raise UsageError(f"unknown provider(s) {', '.join(unknown)}; choose from: "
                                 f"{', '.join(sorted(self.provider_factories()))}")
        else:
            ids = self.enabled_ids()
            if HYBRID_ID in ids:
                combined = set(self.config.provider(HYBRID_ID).combines)
                ids = [HYBRID_ID] + [pid for pid in ids if pid != HYBRID_ID and pid not in combined]
        return [self.provider(pid) for pid in ids]

    def _gather(self, selected: list[Any], query: ProviderQuery, scope: ContextScope,
                budget: TokenBudget) -> tuple[dict[str, ProviderRun], list[ContextSnippet],
                                              list[str]]:
        """Run the selected providers; a hybrid provider alone reports its sub-providers."""
        notes: list[str] = []
        if len(selected) == 1 and hasattr(selected[0], "query_detailed"):
            result = selected[0].query_detailed(query, scope, budget)
            return result.runs, result.snippets, list(result.notes)
        ready = []
        for provider in selected:
            if provider.is_available():
                ready.append(provider)
            elif provider.pending_note():
                notes.append(provider.pending_note())
        runs = run_providers(ready, query, scope, budget,
                             lambda pid: self.config.provider(pid).timeout_ms)
        notes += [f"provider {pid} left out: {run.error}" for pid, run in runs.items()
                  if run.error]
        ranked = {pid: run.snippets for pid, run in runs.items() if not run.error}
        if len(ranked) == 1:
            return runs, next(iter(ranked.values())), notes
        hybrid = self.config.provider(HYBRID_ID)
        weights = {pid: self.config.provider(pid).weight for pid in ranked}
        fused = fuse(ranked, weights, FusionStrategy(hybrid.fusion_strategy), hybrid.rrf_k,
                     order=list(ranked))
        return runs, fused, notes

    def _vectors(self, chunk_ids: list[str], generation: int) -> dict[str, Any]:
        """Embeddings of candidate chunks for MMR, from the semantic and stash providers'
        memory (none when no provider has asked for the model: MMR then uses word overlap)."""
        if not self.embedder.started:
            return {}
        vectors: dict[str, Any] = {}
        for pid in (SEMANTIC_ID, STASH_ID):
            source = self.provider(pid) if pid in self.provider_factories() else None
            if source is not None and hasattr(source, "vectors") and source.is_available():
                vectors.update(source.vectors(chunk_ids, generation))
        return vectors

    def _record(self, task_id: str, query: str, snippets: list[ContextSnippet], tokens: int,
                timings: dict[str, float]) -> None:
        """Keep latencies for stats() and queue a usage_metrics row: the write (a database
        transaction) happens on a background thread, off the query's latency."""
        for key, value in timings.items():
            self._latency[key].append(value)
        metrics = self.config.metrics
        if metrics.enabled:
            by_provider: dict[str, list[float]] = collections.defaultdict(list)
            for snippet in snippets:
                for provider in snippet.providers:
                    by_provider[provider].append(snippet.score)
            self._usage.submit(  # a query may quote a credential: it is stored redacted
                task_id, scrub_secrets(query, security=self.config.security).text,
                sorted(by_provider), len(snippets),
                tokens if metrics.track_token_usage else 0,
                timings["total"] if metrics.track_latency else 0.0, None,
                sorted({s.file_path for s in snippets}),
                {p: round(sum(v) / len(v), 4) for p, v in by_provider.items()})

    # ----- knowledge base (see contextd.knowledge) --------------------------------------
    @property
    def knowledge(self):
        """The :class:`contextd.knowledge.service.KnowledgeBase` of this index."""
        with self._lock:
            if self._knowledge is None:
                from contextd.knowledge.service import KnowledgeBase

                self._knowledge = KnowledgeBase(self.project, self.store, self._embed_missing,
                                                self.config.embedding.model)
            return self._knowledge

    def _embed_missing(self) -> int:
        """Vectors for stored chunks lacking one (a knowledge add's new chunks), with the
        model the queries use; 0 when it cannot load (the add stays searchable by text)."""
        from contextd.indexer.embed_stage import embed_missing

        embedder = self.embedder.wait(MODEL_WAIT_S)
        if embedder is None:
            return 0
        return embed_missing(self.store, embedder, self.config.embedding.batch_size,
                             lock=self._embed_lock)

    def knowledge_create_context(self, name: str, description: str = ""):
        """Create a knowledge context; returns its ContextInfo."""
        return self.knowledge.create_context(name, description)

    def knowledge_list_contexts(self):
        """Every knowledge context (ContextList), sorted by name."""
        return self.knowledge.list_contexts()

    def knowledge_show_context(self, name: str):
        """A context and its documents (ContextDetail)."""
        return self.knowledge.show_context(name)

    def knowledge_delete_context(self, name: str, confirm: bool = False):
        """Delete a context (never ``default``; ``confirm=True`` required)."""
        return self.knowledge.delete_context(name, confirm)

    def knowledge_add(self, paths: Iterable[str], contexts: Iterable[str] | None = None,
                      include: Iterable[str] = (), exclude: Iterable[str] = ()):
        """Add files or folders to contexts (``default`` when none); an AddReport."""
        return self.knowledge.add(list(paths), list(contexts or ()), list(include),
                                  list(exclude))

    def knowledge_remove(self, paths: Iterable[str], contexts: Iterable[str] | None = None):
        """Take documents out of contexts (all when none); a RemoveReport."""
        return self.knowledge.remove(list(paths), list(contexts or ()) or None)

    def knowledge_search(self, query: str, contexts: Iterable[str] | None = None,
                         k: int | None = None, include_project: bool = False,
                         max_tokens: int | None = None) -> QueryResponse:
        """Search knowledge contexts (all when none is named), with the project's chunks
        too when ``include_project``; hits carry contexts, document and page in metadata."""
        return self.query(knowledge_request(query, list(contexts or ()), k, include_project,
                                            max_tokens, wait_for_model=True))

    # ----- reporting and lifecycle ------------------------------------------------------
    def render(self, task_context: TaskContext, max_tokens: int | None = None) -> str:
        """The ``<project_context>`` block of a TaskContext (spec 004 §7.1)."""
        return render_context(task_context, max_tokens)

    def flush_usage(self) -> None:
        """Wait until every queued usage_metrics row is written (for readers of them)."""
        self._usage.flush()

    def stats(self) -> dict[str, Any]:
        """Providers (id, name, type, enabled, available, stats), storage, average latencies
        and languages, for ``contextd stats`` and get_context_stats."""
        self.flush_usage()
        providers = []
        for pid in self.provider_factories():
            enabled = self.config.provider(pid).enabled
            instance = self.provider(pid) if enabled else None
            factory = self.provider_factories()[pid]
            providers.append({
                "id": pid, "name": getattr(factory, "name", pid),
                "type": getattr(getattr(factory, "type", None), "value", None),
                "enabled": enabled,
                "available": bool(instance and instance.is_available()) if enabled else False,
                "pending": instance.pending_note() if instance else None,
                "stats": instance.stats() if instance and hasattr(instance, "stats") else {}})
        storage = self.store.stats()
        performance = {key: round(sum(v) / len(v), 2) for key, v in self._latency.items() if v}
        return {"providers": providers, "storage": storage,
                "performance": {"queries": len(self._latency.get("total", ())),
                                "avg_ms": performance},
                "languages": storage.get("languages", {}),
                "contextualizer": {**stage_stats(self.config, self.store),
                                   "contextualized_chunks": storage.get("contextualized_chunks")}}

    def shutdown(self) -> None:
        """Shut every provider down (and close the index when opened by :meth:`open`)."""
        with self._lock:
            self._shut_down = True
            providers, self._providers = self._providers, {}
            engine, self._engine = self._engine, None
        self._usage.stop()
        if self.embedder.loading:
            # ONNX Runtime aborts the whole process (exit 134) when the interpreter exits
            # while a daemon thread is still creating its session; a short command that only
            # started the load (``contextd stats`` asking is_available) must wait for it.
            self.embedder.wait(MODEL_WAIT_S)
        for provider in providers.values():
            try:
                provider.shutdown()
            except Exception as exc:
                log.warning("provider %s failed to shut down: %s", provider.id, exc)
        if engine is not None:
            engine.close()

