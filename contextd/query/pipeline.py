"""The query pipeline: one query text in, a TaskContext out, the stages in order.

    request → understand the text (a dense, a lexical and a symbol query; intent; evidence)
            → providers in parallel, each sent the query meant for its kind (isolated,
              time-limited; a hybrid provider fuses its own sub-providers)
            → fuse (reciprocal rank fusion) → boost (intent x file role, exact evidence)
            → chunks holding the query's rare literals (an id, a quoted string) first
            → the files not indexed yet searched as text for the query's distinctive terms,
              each window placed below every chunk holding as much of them
            → translations the query did not ask for step back → de-duplicate (overlaps in
              a file, near-copies across files) → calibrate (absolute scores, "no strong match", ``min_score``)
            → one chunk per file first → MMR on embeddings within the token budget
            → each snippet checked against its file on disk now (no stale line shown)
            → mark the lines that matched → record usage
            → TaskContext (snippets, tokens, attribution, timings), or a QueryResponse with
              files ranked by their chunks when asked ``by_file``

:meth:`QueryPipeline.run` is that route, top to bottom; each stage is a module of this
package (understanding, fusion, calibration, budget, render...) or a provider plugin
(:mod:`contextd.providers`). The pipeline owns what the stages share: the provider
instances, the in-memory chunk catalog, the embedding model's handle and the usage thread.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
from typing import Any, Callable, Iterable, Sequence

from contextd.errors import StoreError, UsageError
from contextd.knowledge.scope import KnowledgeScope
from contextd.providers.base import (
    DEFAULT_CANDIDATES, ProviderContext, ProviderQuery, QueryCounters, ScopeFilter,
)
from contextd.providers.catalog import ChunkCatalog
from contextd.providers.saved_pair import snapshot_folder
from contextd.query.catch_up import CatchUp
from contextd.providers.spool import spool_folder
from contextd.providers.hybrid import fusion_weights
from contextd.providers.runner import ProviderRun, left_out_notes, run_providers
from contextd.query.budget import BudgetManager
from contextd.query.projects import Projects, merge_pools
from contextd.query.calibration import NO_MATCH_NOTE, calibrate
from contextd.query.duplicates import (
    TranslationGroups, collapse_near_duplicates, step_back_translations, translation_groups,
)
from contextd.query.evidence import ExactQuery, matched_lines, words
from contextd.query.fusion import FusionStrategy, deduplicate, fuse, mmr_select
from contextd.query.generated_files import GeneratedFiles, step_back_generated
from contextd.query.intent import QueryIntent
from contextd.query.left_out import VECTORS_MISSING_NOTE
from contextd.query.literals import lift_rare_literals, query_literals
from contextd.query.on_disk import DiskCheck, as_on_disk
from contextd.query.path_words import PathWords
from contextd.query.per_catalog import derived_once
from contextd.query.records import (LOAD_TIMING, FileResult, Hit, QueryRequest,
                                    QueryResponse)
from contextd.boundary.roles import checked_roles
from contextd.query.scope_check import check_scope
from contextd.query.semantic_adds import keep_lexical_floor
from contextd.query.spread import own_scores, spread_over_files
from contextd.query.unread_scan import FULL_TEXT_ID, UnreadScan
from contextd.query.understanding import (
    UnderstoodQuery, aggregate_files, apply_boosts, is_symbol_lookup, path_factor, understand,
)
from contextd.query.usage import UsageRecorder
from contextd.records import ContextScope, ContextSnippet, TaskContext, TokenBudget
from contextd.scrub.scrubber import scrub_secrets
from contextd.store.base import FileState

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
# Lines of a snippet named as the ones that matched the query (a listing's preview).
MATCHED_LINES = 3


class QueryPipeline:
    """Runs one query through the stages over a project's index.

    ``embedder`` is the model handle shared with memory and the knowledge base; ``memory``
    returns agent memory for the stash provider (created on first use by the caller).
    """

    def __init__(self, project: Any, store: Any, embedder: Any, memory: Callable[[], Any]):
        self.project = project
        self.store = store
        self.config = project.config
        self.budgets = BudgetManager(self.config.budget)
        self.embedder = embedder
        # Chunk rows, paths, symbols and links in memory, shared by every provider.
        self.catalog = ChunkCatalog(store, spool_folder(project), snapshot_folder(project))
        # Which files on disk are generated (read once per size and mtime).
        self.generated = GeneratedFiles(project.root)
        # What an answer takes in of a large write, and the thread that takes in the rest.
        self.catch_up = CatchUp(self.catalog, self._built_providers)
        # Knowledge contexts → the documents a query's scope holds (cached per generation).
        self.knowledge_scope = KnowledgeScope(store)
        # [projects.NAME]: named parts of the index a query may name.
        self.projects = Projects(self.config.projects)
        self._memory = memory
        self._lock = threading.RLock()
        self._factories: dict[str, Any] | None = None
        self._providers: dict[str, Any] = {}
        # Set by shutdown(): a warm-up still running in the background stops instead of
        # building providers again over a closing store.
        self._shut_down = False
        self._latency: dict[str, collections.deque] = collections.defaultdict(
            lambda: collections.deque(maxlen=PERFORMANCE_WINDOW))
        # Queries' usage rows, written by a thread; readers of usage_metrics call its flush().
        self.usage = UsageRecorder(store)
        # The files the bootstrap has not read yet, searched as text (first answers).
        self.unread = UnreadScan(project, store, self.provider, self.catalog.waiting_paths)

    # ----- providers ----------------------------------------------------------------------
    def provider_factories(self) -> dict[str, Any]:
        """Registered provider factories by id (from the plugin hook, first registration
        wins)."""
        with self._lock:
            if self._factories is None:
                from contextd.plugins.manager import collect

                found = collect("register_providers", key=lambda args: args[0].id)
                self._factories = {pid: reg.value for pid, reg in found.items()}
            return self._factories

    def _built_providers(self) -> list[Any]:
        """The providers built so far (the background catch-up builds none)."""
        with self._lock:
            return [] if self._shut_down else list(self._providers.values())

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
                                                    extras={"stash": self._memory}))
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
                self.catalog.catch_up()
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

    # ----- the route ------------------------------------------------------------------------
    def query(self, request: QueryRequest) -> QueryResponse:
        """Answer a QueryRequest (CLI, MCP tool, socket)."""
        if request.wait_for_model:
            self.embedder.wait(MODEL_WAIT_S)
        budget = (self.budgets.for_snippets(request.max_tokens) if request.max_tokens
                  else self.budgets.calculate())
        k = request.k or self.config.query.default_k
        scope = self.knowledge_scope.scope_for(request, self.store.generation())
        context, pool = self.run(request.query, scope=scope, budget=budget, k=k,
                                 providers=request.providers, min_score=request.min_score,
                                 task_id=request.task_id, mmr_lambda=request.mmr_lambda,
                                 projects=request.projects)
        hits = self.knowledge_scope.annotate([Hit.from_snippet(s) for s in context.snippets],
                                             self.store.generation())
        files = self._files(pool, k, is_symbol_lookup(request.query)) if request.by_file else ()
        # total: what was found (the de-duplicated candidates passing min_score), not what k
        # and the budget let through.
        return QueryResponse(query=request.query, total=max(len(pool), len(hits)), hits=hits,
                             total_tokens=context.total_tokens, providers=context.providers,
                             timings_ms=context.timings_ms, notes=context.notes, files=files,
                             searched_by=context.searched_by)

    def retrieve(self, query: str, *, scope: ContextScope, budget: TokenBudget, k: int,
                 providers: Iterable[str] | None = None, min_score: float | None = None,
                 task_id: str = "", projects: Sequence[str] | None = None) -> TaskContext:
        """The whole route for one query text. A scope whose knowledge part is not set
        (``documents`` None) searches the project only."""
        if scope.documents is None:
            scope = self.knowledge_scope.scope_for(QueryRequest(query, scope=scope),
                                                   self.store.generation())
        return self.run(query, scope=scope, budget=budget, k=k, providers=providers,
                        min_score=min_score, task_id=task_id, projects=projects)[0]

    def run(self, query: str, *, scope: ContextScope, budget: TokenBudget, k: int,
            providers: Iterable[str] | None, min_score: float | None, task_id: str,
            mmr_lambda: float | None = None, projects: Sequence[str] | None = None
            ) -> tuple[TaskContext, list[ContextSnippet]]:
        """The stages in order. Returns the TaskContext plus the pool MMR chose from (fused,
        boosted and de-duplicated candidates, best first), which ``by_file`` ranks files
        from. ``projects`` names [projects.*] to search, each on its own, fused (see
        :mod:`contextd.query.projects`)."""
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
        # The background catch-up waits meanwhile.
        with self.catch_up.answering(generation) as catalog_ms:
            self._check_scope(scope, generation)
            understood = self._understand(query)
            # min_score applies to the calibrated scores below, not to each provider's scale.
            provider_query = ProviderQuery(
                query, max(DEFAULT_CANDIDATES, k * CANDIDATES_PER_RESULT), 0.0, generation,
                understood.texts_by_kind() if understood else {})
            if projects:
                runs, candidates, notes = self._gather_projects(selected, provider_query, scope,
                                                                budget, projects)
            else:
                runs, candidates, notes = self._gather(selected, provider_query, scope, budget)
        catching_up = self.catch_up.note()
        if catching_up:
            notes.append(catching_up)
        if provider_query.counters.texts_without_vectors:
            notes.append(VECTORS_MISSING_NOTE.format(
                provider_query.counters.texts_without_vectors))
        paths = self.catalog.file_paths(generation)
        literals = query_literals(query, understood.quoted, understood.symbols) \
            if understood else ()
        if understood:
            candidates = apply_boosts(candidates, understood, self.config.ranking,
                                      derived_once(paths, PathWords))
            # A change is not written in a generated file (contextd.query.generated_files).
            generated = self.generated if understood.intent is QueryIntent.IMPLEMENTATION \
                else None
            if generated is not None:
                candidates = step_back_generated(candidates, generated)
            candidates = lift_rare_literals(candidates, literals, generated)
        groups = translation_groups(paths)
        if {p.id for p in selected} & {HYBRID_ID, FULL_TEXT_ID}:
            accepts = ScopeFilter(scope)
            candidates, scan_note, unread = self.unread.placed(
                candidates, query, literals, scope,
                None if accepts.unrestricted else accepts.accepts_path, paths,
                path_factor(understood, self.config.ranking, None) if understood else None)
            notes += [scan_note] if scan_note else []
            if unread:  # a scanned page of docs/ko/ steps back for the docs/en/ one unread
                groups = TranslationGroups([*paths, *unread])
        candidates = step_back_translations(candidates, groups, query)
        unique, confidence = calibrate(collapse_near_duplicates(deduplicate(candidates)),
                                       understood.exact if understood else None)
        if unique and confidence < self.config.ranking.strong_match_confidence:
            notes.append(NO_MATCH_NOTE.format(confidence))
        if min_score is None:  # the query's own cut-off wins over the configured one
            min_score = self.config.query.min_score_threshold
        if min_score:
            unique = [s for s in unique if s.score >= min_score]
        vectors = self._vectors([s.chunk_id for s in unique], generation)
        # One chunk per file first (the order only; the scores stay the chunks' own).
        ranking = self.config.ranking
        spread = spread_over_files(unique, ranking.chunks_kept_per_file,
                                   ranking.further_chunk_factor)
        selection = mmr_select(spread, vectors,
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
        # MMR decides which snippets make the cut; they are shown most relevant first, each
        # as its file is on disk now (the index may lag a checkout).
        checked = self._as_on_disk(
            own_scores(sorted(selection.snippets, key=lambda s: -s.score), unique))
        notes += checked.notes
        chosen = self.projects.annotate(self._mark_matches(checked.snippets, query, understood))
        attribution = collections.Counter(p for s in chosen for p in s.providers)
        timings = {pid: round(run.elapsed_ms, 2) for pid, run in runs.items()}
        # The catalog's catch-up, then the providers' (in parallel) before their queries.
        load_ms = catalog_ms + max((run.load_ms for run in runs.values()), default=0.0)
        if load_ms:
            timings[LOAD_TIMING] = round(load_ms, 2)
        timings["total"] = round((time.perf_counter() - started) * 1000, 2)
        self._record(task_id, query, chosen, selection.total_tokens, timings,
                     provider_query.counters)
        return TaskContext(task_id=task_id, query=query, snippets=tuple(chosen),
                           total_tokens=selection.total_tokens, providers=dict(attribution),
                           timings_ms=timings, notes=tuple(dict.fromkeys(notes)),
                           searched_by=tuple(pid for pid, run in runs.items()
                                             if not run.error)), unique

    # ----- the stages -------------------------------------------------------------------------
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

    def _check_scope(self, scope: ContextScope, generation: int) -> None:
        """Refuse filters no indexed chunk can match (:mod:`contextd.query.scope_check`)."""
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
        notes += left_out_notes(runs)
        ranked = {pid: run.snippets for pid, run in runs.items() if not run.error}
        if len(ranked) == 1:
            return runs, next(iter(ranked.values())), notes
        hybrid = self.config.provider(HYBRID_ID)
        weights = fusion_weights({p.id: p for p in ready if p.id in ranked}, self.config,
                                 query)
        strategy = FusionStrategy(hybrid.fusion_strategy)
        fused = fuse(ranked, weights, strategy, hybrid.rrf_k, order=list(ranked))
        if strategy is FusionStrategy.RRF:
            fused = keep_lexical_floor(fused, ranked, weights, hybrid.rrf_k)
        return runs, fused, notes

    def _gather_projects(self, selected: list[Any], query: ProviderQuery, scope: ContextScope,
                         budget: TokenBudget, names: Sequence[str]
                         ) -> tuple[dict[str, ProviderRun], list[ContextSnippet], list[str]]:
        """:meth:`_gather` once per named project, inside it; the candidate pools merged
        (each provider's time summed over the projects)."""
        runs: dict[str, ProviderRun] = {}
        pools, notes = [], []
        for name in self.projects.resolve(names):
            narrowed = self.projects.scope(name, scope)
            if narrowed is None:
                notes.append(f"project {name} has no files under the paths asked for")
                continue
            project_runs, candidates, project_notes = self._gather(selected, query, narrowed,
                                                                   budget)
            pools.append(candidates)
            notes += project_notes
            for pid, run in project_runs.items():
                before = runs.get(pid)
                runs[pid] = run if before is None else dataclasses.replace(
                    run, elapsed_ms=before.elapsed_ms + run.elapsed_ms)
        return runs, merge_pools(pools), notes

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

    def _as_on_disk(self, snippets: list[ContextSnippet]) -> DiskCheck:
        """The snippets checked against their files now (:mod:`contextd.query.on_disk`)."""
        def indexed_state(path: str) -> FileState | None:
            return self.store.file_states(path).get(path)

        security = self.config.security
        return as_on_disk(snippets, self.project.root, indexed_state,
                          lambda text, path: scrub_secrets(text, path, security).text)

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

    def _record(self, task_id: str, query: str, snippets: list[ContextSnippet], tokens: int,
                timings: dict[str, float], counters: QueryCounters) -> None:
        """Keep latencies for stats() and queue a usage_metrics row: the write (a database
        transaction) happens on a background thread, off the query's latency. cache_hits is
        the query embeddings found in the query-vector cache; NULL when
        ``metrics.track_cache_hits`` is off or nothing was looked up (no semantic search)."""
        for key, value in timings.items():
            self._latency[key].append(value)
        metrics = self.config.metrics
        if metrics.enabled:
            by_provider: dict[str, list[float]] = collections.defaultdict(list)
            for snippet in snippets:
                for provider in snippet.providers:
                    by_provider[provider].append(snippet.score)
            self.usage.submit(  # a query may quote a credential: it is stored redacted
                task_id, scrub_secrets(query, security=self.config.security).text,
                sorted(by_provider), len(snippets),
                tokens if metrics.track_token_usage else 0,
                timings["total"] if metrics.track_latency else 0.0,
                counters.cache_hits if metrics.track_cache_hits and counters.cache_lookups
                else None,
                sorted({s.file_path for s in snippets}),
                {p: round(sum(v) / len(v), 4) for p, v in by_provider.items()})

    def _files(self, pool: list[ContextSnippet], k: int, lookup: bool
               ) -> tuple[FileResult, ...]:
        """The best ``k`` files of the whole candidate pool. Not of the snippets MMR chose:
        those are cut to the token budget, which bounds what an agent reads, not how many
        files it is told about."""
        return tuple(FileResult.from_file_hit(hit)
                     for hit in aggregate_files(pool, self.config.ranking, lookup)[:k])

    # ----- figures and lifecycle ----------------------------------------------------------------
    def provider_stats(self) -> list[dict[str, Any]]:
        """Each registered provider: id, name, type, enabled, available, pending note, stats."""
        providers = []
        for pid, factory in self.provider_factories().items():
            enabled = self.config.provider(pid).enabled
            instance = self.provider(pid) if enabled else None
            providers.append({
                "id": pid, "name": getattr(factory, "name", pid),
                "type": getattr(getattr(factory, "type", None), "value", None),
                "enabled": enabled,
                "available": bool(instance and instance.is_available()) if enabled else False,
                "pending": instance.pending_note() if instance else None,
                "stats": instance.stats() if instance and hasattr(instance, "stats") else {}})
        return providers

    def performance(self) -> dict[str, Any]:
        """Queries answered and their average latencies per provider and in total."""
        averages = {key: round(sum(v) / len(v), 2) for key, v in self._latency.items() if v}
        return {"queries": len(self._latency.get("total", ())), "avg_ms": averages}

    def shutdown(self) -> None:
        """Stop the usage thread (writing what it holds) and shut every provider down."""
        with self._lock:
            self._shut_down = True
        self.catch_up.stop()
        self.catalog.save()  # the next process starts from it
        with self._lock:
            providers, self._providers = self._providers, {}
        self.usage.stop()
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
