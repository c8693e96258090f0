"""One chunk's contextual prefix on demand (the ``generate_context_for_chunk`` tool).

The agent hands over a chunk and its document; the configured contextualizer (structural by
default, the LLM when ``[contextualizer] strategy = "llm"``) writes the prefix exactly as
indexing would, and the answer carries the prefix's quality score (FR-4) and size, so an
agent or a user can judge a strategy on their own text before re-indexing with it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from contextd.config.sections import ContextConfig
from contextd.contextualizers.llm import check_quality, prefix_quality
from contextd.contextualizers.stage import (
    FALLBACK_STRATEGY, NO_CONTEXT, PREFIX_SEPARATOR, build_contextualizer,
)
from contextd.errors import UsageError
from contextd.records import Chunk, ChunkKind
from contextd.text.tokens import estimate_tokens


@dataclass(frozen=True)
class ChunkContext:
    """The seed's answer: the chunk, its prefix, both together, the prefix's quality (0-1)
    and tokens, and which contextualizer wrote it (with the quality checks' verdict)."""

    success: bool
    chunk: str
    context: str
    contextualized: str
    quality_score: float | None
    token_count: int
    strategy: str
    verdict: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)


def chunk_in_document(chunk: str, document: str, title: str, language: str) -> Chunk:
    """A :class:`Chunk` record of ``chunk`` placed where it occurs in ``document`` (its first
    occurrence; the end of the document when it does not occur there)."""
    at = document.find(chunk)
    if at < 0:
        at = len(document)
    start_line = document.count("\n", 0, at) + 1
    return Chunk(text=chunk, kind=ChunkKind.CODE_BLOCK, label=title, language=language,
                 start_line=start_line, end_line=start_line + chunk.count("\n"),
                 start_byte=at, end_byte=at + len(chunk), tokens=estimate_tokens(chunk))


def generate_for_chunk(config: ContextConfig, chunk: str, document: str,
                       metadata: dict[str, Any] | None = None, max_words: int = 100
                       ) -> ChunkContext:
    """The prefix the configured contextualizer gives ``chunk`` of ``document``. Metadata:
    ``title`` (or ``path``) names the document, ``type`` (or ``language``) its kind;
    ``max_words`` bounds an LLM prefix (the quality check's upper length)."""
    if not chunk.strip():
        raise UsageError("generate_context_for_chunk: chunk is empty")
    if not document.strip():
        raise UsageError("generate_context_for_chunk: document is empty (the prefix says "
                         "where the chunk sits in it)")
    metadata = metadata or {}
    title = str(metadata.get("title") or metadata.get("path") or "document")
    language = str(metadata.get("type") or metadata.get("language") or "text").lower()
    settings = dataclasses.replace(config.contextualizer, max_words=max_words,
                                   min_words=min(config.contextualizer.min_words, max_words))
    config = dataclasses.replace(config, contextualizer=settings)
    strategy = settings.strategy
    notes: list[str] = []
    if strategy == NO_CONTEXT:
        notes.append("[contextualizer] strategy is 'none' (nothing is prefixed when "
                     "indexing); showing the structural prefix")
        strategy = FALLBACK_STRATEGY
    record = chunk_in_document(chunk, document, title, language)
    contextualizer = build_contextualizer(strategy, config)
    try:
        prefix = contextualizer.prefixes(document, title, [record])[0]
    finally:
        close = getattr(contextualizer, "close", None)
        if close is not None:
            close()
    generated = bool(getattr(contextualizer, "caches_prefixes", False))
    if not prefix and strategy != FALLBACK_STRATEGY:
        notes.append(f"the {strategy} contextualizer gave no acceptable prefix; indexing "
                     "would use the structural one, shown here")
        prefix = build_contextualizer(FALLBACK_STRATEGY, config).prefixes(
            document, title, [record])[0]
        strategy, generated = FALLBACK_STRATEGY, False
    verdict = check_quality(prefix, record, settings) if prefix else None
    return ChunkContext(
        success=bool(prefix), chunk=chunk, context=prefix,
        contextualized=f"{prefix}{PREFIX_SEPARATOR}{chunk}" if prefix else chunk,
        quality_score=prefix_quality(prefix, record, settings, generated=generated),
        token_count=estimate_tokens(prefix), strategy=strategy,
        verdict="" if verdict is None else ("ok" if verdict.ok else verdict.reason),
        notes=tuple(notes))
