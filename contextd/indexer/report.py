"""The record an indexing run returns (CLI ``--json``, MCP tools, benchmarks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


# Failed files named in the one-line summary (``errors`` holds more).
FAILURES_IN_SUMMARY = 3
# Files deleted while the run read them, named in ``vanished`` (the count has them all).
VANISHED_NAMED = 20


# The mode of an ensure_indexed that did not wait for the run of another thread.
BUSY = "busy"


@dataclass
class IndexReport:
    """What one run of the indexer did.

    ``mode`` is ``bootstrap`` (empty index), ``resume`` (an interrupted bootstrap continued),
    ``incremental`` (catch-up of an existing index) or ``refresh``. ``embeddings_reused`` counts
    distinct chunk texts written whose vector was already cached (written minus embedded).
    ``embedding_error`` is set when vectors could not be computed (the lexical index is
    complete regardless); ``errors`` holds the first few failures as ``path: message``.
    ``contextualizer`` is what a contextualizer running in this process did in the run
    (prefixes generated, cache hits, fallbacks; an LLM's requests, tokens and cost).
    ``refused`` names each path argument that was not used (``path``, ``reason``).
    ``embedding`` is what a remote embedding server did for the run (requests, texts, tokens,
    retries, rate-limit waits, texts per second); empty for a local model.
    ``vanished`` names files deleted while the run read them (the first
    :data:`VANISHED_NAMED`; ``files_vanished`` counts them all): they are not in the index.
    ``files_left`` counts the files a cancelled run had no time to read (a bootstrap's stay
    pending and are resumed by the next run; a catch-up's are found again by the next walk).
    ``files_reused`` counts the files indexed from the chunks a recent refresh of the same
    process cut for the same content (a branch switched back: :mod:`contextd.indexer.reuse`).
    """

    mode: str = "refresh"
    files_seen: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_failed: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    embeddings_reused: int = 0
    lines_indexed: int = 0
    bytes_indexed: int = 0
    secrets_redacted: int = 0
    seconds: float = 0.0
    cancelled: bool = False
    embedding_error: str | None = None
    errors: list[str] = field(default_factory=list)
    contextualizer: dict[str, Any] = field(default_factory=dict)
    refused: list[dict[str, str]] = field(default_factory=list)
    embedding: dict[str, Any] = field(default_factory=dict)
    files_vanished: int = 0
    vanished: list[str] = field(default_factory=list)
    files_left: int = 0
    files_reused: int = 0

    def note_vanished(self, paths: list[str]) -> None:
        """Count and name files that were deleted while this run read them."""
        self.files_vanished += len(paths)
        self.vanished += paths[:max(0, VANISHED_NAMED - len(self.vanished))]

    @property
    def summary(self) -> str:
        """One line for people."""
        text = (f"{self.mode}: {self.files_indexed:,} files indexed, "
                f"{self.files_unchanged:,} unchanged, {self.files_removed:,} removed, "
                f"{self.files_failed:,} failed; {self.chunks_written:,} chunks, "
                f"{self.chunks_embedded:,} embedded in {self.seconds:.1f} s")
        if self.files_failed:
            shown = "; ".join(self.errors[:FAILURES_IN_SUMMARY])
            more = " ..." if self.files_failed > FAILURES_IN_SUMMARY else ""
            text += f" (failed: {shown}{more}; not retried until they change)"
        if self.files_reused:
            text += f" ({self.files_reused:,} of them from chunks cut lately)"
        if self.cancelled:
            text += " (cancelled)"
        if self.embedding.get("requests"):
            e = self.embedding
            rate = f", {e['texts_per_second']:,} texts/s" if e.get("texts_per_second") else ""
            text += (f"; remote: {e['texts']:,} texts in {e['requests']:,} requests{rate}, "
                     f"{e['tokens']:,} tokens, {e['retries']:,} retries, "
                     f"{e['rate_limit_wait_s']:.1f} s rate-limit waits")
        if self.embedding_error:
            text += f"; embeddings unavailable: {self.embedding_error}"
        if self.files_vanished:
            more = " ..." if self.files_vanished > len(self.vanished) else ""
            text += (f"; {self.files_vanished:,} deleted while indexing "
                     f"({', '.join(self.vanished[:FAILURES_IN_SUMMARY])}{more})")
        if self.refused:
            text += "; refused: " + "; ".join(f"'{r['path']}' {r['reason']}"
                                             for r in self.refused)
        return text
