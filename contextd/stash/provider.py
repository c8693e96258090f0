"""The ``stash`` provider: agent memory as one more source of the query path.

Registered through the same ``register_providers`` hook as the project providers, so
``query_context`` and ``get_task_context`` fuse, de-duplicate and budget memory together
with code. It answers only when the scope asks for memory (``ContextScope.memory``: a
session id, or ``"*"`` for every session); a plain project query never sees stashed
segments. Snippets carry ``stash:<segment id>`` as their path and the score's parts in
their metadata.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from contextd.hookspecs import hookimpl
from contextd.providers.base import ContextProvider, ProviderQuery
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget
from contextd.stash.model import ALL_SESSIONS, RetrieveRequest

PATH_PREFIX = "stash:"


class StashProvider(ContextProvider):
    """Stashed segments relevant to the query, when the scope asks for memory."""

    id = "stash"
    name = "Agent memory (stashed segments)"
    type = ProviderType.SEMANTIC

    def _service(self) -> Any:
        assert self.context is not None, "initialize() was not called"
        return self.context.extras["stash"]()

    def is_available(self) -> bool:
        return (self.context is not None and self.context.config.stash.enabled
                and self.context.embedder.get_nowait() is not None)

    def query(self, query: ProviderQuery | str, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        query = ProviderQuery.of(query)
        session = getattr(scope, "memory", None)
        if not session or not query.text.strip():
            return []
        settings = self.context.config.stash
        cut = getattr(scope, "memory_min_similarity", None)
        result = self._service().retrieve(RetrieveRequest(
            query=query.text, top_k=min(query.limit, 100), session_id=session,
            all_sessions=session == ALL_SESSIONS,
            min_similarity=max(query.min_score, settings.min_similarity) if cut is None
            else cut,
            max_tokens=budget.max_tokens))
        # Previews are cut; a context block carries the whole text.
        full = self._service().index().rows
        return [ContextSnippet(
            chunk_id=PATH_PREFIX + item.segment_id, score=min(1.0, max(0.0, item.score)),
            file_path=PATH_PREFIX + item.segment_id, label=item.topic or item.type,
            kind=f"STASH_{item.type.upper()}", text=full[item.segment_id].text, language="",
            start_line=1, end_line=max(1, full[item.segment_id].text.count("\n") + 1),
            tokens=item.tokens, providers=(self.id,),
            metadata={"segment_id": item.segment_id, "session_id": item.session_id,
                      "similarity": item.similarity, "score_parts": {
                          "similarity": item.score_parts.similarity,
                          "age": item.score_parts.age, "recency": item.score_parts.recency,
                          "hops": item.score_parts.hops}})
            for item in result.segments if item.segment_id in full]

    def vectors(self, chunk_ids: Sequence[str], generation: int | None = None
                ) -> dict[str, np.ndarray]:
        """Vectors of stash snippets, for MMR beside the semantic provider's."""
        wanted = [cid for cid in chunk_ids if cid.startswith(PATH_PREFIX)]
        if not wanted or not self.is_available():
            return {}
        index = self._service().index()
        return {cid: index.vector(cid[len(PATH_PREFIX):]) for cid in wanted
                if cid[len(PATH_PREFIX):] in index.position}

    def stats(self) -> dict[str, Any]:
        return self._service().stats() if self.context is not None else {}


@hookimpl(trylast=True)
def register_providers(register):
    """Offer the stash provider (a built-in, registered like the project providers)."""
    register(StashProvider)
