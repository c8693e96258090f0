"""Built-in context providers, registered through the same hook third parties use.

``semantic`` (embeddings), ``symbol`` (definitions and references), ``full_text`` (BM25),
``git_history`` (commits and co-changes), ``dependency`` (declared dependencies, their
importers and users) and ``hybrid`` (fusion of the others). They are
``trylast``, so a third-party plugin registering the same id replaces the built-in.
"""

from __future__ import annotations

from contextd.hookspecs import hookimpl
from contextd.providers.base import ContextProvider, ProviderContext, ProviderQuery
from contextd.providers.dependency import DependencyProvider
from contextd.providers.fulltext import FullTextProvider
from contextd.providers.git_history import GitHistoryProvider
from contextd.providers.hybrid import HybridProvider
from contextd.providers.semantic import SemanticProvider
from contextd.providers.symbol import SymbolProvider

BUILTIN_PROVIDERS = (SemanticProvider, SymbolProvider, FullTextProvider, GitHistoryProvider,
                     DependencyProvider, HybridProvider)

__all__ = ["BUILTIN_PROVIDERS", "ContextProvider", "ProviderContext", "ProviderQuery",
           "register_providers"]


@hookimpl(trylast=True)
def register_providers(register):
    """Offer the built-in providers (classes: their ``id`` is readable without instantiating)."""
    for factory in BUILTIN_PROVIDERS:
        register(factory)
