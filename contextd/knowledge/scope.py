"""The knowledge side of a query's scope: contexts → documents, and hits → their documents.

The query path stays one path: :class:`KnowledgeScope` turns ``QueryRequest.contexts`` into
``ContextScope.documents`` (the ``kb://`` paths of the documents those contexts hold) and
``include_project``, and every provider filters by it through the same ScopeFilter; then
each knowledge hit is annotated with its contexts, document and page. The document map is
read once per store generation (memberships bump it), so a warm query costs no database
round trip.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from typing import Sequence

from contextd.errors import KnowledgeError
from contextd.knowledge.contexts import split_names
from contextd.knowledge.hits import MIN_RELEVANCE, html_source_lines, relevance
from contextd.knowledge.records import KnowledgeHit, KnowledgeSearchResult
from contextd.query.records import ALL_CONTEXTS, Hit, QueryRequest, QueryResponse
from contextd.records import ContextScope
from contextd.store.base import KNOWLEDGE_PREFIX, IndexStore, KnowledgeDocument


def knowledge_request(query: str, contexts: Sequence[str] | None = None, k: int | None = None,
                      include_project: bool = False, max_tokens: int | None = None,
                      scope: ContextScope | None = None, task_id: str = "",
                      wait_for_model: bool = False, min_relevance: float | None = None
                      ) -> QueryRequest:
    """The QueryRequest of a knowledge search: ``contexts`` None or empty = every context
    (a search without a context searches them all); ``min_relevance`` drops hits
    scoring below it (0-1, the calibrated hit score)."""
    if min_relevance is not None and not 0.0 <= min_relevance <= 1.0:
        raise KnowledgeError(f"min_relevance must be between 0 and 1, not {min_relevance}")
    return QueryRequest(query=query, k=k, max_tokens=max_tokens, task_id=task_id,
                        min_score=min_relevance or None,
                        scope=scope or ContextScope(), wait_for_model=wait_for_model,
                        contexts=tuple(contexts) if contexts else (ALL_CONTEXTS,),
                        include_project=include_project)


def page_of(page_starts: Sequence[int], line: int) -> int | None:
    """The 1-based page holding ``line`` (None for documents without pages)."""
    if not page_starts:
        return None
    return max(1, bisect.bisect_right(page_starts, line))


class KnowledgeScope:
    """Resolves context names against the store, cached per generation."""

    def __init__(self, store: IndexStore):
        self.store = store
        self._lock = threading.Lock()
        self._generation = -1
        self._documents: dict[str, KnowledgeDocument] = {}
        self._contexts: dict[str, str] = {}

    def _load(self, generation: int) -> tuple[dict[str, KnowledgeDocument], dict[str, str]]:
        with self._lock:
            if generation != self._generation:
                self._documents = self.store.kb_document_map()
                self._contexts = {row["name"]: row["display_name"]
                                  for row in self.store.kb_contexts()}
                self._generation = generation
            return self._documents, self._contexts

    def scope_for(self, request: QueryRequest, generation: int) -> ContextScope:
        """The request's scope with its knowledge part filled in (see QueryRequest)."""
        documents, contexts = self._load(generation)
        scope = request.scope
        if not request.contexts:
            # The project index only; with no document stored there is nothing to keep out
            # (and the providers keep their unrestricted fast paths).
            return dataclasses.replace(scope, documents=(), include_project=True) \
                if documents else scope
        wanted = self._names(request.contexts, contexts)
        chosen = tuple(path for path, doc in documents.items()
                       if wanted.intersection(doc.contexts))
        return dataclasses.replace(scope, documents=chosen,
                                   include_project=request.include_project)

    @staticmethod
    def _names(names: Sequence[str], contexts: dict[str, str]) -> set[str]:
        if ALL_CONTEXTS in names:
            return set(contexts)
        wanted = {n.lower() for n in split_names(names)}
        unknown = sorted(wanted - set(contexts))
        if unknown:
            raise KnowledgeError(f"unknown context(s) {', '.join(unknown)}; contexts: "
                                 f"{', '.join(sorted(contexts.values()))}")
        return wanted

    def annotate(self, hits: Sequence[Hit], generation: int) -> tuple[Hit, ...]:
        """Hits with ``metadata`` naming the contexts, document, page and format of each
        knowledge hit (project hits unchanged)."""
        if not any(h.file_path.startswith(KNOWLEDGE_PREFIX) for h in hits):
            return tuple(hits)
        documents, contexts = self._load(generation)
        out = []
        for hit in hits:
            doc = documents.get(hit.file_path)
            if doc is not None:
                hit = dataclasses.replace(hit, metadata={
                    **hit.metadata, "contexts": [contexts.get(c, c) for c in doc.contexts],
                    "document": doc.source, "page": page_of(doc.page_starts, hit.start_line),
                    "format": doc.format, "document_metadata": dict(doc.metadata)})
            out.append(hit)
        return tuple(out)


def search_result(request: QueryRequest, response: QueryResponse) -> KnowledgeSearchResult:
    """The KnowledgeSearchResult of a knowledge search's QueryResponse: each hit scored by
    its own evidence, hits without any left out, HTML hits on the lines of their file (see
    :mod:`contextd.knowledge.hits`)."""
    hits, unrelated = [], 0
    # The caller's min_relevance applies to the score shown, the one measured here.
    floor = max(MIN_RELEVANCE, request.min_score or 0.0)
    for hit in response.hits:
        meta = hit.metadata
        score = min(hit.score, relevance(meta))
        if score < floor:
            unrelated += score < MIN_RELEVANCE
            continue
        knowledge = "document" in meta
        if knowledge and meta.get("format") == "html":
            lines = html_source_lines(meta["document"], hit.snippet)
            hit = dataclasses.replace(hit, start_line=lines[0], end_line=lines[1]) \
                if lines else dataclasses.replace(hit, metadata={
                    **meta, "lines_of": "the text extracted from the HTML"})
        hits.append(KnowledgeHit(
            **{**{f.name: getattr(hit, f.name) for f in dataclasses.fields(Hit)},
               "score": score},
            source="knowledge" if knowledge else "project",
            document=meta["document"] if knowledge else hit.file_path,
            contexts=tuple(meta.get("contexts", ())), page=meta.get("page"),
            document_metadata=dict(meta.get("document_metadata") or {})))
    hits.sort(key=lambda h: -h.score)
    notes = response.notes
    if unrelated:
        notes += (f"{unrelated} hit(s) left out: nothing measured relates them to the "
                  "question (no shared words, no similar meaning)",)
    return KnowledgeSearchResult(query=request.query, contexts=tuple(request.contexts or ()),
                                 include_project=request.include_project,
                                 total=len(hits), total_tokens=sum(h.tokens for h in hits),
                                 hits=tuple(hits), notes=notes)
