"""The contextualizer stage between chunking and embedding: index texts per chunk.

The original chunk text is what users see; the index text (contextual prefix, blank line,
chunk) is what gets embedded and BM25-indexed. Changing the strategy changes the index texts,
so their embeddings are looked up (and if needed computed) anew through the embedding cache
keyed by text hash; :func:`contextualizer_signature` lets the indexer notice that change and
re-index everything as one resumable job.

Contextualizers that are costly to run declare ``caches_prefixes`` on the class and
``cache_model`` on the instance: their prefixes are cached in
the store by (model, chunk hash, document hash) once per file, so a re-index, or a re-index
resumed after a kill, never asks twice for an unchanged chunk. A chunk such a contextualizer
could not serve (it returned "") gets the structural prefix instead, uncached, so the next run
tries again.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from contextd.config.sections import ContextConfig
from contextd.contextualizers.llm import prefix_quality
from contextd.plugins.manager import collect
from contextd.records import Chunk
from contextd.text.prefix_rating import PREFIX_SEPARATOR
from contextd.text.tokens import estimate_tokens

NO_CONTEXT = "none"
FALLBACK_STRATEGY = "structural"


def available_contextualizers() -> dict[str, Any]:
    """Registered contextualizer factories by name (built-ins and third parties)."""
    found = collect("register_contextualizers", key=lambda args: args[0])
    return {name: reg.value[1] for name, reg in found.items()}


def build_contextualizer(name: str, config: ContextConfig):
    """Instantiate a registered contextualizer; an unknown name lists the registered ones."""
    factories = available_contextualizers()
    if name not in factories:
        raise ValueError(f"unknown contextualizer {name!r}; choose from: "
                         f"{', '.join(sorted(factories))}, {NO_CONTEXT}")
    return factories[name](config)


def needs_store(config: ContextConfig) -> bool:
    """Whether the configured contextualizer caches its prefixes in the store (it declares
    ``caches_prefixes``, as the LLM one does). The indexer then runs this stage in its own
    process, where the store is: worker processes cannot share the database, and such a
    contextualizer waits on its endpoint with its own bounded thread pool, so processes would
    add nothing."""
    strategy = config.contextualizer.strategy
    factory = available_contextualizers().get(strategy) if strategy != NO_CONTEXT else None
    return bool(getattr(factory, "caches_prefixes", False))


def contextualizer_signature(config: ContextConfig) -> str:
    """A string that changes exactly when the index texts would: the indexer stores it and
    re-indexes every file when it differs (see the module docstring)."""
    s = config.contextualizer
    if s.strategy == NO_CONTEXT:
        return NO_CONTEXT
    parts = [s.strategy, str(s.max_prefix_tokens), str(config.embedding.max_seq_length)]
    if s.strategy == "llm":
        parts += [s.llm_api, s.llm_model]
    return ":".join(parts)


@dataclass(frozen=True)
class IndexText:
    """What the stage makes of one chunk: the text embedded and BM25-indexed, whether it
    carries a prefix, that prefix's quality score (0-1; a generated prefix's only, a
    structural one is rated by the reports) and its tokens."""

    text: str
    contextualized: bool = False
    prefix_quality: float | None = None
    prefix_tokens: int = 0


@dataclass
class StageCounters:
    """What the stage did since it was built (reported in job metrics and stats)."""

    chunks: int = 0
    contextualized: int = 0
    cache_hits: int = 0
    generated: int = 0
    fallbacks: int = 0


class ContextStage:
    """One configured contextualizer with its cache and fallback, shared by an indexing run."""

    def __init__(self, config: ContextConfig, store=None):
        strategy = config.contextualizer.strategy
        self.store = store
        self.primary = None if strategy == NO_CONTEXT else build_contextualizer(strategy, config)
        self.fallback = (build_contextualizer(FALLBACK_STRATEGY, config)
                         if strategy not in (NO_CONTEXT, FALLBACK_STRATEGY) else None)
        self.settings = config.contextualizer
        self.counters = StageCounters()
        self._lock = threading.Lock()

    def index_texts(self, document: str, path: str, chunks: Sequence[Chunk]
                    ) -> list[IndexText]:
        """The index text of each chunk, with its prefix's quality and size."""
        chunks = list(chunks)
        if self.primary:
            prefixes, fallen_back = self._prefixes(document, path, chunks)
        else:
            prefixes, fallen_back = [""] * len(chunks), set()
        generated = bool(getattr(self.primary, "caches_prefixes", False))
        # The chunks of one file share most of their prefixes (one per class or section).
        prefix_tokens = functools.lru_cache(maxsize=None)(estimate_tokens)
        # Only a generated prefix is rated here (its checks are part of writing it); a
        # structural one is rated when a report asks (contextd.text.prefix_rating).
        out = [IndexText(f"{p}{PREFIX_SEPARATOR}{c.text}", True,
                         prefix_quality(p, c, self.settings, generated=True)
                         if generated and i not in fallen_back else None,
                         prefix_tokens(p)) if p else IndexText(c.text)
               for i, (p, c) in enumerate(zip(prefixes, chunks))]
        with self._lock:
            self.counters.chunks += len(chunks)
            self.counters.contextualized += sum(1 for item in out if item.contextualized)
        return out

    def _prefixes(self, document: str, path: str, chunks: list[Chunk]
                  ) -> tuple[list[str], set[int]]:
        model = getattr(self.primary, "cache_model", None)
        if not model or self.store is None:
            return self._with_fallback(document, path, chunks, self.primary.prefixes(
                document, path, chunks))
        # Imported here: a standalone-mode caller imports this module without DuckDB.
        from contextd.store.rows import text_hash

        doc_hash = text_hash(document)
        keys = [(text_hash(c.text), doc_hash) for c in chunks]
        cached = self.store.get_prefixes(model, sorted(set(keys)))
        missing = [i for i, key in enumerate(keys) if key not in cached]
        fresh = self.primary.prefixes(document, path, [chunks[i] for i in missing]) \
            if missing else []
        new_rows = {keys[i]: p for i, p in zip(missing, fresh) if p}
        if new_rows:
            self.store.put_prefixes(model, [(*key, p) for key, p in new_rows.items()])
        with self._lock:
            self.counters.cache_hits += len(chunks) - len(missing)
            self.counters.generated += len(new_rows)
        merged = [cached.get(key) or new_rows.get(key, "") for key in keys]
        return self._with_fallback(document, path, chunks, merged)

    def _with_fallback(self, document: str, path: str, chunks: list[Chunk],
                       prefixes: list[str]) -> tuple[list[str], set[int]]:
        """Structural prefixes for the chunks the primary contextualizer left empty, and
        the positions that got one."""
        empty = [i for i, p in enumerate(prefixes) if not p]
        if not empty or self.fallback is None:
            return prefixes, set()
        backup = self.fallback.prefixes(document, path, [chunks[i] for i in empty])
        merged = list(prefixes)
        for i, p in zip(empty, backup):
            merged[i] = p
        with self._lock:
            self.counters.fallbacks += len(empty)
        return merged, set(empty)

    def stats(self) -> dict[str, Any]:
        """Stage counters plus, for an LLM contextualizer, its token and cost counters."""
        out: dict[str, Any] = {"strategy": getattr(self.primary, "name", NO_CONTEXT),
                               **asdict(self.counters)}
        llm = getattr(self.primary, "counters", None)
        if llm is not None:
            out["llm"] = llm.to_dict()
        return out

    def close(self) -> None:
        """Release the contextualizer's resources (e.g. the LLM worker threads)."""
        close = getattr(self.primary, "close", None)
        if close is not None:
            close()


_stages: dict[tuple, ContextStage] = {}
_stages_lock = threading.Lock()


def _stage_key(config: ContextConfig, store) -> tuple:
    return (config.contextualizer, config.embedding.max_seq_length, id(store))


def _built_stage(config: ContextConfig, store) -> ContextStage | None:
    """The stage already built for this configuration and store (call under the lock; an
    id can be reused by a later store, hence the identity check)."""
    stage = _stages.get(_stage_key(config, store))
    return stage if stage is not None and stage.store is store else None


def get_stage(config: ContextConfig, store=None) -> ContextStage:
    """The stage for this configuration and store, built once and reused by later files."""
    with _stages_lock:
        stage = _built_stage(config, store)
        if stage is None:
            stage = _stages[_stage_key(config, store)] = ContextStage(config, store)
        return stage


def stage_stats(config: ContextConfig, store=None) -> dict[str, Any]:
    """The strategy, and what this process's stage for ``store`` has done so far (counts and,
    for an LLM, tokens and cost) when one was built here: a contextualizer that caches its
    prefixes runs in the indexer's own process, so its figures are all here."""
    with _stages_lock:
        stage = _built_stage(config, store)
    return stage.stats() if stage else {"strategy": config.contextualizer.strategy}


def counters_since(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """``after`` minus ``before``, number by number (nested dicts too): one run's share."""
    out: dict[str, Any] = {}
    for key, value in after.items():
        if isinstance(value, dict):
            out[key] = counters_since(before.get(key, {}), value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value - before.get(key, 0)
        else:
            out[key] = value
    return out


def index_texts(document: str, path: str, chunks: Sequence[Chunk], config: ContextConfig,
                store=None) -> list[IndexText]:
    """The :class:`IndexText` of each chunk of ``path`` whose scrubbed text is ``document``:
    the call the indexer makes for every file."""
    return get_stage(config, store).index_texts(document, path, chunks)
