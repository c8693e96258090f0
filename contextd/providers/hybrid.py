"""Hybrid provider: the providers of ``combines`` queried in parallel and fused.

Fusion is reciprocal rank fusion by default (``rrf_k`` = 60, each provider's ``weight``), or a
weighted average of scores, or a cascade (``fusion_strategy``). With RRF the semantic
provider's hits add evidence and push out no chunk the others agree on
(:mod:`contextd.query.semantic_adds`). A sub-provider that fails,
hangs past its ``timeout_ms`` or is not ready (the embedding model still loading) is left out
and named in the result's notes; the others still answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from contextd.providers.base import ContextProvider, ProviderQuery
from contextd.providers.runner import ProviderRun, left_out_notes, run_providers
from contextd.query.fusion import FusionStrategy, fuse
from contextd.query.semantic_adds import keep_lexical_floor
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget


def fusion_weights(providers: Mapping[str, Any], config: Any,
                   query: ProviderQuery | None = None) -> dict[str, float]:
    """Each provider's fusion weight: its configured ``weight`` times the share of the
    project it can search (``share_indexed``: vectors still being computed) and, given the
    ``query``, the share of the query it recognises (``query_share``)."""
    weights = {}
    for pid, provider in providers.items():
        share = getattr(provider, "share_indexed", None)
        weight = config.provider(pid).weight * (share() if share is not None else 1.0)
        recognised = getattr(provider, "query_share", None)
        if query is not None and recognised is not None:
            weight *= recognised(query.for_kind(provider.type))
        weights[pid] = weight
    return weights


@dataclass
class HybridResult:
    """Fused snippets plus what each sub-provider did."""

    snippets: list[ContextSnippet]
    runs: dict[str, ProviderRun] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class HybridProvider(ContextProvider):
    """Fusion of several providers' rankings."""

    id = "hybrid"
    name = "Hybrid (fusion of providers)"
    type = ProviderType.HYBRID

    def sub_providers(self) -> tuple[list[Any], list[str]]:
        """(ready sub-providers, notes about the ones that are not). A provider whose
        ``enabled`` is false is not combined: disabled means never queried."""
        ready, notes = [], []
        for provider_id in self.settings.combines:
            if not self.context.config.provider(provider_id).enabled:
                continue
            provider = self.context.provider(provider_id) if provider_id != self.id else None
            if provider is None:
                continue
            if provider.is_available():
                ready.append(provider)
            elif provider.pending_note():
                notes.append(provider.pending_note())
        return ready, notes

    def catch_up(self, generation: int | None) -> None:
        """The sub-providers' catch-up (run_providers does it again, at no cost, when the
        hybrid itself is not run under a timeout)."""
        for provider in self.sub_providers()[0]:
            catch_up = getattr(provider, "catch_up", None)
            if catch_up is not None:
                catch_up(generation)

    def query_detailed(self, query: ProviderQuery | str, scope: ContextScope,
                       budget: TokenBudget) -> HybridResult:
        """Fused snippets with per-provider runs (timings, errors) and notes."""
        query = ProviderQuery.of(query)
        providers, notes = self.sub_providers()
        config = self.context.config
        runs = run_providers(providers, query, scope, budget,
                             lambda pid: config.provider(pid).timeout_ms)
        notes += left_out_notes(runs)
        ranked = {pid: run.snippets for pid, run in runs.items() if not run.error}
        weights = fusion_weights({p.id: p for p in providers if p.id in ranked}, config,
                                 query)
        strategy = FusionStrategy(self.settings.fusion_strategy)
        fused = fuse(ranked, weights, strategy, self.settings.rrf_k,
                     order=self.settings.combines, limit=query.limit)
        if strategy is FusionStrategy.RRF:
            fused = keep_lexical_floor(fused, ranked, weights, self.settings.rrf_k)
        fused = [s for s in fused if s.score >= query.min_score]
        return HybridResult(fused, runs, notes)

    def query(self, query: ProviderQuery | str, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        return self.query_detailed(query, scope, budget).snippets
