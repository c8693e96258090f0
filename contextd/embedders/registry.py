"""The one way to get an embedder: :func:`get_embedder`.

Backends come from plugins (``register_embedders``); the configured ``[embedding] backend``
picks one. Embedders are cached per configuration for the life of the process, so the model
is loaded once however many providers, indexers or threads ask for it.

An embedder has ``identity`` (e.g. ``all-MiniLM-L6-v2/onnx-int8/256``: model, backend,
quantisation, window; vectors of different identities are never mixed), ``dimension``,
``embed(texts)`` → float32 ``(len(texts), dimension)`` L2-normalised, and
``embed_query(text)`` → float32 ``(dimension,)``. The built-ins also offer ``prepared``,
``prepare(force=False)`` and ``model_path``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from contextd.config.sections import EmbeddingConfig
from contextd.errors import ConfigError, ConfigIssue, ContextdError, MissingExtraError

_lock = threading.Lock()
_embedders: dict[EmbeddingConfig, Any] = {}


def embedder_factories() -> dict[str, tuple[Callable[[EmbeddingConfig], Any], str]]:
    """Registered backends: name → (factory, name of the plugin that registered it)."""
    from contextd.plugins.manager import collect

    found = collect("register_embedders", key=lambda args: args[0])
    return {name: (reg.value[1], reg.plugin) for name, reg in found.items()}


def configuration_issues(config: EmbeddingConfig, fname: str) -> list[ConfigIssue]:
    """What ``validate-config`` must report about ``[embedding]`` that loading cannot see:
    an unregistered backend, or a model the backend cannot find installed (both would
    otherwise surface only at the first query). Builds the embedder without loading it."""
    factories = embedder_factories()
    if config.backend not in factories:
        return [ConfigIssue(fname, "embedding.backend",
                            f"unknown embedding backend {config.backend!r}; choose from: "
                            f"{', '.join(sorted(factories))}")]
    try:
        factories[config.backend][0](config)
    except MissingExtraError as exc:  # the backend, not the model, needs what is missing
        return [ConfigIssue(fname, "embedding.backend", str(exc))]
    except ContextdError as exc:
        return [ConfigIssue(fname, "embedding.model", str(exc))]
    return []


def get_embedder(config: EmbeddingConfig) -> Any:
    """The embedder for ``config`` (created on first call, then shared; thread-safe).

    Raises ConfigError naming the registered backends when ``config.backend`` is unknown, and
    ModelUnavailableError when the model is not installed.
    """
    with _lock:
        embedder = _embedders.get(config)
        if embedder is None:
            factories = embedder_factories()
            if config.backend not in factories:
                choices = ", ".join(sorted(factories))
                raise ConfigError([ConfigIssue(
                    "<config>", "embedding.backend",
                    f"unknown embedding backend {config.backend!r}; choose from: {choices}")])
            embedder = factories[config.backend][0](config)
            _embedders[config] = embedder
        return embedder


def embedding_stats(config: EmbeddingConfig) -> dict[str, Any]:
    """The ``embedding`` part of get_context_stats: backend, identity and dimension, which
    backend embeds queries, and for a remote backend its counters (requests, texts, tokens,
    retries, rate-limit waits, throughput). Builds the embedder (cheap) but loads no model
    and sends nothing."""
    from contextd.errors import ContextdError

    try:
        embedder = get_embedder(config)
    except ContextdError as exc:
        return {"backend": config.backend, "error": str(exc)}
    stats = getattr(embedder, "stats", None)
    if callable(stats):
        return stats()
    return {"backend": config.backend, "identity": embedder.identity,
            "dimension": embedder.dimension, "query_backend": "same as indexing (in-process)"}


def remote_run_counters(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What one run cost a remote backend: the growth of its counters between two
    :func:`embedding_stats` snapshots, with the run's own throughput ({} for a backend
    without counters)."""
    from contextd.contextualizers.stage import counters_since

    if "requests" not in after:
        return {}
    delta = {key: round(value, 3) if isinstance(value, float) else value
             for key, value in counters_since(
                 {k: v for k, v in before.items() if v is not None}, after).items()}
    delta.update(dimension=after["dimension"], concurrency=after["concurrency"],
                 texts_per_second=round(delta["texts"] / delta["busy_s"], 1)
                 if delta["busy_s"] else None)
    return delta
