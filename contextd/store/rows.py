"""The rows a file becomes, identical for every backend.

Chunk ids and text hashes are computed here once, so an index copied from DuckDB to
PostgreSQL (or built by either) names every chunk and vector the same way: the embedding
cache and chunk ids survive a change of backend.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator, Mapping, Sequence

import blake3

from datetime import datetime

from contextd.config.sections import ContextualizerConfig
from contextd.store.base import FileRecord, Job
from contextd.text.prefix_rating import prefix_of, structural_quality

CHUNK_COLUMNS = ("chunk_id", "file_id", "ordinal", "kind", "label", "language", "start_line",
                 "end_line", "start_byte", "end_byte", "tokens_est", "text", "embed_hash",
                 "index_text", "parent", "contextualized", "prefix_quality", "prefix_tokens")
FILE_COLUMNS = ("file_id", "path", "size_bytes", "mtime_ns", "content_hash", "language",
                "chunk_count", "generation", "secrets_redacted", "warnings")
SYMBOL_COLUMNS = ("chunk_id", "file_id", "name", "name_lower", "short_lower", "kind", "line")
LINK_COLUMNS = ("src_chunk_id", "file_id", "target", "link_type")
SEGMENT_COLUMNS = ("segment_id", "session_id", "text", "segment_type", "created_at",
                   "stashed_at", "tokens", "topic", "source", "refs", "text_hash",
                   "embedding_model", "expires_at", "protected")
JOB_FIELDS = ("job_id", "job_type", "status", "scope", "files_total", "files_processed",
              "chunks_processed", "current_file", "started_at", "updated_at", "completed_at",
              "error_message", "metrics", "params", "created_by", "cancel_requested")
JOB_UPDATABLE = frozenset({"status", "files_total", "files_processed", "chunks_processed",
                           "current_file", "error_message", "metrics", "completed_at",
                           "cancel_requested", "scope"})
PROJECT_CONFIG_KEYS = ("watch_paths", "ignore_patterns", "allowed_extensions",
                       "blocked_extensions", "max_file_size_mb", "follow_symlinks")


def job_assignments(fields: Mapping[str, Any], now: str, marker: str, json_marker: str
                    ) -> tuple[list[str], list[Any]]:
    """The SET clauses and parameters of ``update_job`` in one SQL dialect (its function
    for the current time, its placeholder, its placeholder for a JSON value); refuses fields
    a job does not have."""
    unknown = set(fields) - JOB_UPDATABLE
    if unknown:
        raise ValueError(f"unknown job fields: {sorted(unknown)}")
    sets, params = [f"updated_at = {now}"], []
    for key, value in fields.items():
        if key == "completed_at":
            sets.append(f"completed_at = {now}")
        elif key == "metrics":
            sets.append(f"metrics = {json_marker}")
            params.append(json.dumps(value))
        else:
            sets.append(f"{key} = {marker}")
            params.append(value)
    return sets, params


def iso(value: Any) -> Any:
    """A timestamp as ISO text (other values unchanged)."""
    return value.isoformat() if isinstance(value, datetime) else value


def job_from_row(row: Sequence[Any]) -> Job:
    """A Job from a row of JOB_FIELDS (JSON columns as text, or decoded by the driver)."""
    data = {k: iso(v) for k, v in zip(JOB_FIELDS, row)}
    for key in ("metrics", "params"):
        value = data[key]
        data[key] = (json.loads(value) if value else {}) if isinstance(value, str) \
            else (value or {})
    return Job(**data)


# Defaults of record_usage's optional trailing arguments: cache_hits, files, provider_scores.
USAGE_OPTIONAL = (None, (), None)


def complete_usage_rows(rows: Sequence[Sequence[Any]]) -> list[tuple]:
    """record_usage_many's rows with the optional trailing arguments a row left out filled
    in: (task_id, query, providers, snippets, tokens, latency_ms, cache_hits, files,
    provider_scores)."""
    return [tuple(row) + USAGE_OPTIONAL[len(row) - 6:] for row in rows]


def summarise_usage(days: int, totals: Sequence[Any], per_day: Sequence[Sequence[Any]],
                    per_task: Sequence[Sequence[Any]], per_provider: Sequence[Sequence[Any]],
                    provider_scores: Sequence[Any]) -> dict[str, Any]:
    """``usage_summary``'s answer from its queries' rows, the same for every backend:
    ``totals`` (queries, tokens served, source tokens, latency p50, p95, p99), ``per_day`` and
    ``per_task`` (key, queries, tokens served, source tokens), ``per_provider`` (provider,
    answers it took part in) and every row's ``provider_scores`` (JSON text or a dict)."""
    scores: dict[str, list[float]] = {}
    for raw in provider_scores:
        for provider, score in (json.loads(raw) if isinstance(raw, str) else raw).items():
            scores.setdefault(provider, []).append(float(score))
    queries = totals[0]

    def latency(value: Any) -> float | None:
        return float(value) if value is not None else None

    return {
        "days": days, "queries": queries, "tokens_served": int(totals[1]),
        "source_tokens": int(totals[2]),
        "latency_ms": {"p50": latency(totals[3]), "p95": latency(totals[4]),
                       "p99": latency(totals[5])},
        "per_day": [{"day": d, "queries": q, "tokens_served": int(t),
                     "source_tokens": int(s)} for d, q, t, s in per_day],
        "per_task": [{"task_id": k, "queries": q, "tokens_served": int(t),
                      "source_tokens": int(s)} for k, q, t, s in per_task],
        "providers": [{"provider": p, "selected": n,
                       "selection_rate": n / queries if queries else 0.0,
                       "avg_score": (sum(scores[p]) / len(scores[p])) if scores.get(p)
                       else None} for p, n in per_provider],
    }


def text_hash(text: str) -> str:
    """BLAKE3 of a text, the key of the embedding cache."""
    return blake3.blake3(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def record_columns(records: Sequence[FileRecord], ids: dict[str, int], generation: int
                   ) -> dict[str, dict[str, list[Any]]]:
    """Column lists of the file_state, chunks, symbols and links rows of ``records``
    (``ids``: file id by path), ready for an Arrow insert or a COPY."""
    files: dict[str, list] = {k: [] for k in FILE_COLUMNS}
    chunks: dict[str, list] = {k: [] for k in CHUNK_COLUMNS}
    symbols: dict[str, list] = {k: [] for k in SYMBOL_COLUMNS}
    links: dict[str, list] = {k: [] for k in LINK_COLUMNS}
    value: Any  # one cell of any column
    for rec in records:
        fid = ids[rec.path]
        for key, value in zip(FILE_COLUMNS, (
                fid, rec.path, rec.size_bytes, rec.mtime_ns, rec.content_hash, rec.language,
                len(rec.chunks), generation, rec.secrets_redacted, list(rec.warnings))):
            files[key].append(value)
        seen: dict[str, int] = {}
        for ordinal, item in enumerate(rec.chunks):
            c = item.chunk
            ehash = text_hash(item.index_text)
            base = f"{rec.path}\0{c.label}\0{ehash}"
            seen[base] = seen.get(base, -1) + 1
            chunk_id = blake3.blake3(f"{base}\0{seen[base]}".encode()).hexdigest()[:24]
            for key, value in zip(CHUNK_COLUMNS, (
                    chunk_id, fid, ordinal, c.kind.value, c.label, c.language, c.start_line,
                    c.end_line, c.start_byte, c.end_byte, c.tokens, c.text, ehash,
                    item.index_text, c.parent, item.contextualized, item.prefix_quality,
                    item.prefix_tokens)):
                chunks[key].append(value)
            for sym in c.defines:
                for key, value in zip(SYMBOL_COLUMNS, (
                        chunk_id, fid, sym.name, sym.name.lower(),
                        sym.name.rsplit(".", 1)[-1].lower(), sym.kind, sym.line)):
                    symbols[key].append(value)
            for ref in dict.fromkeys(c.references):
                for key, value in zip(LINK_COLUMNS, (chunk_id, fid, ref, "references")):
                    links[key].append(value)
    return {"file_state": files, "chunks": chunks, "symbols": symbols, "links": links}


# What `contextd store copy` carries between backends, table by table, in column order: the
# index contents (knowledge documents and their contexts included: a document's chunks are
# file rows, useless without them), the agent's stashed memory, and the caches that cost
# model time to rebuild (vectors, LLM prefixes). Jobs, progress, errors, usage, skipped
# files (the next walk states them again) and search sessions (short-lived, expiring) belong
# to the index they happened in and stay behind.
TRANSFER_COLUMNS: dict[str, tuple[str, ...]] = {
    "file_state": tuple(c for c in FILE_COLUMNS if c != "generation"),
    "chunks": CHUNK_COLUMNS,
    "symbols": SYMBOL_COLUMNS,
    "links": LINK_COLUMNS,
    "embeddings": ("model", "text_hash", "vector"),
    "prefix_cache": ("model", "chunk_hash", "doc_hash", "prefix"),
    "kb_contexts": ("name", "display_name", "description", "created_at", "updated_at"),
    "kb_documents": ("path", "source", "format", "page_starts", "title", "added_at",
                     "updated_at"),
    "kb_memberships": ("context", "path", "added_at"),
    "stash_segments": SEGMENT_COLUMNS,
}


def renumber_files(tables: dict[str, list[tuple]], new_id: dict[int, int]
                   ) -> dict[str, dict[str, list[Any]]]:
    """Exported rows as column lists, file ids replaced through ``new_id`` (an index copied
    into a database gets ids from that database's sequence)."""
    out: dict[str, dict[str, list[Any]]] = {}
    for table, rows in tables.items():
        names = TRANSFER_COLUMNS[table]
        columns: dict[str, list[Any]] = {name: [] for name in names}
        for row in rows:
            for name, value in zip(names, row):
                columns[name].append(new_id[value] if name == "file_id" else value)
        out[table] = columns
    return out


# Prefix quality bands of prefix_summary: below the first is low, from the second up good.
QUALITY_LOW = 0.5
QUALITY_GOOD = 0.8
# The figures of the prefixes rated when written (an LLM's); the structural ones, stored
# unrated, are rated by unrated_qualities and added by prefix_summary_of.
PREFIX_SUMMARY_SQL = f"""
    SELECT count(*), count(*) FILTER (WHERE contextualized),
           avg(prefix_tokens) FILTER (WHERE contextualized), sum(prefix_quality),
           count(prefix_quality),
           count(*) FILTER (WHERE prefix_quality < {QUALITY_LOW}),
           count(*) FILTER (WHERE prefix_quality >= {QUALITY_LOW}
                            AND prefix_quality < {QUALITY_GOOD}),
           count(*) FILTER (WHERE prefix_quality >= {QUALITY_GOOD}),
           coalesce(sum(prefix_tokens), 0)
    FROM chunks"""
# Chunks whose prefix is stored unrated, read a page at a time (a project's texts need not
# be held at once).
RATING_PAGE = 2000
UNRATED_WHERE = "c.contextualized AND c.prefix_quality IS NULL"
CACHE_HIT_RATE_SQL = """
    SELECT count(*) FILTER (WHERE cache_hits > 0), count(cache_hits) FROM usage_metrics"""
TASK_USAGE_COLUMNS = ("recorded_at", "op", "agent", "task_id", "tokens_input", "tokens_output",
                      "context_tokens", "notes")


def rate_of(row: Sequence[Any] | None) -> float | None:
    """hits / recorded of a (hits, recorded) row; None when nothing is recorded."""
    if not row or not row[1]:
        return None
    return round(int(row[0]) / int(row[1]), 4)


def unrated_qualities(rows: Iterable[Sequence[Any]], min_key_term_share: float | None
                      ) -> Iterator[tuple[str, float]]:
    """(chunk id, quality) of every chunk whose prefix is stored unrated (a structural
    prefix, rated when a report asks: issue 37), from its ``rows``: (chunk id, text, index
    text, the names it defines in line order)."""
    share = ContextualizerConfig().min_key_term_share if min_key_term_share is None \
        else min_key_term_share
    for chunk_id, text, index_text, names in rows:
        yield chunk_id, structural_quality(prefix_of(index_text, text), names or (), text,
                                           share)


def prefix_summary_of(row: Sequence[Any], rated: Iterable[float] = ()) -> dict[str, Any]:
    """prefix_summary's answer from the row of PREFIX_SUMMARY_SQL (both backends) and the
    qualities of the prefixes rated now (``rated``)."""
    total, contextualized, tokens, quality_sum, quality_count, low, fair, good, all_tokens = row
    quality_sum, quality_count = float(quality_sum or 0.0), int(quality_count or 0)
    low, fair, good = int(low or 0), int(fair or 0), int(good or 0)
    for quality in rated:
        quality_sum += quality
        quality_count += 1
        low += quality < QUALITY_LOW
        good += quality >= QUALITY_GOOD
        fair += QUALITY_LOW <= quality < QUALITY_GOOD
    return {"chunks": int(total or 0), "contextualized": int(contextualized or 0),
            "mean_prefix_tokens": None if tokens is None else round(float(tokens), 1),
            "prefix_tokens": int(all_tokens or 0),
            "mean_quality": round(quality_sum / quality_count, 3) if quality_count else None,
            "quality": {f"low (< {QUALITY_LOW})": low,
                        f"fair ({QUALITY_LOW}-{QUALITY_GOOD})": fair,
                        f"good (>= {QUALITY_GOOD})": good}}
