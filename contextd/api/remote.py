"""Deployment modes of :meth:`contextd.api.module.ContextModule.open` (docs/SERVICE.md,
"Deployment modes").

* ``embedded`` — the ContextModule itself, in the caller's process (unchanged).
* ``standalone`` — :class:`ServiceModule` over :class:`ServiceEngine`: every call goes to the
  service over HTTP; neither DuckDB nor the model is imported in the caller's process.
* ``hybrid`` — :class:`ServiceModule` with a local index as well: the local index through the
  owner protocol (this process owns it, or calls the contextd process that does); when that
  cannot be opened or its owner does not answer within ``engine.timeout_ms``, the service.
  Each switch is logged once; the local index is tried again every
  :data:`LOCAL_RETRY_S` seconds, so the caller comes back when it is free.

Both modes answer with the same records as the embedded module (TaskContext,
QueryResponse), so a caller's code does not change with the mode.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from contextd.query.budget import BudgetManager
from contextd.errors import ContextdError
from contextd.operations import expose
from contextd.query.records import Hit, QueryRequest, QueryResponse
from contextd.records import ContextScope, ContextSnippet, TaskContext, to_dict
from contextd.query.render import render_context
from contextd.query.task import build_query, task_field
from contextd.runtime.service_client import ServiceClient

log = logging.getLogger("contextd.modes")

# How long hybrid mode stays on the service before trying the local index again.
LOCAL_RETRY_S = 10.0


class ServiceEngine(ServiceClient):
    """The service's client, which also answers the Engine's ``query`` (a QueryRequest in, a
    QueryResponse out); ``stats`` and ``close`` are the client's own."""

    def query(self, request: QueryRequest) -> QueryResponse:
        scope = request.scope
        filters = {"lang": list(scope.languages) or None, "kind": list(scope.kinds) or None,
                   "path_glob": list(scope.paths) or None,
                   "exclude_glob": list(scope.exclude_patterns) or None}
        answer = self.query_context(
            request.query, k=request.k, budget=request.max_tokens,
            mmr_lambda=request.mmr_lambda,
            filters={k: v for k, v in filters.items() if v} or None)
        return QueryResponse(query=request.query, total=answer["total"],
                             hits=tuple(Hit.from_dict(h) for h in answer["hits"]),
                             total_tokens=answer["total_tokens"],
                             providers=answer.get("providers", {}),
                             timings_ms=answer.get("timings_ms", {}),
                             notes=tuple(answer.get("notes", ())))


def _unreachable(exc: ContextdError) -> bool:
    """Whether a local failure means the index cannot be had (not a bad request)."""
    text = str(exc).lower()
    return any(word in text for word in ("not answering", "lock", "cannot open", "closed"))


class ServiceModule:
    """The ContextModule's caller-facing methods (get_task_context, query, stats, render,
    shutdown) over the service, and in hybrid mode over the local index while it can be had.

    ``query`` is the ``query`` operation's method (:mod:`contextd.operations.answers`), run
    by :meth:`call`; ``mode`` says where the last call went: ``standalone`` (the service) or
    ``embedded`` (hybrid's local index)."""

    def __init__(self, project: Any, remote: ServiceEngine, hybrid: bool):
        self.project = project
        self.config = project.config
        self.remote = remote
        self.hybrid = hybrid
        self.budgets = BudgetManager(self.config.budget)
        self.local: Any = None
        self.mode = "" if hybrid else "standalone"
        self._retry_at = 0.0
        self._lock = threading.Lock()

    # ----- where a call goes ----------------------------------------------------------------
    def _switch(self, mode: str, reason: str = "") -> None:
        if mode != self.mode:
            log.warning("contextd hybrid: using the %s index%s", mode,
                        f" ({reason})" if reason else "")
            self.mode = mode

    def _engine(self) -> Any:
        """The local index's SharedEngine in hybrid mode while it can be had, else the
        service's client."""
        if not self.hybrid:
            return self.remote
        with self._lock:
            if self.local is None and time.monotonic() >= self._retry_at:
                from contextd.runtime.owner import connect

                try:
                    self.local = connect(self.project,
                                         wait_s=self.project.config.engine.timeout_ms / 1000)
                except ContextdError as exc:
                    self._retry_at = time.monotonic() + LOCAL_RETRY_S
                    self._switch("standalone", f"local index unavailable: {exc}")
                    return self.remote
                self._switch("embedded")
            return self.local if self.local is not None else self.remote

    def call(self, name: str, params: dict[str, Any], progress: Any = None) -> Any:
        """Run ``name`` (``query`` or ``stats``, the methods both the SharedEngine and the
        service's client have) where :meth:`_engine` says; a local index that stops
        answering is let go and the service answers. Neither reports progress."""
        engine = self._engine()
        if engine is self.remote:
            return getattr(self.remote, name)(**params)
        try:
            return getattr(engine, name)(**params)
        except ContextdError as exc:
            if not _unreachable(exc):
                raise
            with self._lock:
                self.local, self._retry_at = None, time.monotonic() + LOCAL_RETRY_S
                self._switch("standalone", f"local index unavailable: {exc}")
            engine.close()
            return getattr(self.remote, name)(**params)

    def get_task_context(self, task: Any) -> TaskContext:
        """As :meth:`contextd.facade.context.ProjectContext.get_task_context`."""
        task_id = str(task_field(task, "task_id", ""))
        query = build_query(task)
        if not self.config.core.enabled:
            return TaskContext.empty(task_id, query, "context disabled (core.enabled = false)")
        try:
            budget = self.budgets.calculate(task_field(task, "complexity"),
                                            task_field(task, "task_type"))
            request = QueryRequest(
                query=query, k=int(task_field(task, "k", self.config.query.default_k)),
                scope=ContextScope(
                    paths=tuple(task_field(task, "paths", ())),
                    languages=tuple(task_field(task, "languages", ())),
                    kinds=tuple(task_field(task, "kinds", ())),
                    exclude_patterns=tuple(task_field(task, "exclude_patterns", ()))),
                # A task's budget (complexity and type scale it) stays within the limit the
                # service refuses above, as the embedded module's never meets that limit.
                max_tokens=min(max(1, self.budgets.available(budget)),
                               self.config.query.max_budget_tokens), task_id=task_id)
            response = self.query(request)
        except Exception as exc:
            if not self.config.core.fallback_enabled:
                raise
            log.warning("context retrieval failed, continuing without context: %s", exc)
            return TaskContext.empty(task_id, query, f"context unavailable: {exc}")
        snippets = tuple(ContextSnippet(
            chunk_id=h.chunk_id, score=h.score, file_path=h.file_path, label=h.label,
            kind=h.kind, text=h.snippet, language=h.language, start_line=h.start_line,
            end_line=h.end_line, tokens=h.tokens, providers=h.providers, metadata=h.metadata)
            for h in response.hits)
        return TaskContext(task_id=task_id, query=query, snippets=snippets,
                           total_tokens=response.total_tokens, providers=response.providers,
                           timings_ms=response.timings_ms, notes=response.notes)

    def stats(self) -> dict[str, Any]:
        """The index's figures as JSON values, whichever index answered (the local one's
        :class:`contextd.operations.records.EngineStats` or the service's ``GET /stats``)."""
        return to_dict(self.call("stats", {}))

    def render(self, task_context: TaskContext, max_tokens: int | None = None) -> str:
        return render_context(task_context, max_tokens)

    def task_prompt(self, task: Any, task_context: TaskContext | None = None,
                    max_tokens: int | None = None) -> str:
        """As :meth:`contextd.facade.context.ProjectContext.task_prompt`."""
        from contextd.query.prompt import render_task_prompt

        if task_context is None:
            task_context = self.get_task_context(task)
        return render_task_prompt(task, task_context, max_tokens)

    def shutdown(self) -> None:
        """Let go of the local index (another process takes ownership if this one had it)
        and close the service's connections."""
        with self._lock:
            local, self.local = self.local, None
        if local is not None:
            local.close()
        self.remote.close()


def open_module(project: Any, mode: str) -> ServiceModule:
    """The module of a standalone or hybrid caller."""
    return ServiceModule(project, ServiceEngine.from_config(project.config), mode == "hybrid")


expose(ServiceModule, via="")
