"""StashService: agent memory of one project, living in the process that owns its database.

Stash: validate every segment first (one clear error, nothing written), scrub secrets,
count tokens, embed with the project's embedder (the embeddings table is the cache, keyed by
model identity and BLAKE3 of the text), then write segments and vectors in ONE transaction
and add them to the in-memory :class:`~contextd.stash.index.StashIndex`.
Retrieve: filter, score (:mod:`contextd.stash.ranking`), collapse duplicates, follow
references, cut to the token budget. Lifecycle: expiry, protection, gc, the size cap, and
re-embedding when the model identity changes (vectors of two models are never mixed).

The clock is injected (``now``: a callable returning a naive UTC datetime) so tests can move
time; by default it is the system clock, or the fixed time in ``$CONTEXTD_NOW`` (ISO 8601)
for reproducible runs of separate processes.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence

import numpy as np

from contextd.errors import ModelUnavailableError, StashFullError, UsageError
from contextd.scrub.scrubber import get_scrubber
from contextd.stash.redaction import scrub_segment
from contextd.stash.index import Filter, StashIndex, epoch
from contextd.stash.pieces import extra_pieces, piece_budget
from contextd.stash.model import (
    ALL_SESSIONS, MAX_HOPS_LIMIT, MAX_TOP_K, ChangeResult, GcResult, MergeResult,
    RetrievedSegment, RetrieveRequest, RetrieveResult, ScoreParts, Segment, SegmentInput,
    SegmentList, SegmentType, StashRequest, StashResult, iso, new_segment_id, parse_time,
)
from contextd.stash.ranking import Weights, collapse_duplicates, follow_references, score_parts
from contextd.store.base import IndexStore, SegmentRow
from contextd.store.rows import text_hash
from contextd.text.tokens import estimate_tokens

CLOCK_ENV = "CONTEXTD_NOW"
# How long a stash or retrieval waits for the embedding model to load.
MODEL_WAIT_S = 120.0
# Candidates scored beyond top_k, so duplicates and the budget still leave top_k.
OVERFETCH = 4


def system_clock() -> datetime:
    """Now, as a naive UTC datetime; ``$CONTEXTD_NOW`` fixes it (tests, reproducible runs)."""
    fixed = os.environ.get(CLOCK_ENV)
    if fixed:
        return parse_time(fixed, CLOCK_ENV)
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _top(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the ``depth`` highest scores, best first (a partition, not a full sort:
    at 100k candidates a sort alone costs ~8 ms)."""
    if depth >= len(scores):
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, depth - 1)[:depth]
    return part[np.argsort(-scores[part], kind="stable")]


def public_segment(row: SegmentRow, referenced_by: Sequence[str] = ()) -> Segment:
    """The caller's view of a stored segment."""
    return Segment(segment_id=row.segment_id, session_id=row.session_id, text=row.text,
                   type=row.segment_type, created_at=iso(row.created_at),
                   stashed_at=iso(row.stashed_at), tokens=row.tokens, topic=row.topic,
                   source=row.source, references=tuple(row.references),
                   referenced_by=tuple(sorted(referenced_by)),
                   embedding_model=row.embedding_model, expires_at=iso(row.expires_at),
                   protected=row.protected)


class StashService:
    """Stash, retrieve, merge, list, delete, protect and gc segments of one project."""

    def __init__(self, store: IndexStore, config: Any, embedder: Any,
                 now: Callable[[], datetime] = system_clock):
        self.store = store
        self.config = config
        self.settings = config.stash
        self.embedder = embedder  # an EmbedderHandle: the model loads once per process
        self.now = now
        self._lock = threading.RLock()
        self._index: StashIndex | None = None
        self._scrubber = get_scrubber(config.security.scrub_secrets,
                                      tuple(config.security.secret_patterns))

    # ----- the model and the in-memory index ----------------------------------------------
    def _model(self) -> Any:
        if not self.settings.enabled:
            raise UsageError(f"agent memory is disabled ([stash] enabled = false in "
                             f"{self.config.source or 'the configuration'})")
        embedder = self.embedder.wait(MODEL_WAIT_S)
        if embedder is None:
            raise ModelUnavailableError(
                f"agent memory needs the embedding model, which is unavailable: "
                f"{self.embedder.error or 'still loading'}")
        return embedder

    def index(self) -> StashIndex:
        """The in-memory index of the current model, built (re-embedding what the model
        has no vector for) on first use."""
        with self._lock:
            model = self._model()
            if self._index is None or self._index.model != model.identity:
                rows = {r.segment_id: r for r in self.store.segments()}
                stale = [r for r in rows.values() if r.embedding_model != model.identity]
                if stale:
                    self._reembed(model, stale)
                    rows.update((r.segment_id, replace(r, embedding_model=model.identity))
                                for r in stale)
                index = StashIndex(model.identity, model.dimension)
                ids, vectors = self.store.segment_vectors(model.identity)
                order = [i for i, sid in enumerate(ids) if sid in rows]
                index.add([rows[ids[i]] for i in order], vectors[order] if order else vectors)
                self._add_pieces(model, index, [rows[ids[i]] for i in order])
                self._index = index
            return self._index

    def _reembed(self, model: Any, rows: Sequence[SegmentRow]) -> None:
        """Give segments made under another model a vector of ``model``, through the cache,
        and record the identity on them."""
        vectors = self._vectors(model, [r.text_hash for r in rows], [r.text for r in rows])
        with self.store.batch():
            self.store.put_embeddings(model.identity, list(vectors), np.stack(
                list(vectors.values())))
            self.store.set_segment_model([r.segment_id for r in rows], model.identity)

    def _vectors(self, model: Any, hashes: Sequence[str], texts: Sequence[str]
                 ) -> dict[str, np.ndarray]:
        """Vectors by text hash: cached ones from the store, the rest embedded in batches."""
        found = self.store.vectors_for(model.identity, list(dict.fromkeys(hashes)))
        missing = {h: t for h, t in zip(hashes, texts) if h not in found}
        batch = max(1, self.config.embedding.batch_size)
        items = list(missing.items())
        for start in range(0, len(items), batch):
            part = items[start:start + batch]
            embedded = model.embed([text for _, text in part])
            found.update({h: embedded[i] for i, (h, _) in enumerate(part)})
        return found

    def _add_pieces(self, model: Any, index: StashIndex, rows: Sequence[SegmentRow]) -> None:
        """Vectors of the further pieces of long segments (:mod:`contextd.stash.pieces`),
        through the cache (computed and stored when missing), into ``index``."""
        budget = piece_budget(self.config.embedding.max_seq_length)
        pieces = {r.segment_id: extra_pieces(r.text, budget) for r in rows}
        pieces = {sid: texts for sid, texts in pieces.items() if texts}
        if not pieces:
            return
        texts = [t for group in pieces.values() for t in group]
        hashes = [text_hash(t) for t in texts]
        vectors = self._vectors(model, hashes, texts)
        self.store.put_embeddings(model.identity, list(vectors), np.stack(list(vectors.values())))
        for sid, group in pieces.items():
            index.add_pieces(sid, np.stack([vectors[text_hash(t)] for t in group]))

    def warm_up(self) -> None:
        """Load the model and build the index ahead of the first call."""
        self.index()

    # ----- stash --------------------------------------------------------------------------
    def stash(self, request: StashRequest) -> StashResult:
        """Store segments; every check runs before anything is written."""
        if not request.segments:
            raise UsageError("stash: give at least one segment")
        now = self.now()
        expires = self._expiry(request, now)
        with self._lock:
            index = self.index()
            prepared, redacted = [], 0
            batch_ids = set()
            for number, item in enumerate(request.segments, start=1):
                row, count = self._prepare(item, number, now, expires, request.protected,
                                           index, batch_ids)
                prepared.append(row)
                batch_ids.add(row.segment_id)
                redacted += count
            new = [r for r in prepared if r.segment_id not in index.rows]
            total = self.store.count_segments()
            if total + len(new) > self.settings.max_segments:
                raise StashFullError(
                    f"the stash is full: {total} segments stored, {len(new)} more would pass "
                    f"[stash] max_segments = {self.settings.max_segments}; run 'contextd "
                    "stash gc', delete segments, or raise the cap")
            if new:
                self._write(index, new)
        return StashResult(segment_ids=tuple(r.segment_id for r in prepared),
                           tokens_freed=sum(r.tokens for r in prepared),
                           secrets_redacted=redacted)

    def _expiry(self, request: StashRequest, now: datetime) -> datetime | None:
        days = request.expires_in_days
        if days is None:
            days = self.settings.default_ttl_days
        if days < 0:
            raise UsageError(f"expires_in_days must be 0 (never) or more, not {days}")
        if request.protected or days == 0:
            return None
        return now + timedelta(days=days)

    def _prepare(self, item: SegmentInput, number: int, now: datetime,
                 expires: datetime | None, protected: bool, index: StashIndex,
                 batch_ids: set[str]) -> tuple[SegmentRow, int]:
        """A checked, scrubbed row for one input segment (UsageError naming it if bad)."""
        where = f"segment {number}"
        if not isinstance(item.text, str) or not item.text.strip():
            raise UsageError(f"{where}: text is empty")
        size = len(item.text.encode("utf-8", "surrogatepass"))
        if size > self.settings.max_segment_bytes:
            raise UsageError(f"{where}: {size / 1e6:.1f} MB is over the "
                             f"{self.settings.max_segment_bytes / 1e6:.1f} MB limit "
                             "([stash] max_segment_bytes); stash a smaller excerpt")
        kind = SegmentType.parse(item.type)
        session = (item.session_id or "").strip()
        if not session or session == ALL_SESSIONS:
            raise UsageError(f"{where}: session_id must be a non-empty name other than "
                             f"{ALL_SESSIONS!r}")
        created = parse_time(item.timestamp, f"{where}: timestamp") or now
        for ref in item.references:
            if ref not in index.rows and ref not in batch_ids:
                raise UsageError(f"{where}: references unknown segment {ref!r}")
        scrubbed = scrub_segment(self._scrubber, item.text, kind, item.source or "")
        row = SegmentRow(
            segment_id=item.segment_id or new_segment_id(), session_id=session,
            text=scrubbed.text, segment_type=kind.value, created_at=created, stashed_at=now,
            tokens=estimate_tokens(scrubbed.text), topic=item.topic or None,
            source=item.source or None, references=tuple(dict.fromkeys(item.references)),
            text_hash=text_hash(scrubbed.text), embedding_model=index.model,
            expires_at=expires, protected=protected)
        existing = index.rows.get(row.segment_id)
        if existing is not None and (existing.text_hash, existing.session_id) != (
                row.text_hash, row.session_id):
            raise UsageError(f"{where}: segment id {row.segment_id!r} is already used by "
                             "another segment")
        # A retried call (the owner died after committing) finds its segments stored.
        return (existing or row), scrubbed.redactions

    def _write(self, index: StashIndex, rows: list[SegmentRow]) -> None:
        model = self._model()
        vectors = self._vectors(model, [r.text_hash for r in rows], [r.text for r in rows])
        with self.store.batch():
            self.store.put_embeddings(model.identity, list(vectors),
                                      np.stack(list(vectors.values())))
            self.store.put_segments(rows)
        index.add(rows, np.stack([vectors[r.text_hash] for r in rows]))
        self._add_pieces(model, index, rows)

    # ----- retrieve -----------------------------------------------------------------------
    def retrieve(self, request: RetrieveRequest) -> RetrieveResult:
        """Segments relevant to ``request.query``, best first (see :mod:`.ranking`)."""
        started = time.perf_counter()
        top_k, min_sim, hops, budget, where = self._check(request)
        model = self._model()
        vector = model.embed_query(request.query)
        embedded = time.perf_counter()
        with self._lock:
            index = self.index()
            now_s = epoch(self.now())
            rows = index.visible(where, now_s)
            sims = index.similarities(vector, rows)
            best_sim = float(sims.max()) if len(sims) else None
            keep = sims >= min_sim
            rows, sims = rows[keep], sims[keep]
            age, recency, combined = score_parts(sims, index.column("created")[rows],
                                                 index.column("stashed")[rows], now_s,
                                                 self._weights())
            best = _top(combined, top_k * OVERFETCH)
            found = {index.ids[rows[i]]: (float(sims[i]), float(age[i]), float(recency[i]),
                                          float(combined[i])) for i in best}
            chosen = self._dedupe(index, list(found), top_k)
            results = [self._result(index, sid, found[sid], 0, None, dupes)
                       for sid, dupes in chosen]
            results += self._chain(index, results, vector, now_s, hops, where)
            notes, sessions = ((), {}) if results else self._why_empty(
                index, vector, now_s, where, min_sim, best_sim)
        kept, tokens = [], 0
        for item in results:
            # The best hit always comes back (as a preview; merge gives it whole): a segment
            # larger than the whole budget must not make the answer empty.
            if tokens + item.tokens <= budget or not kept:
                kept.append(item)
                tokens += item.tokens
        if kept and kept[0].tokens > budget:
            notes += (f"the best segment holds {kept[0].tokens} tokens, more than max_tokens "
                      f"{budget}: its preview is returned; merge_stashed_context gives it "
                      "whole",)
        done = time.perf_counter()
        return RetrieveResult(query=request.query, segments=tuple(kept),
                              total_found=int(len(rows)), total_tokens=tokens,
                              timings_ms={"embed": round((embedded - started) * 1000, 2),
                                          "search": round((done - embedded) * 1000, 2),
                                          "total": round((done - started) * 1000, 2)},
                              min_similarity=min_sim,
                              best_similarity=None if best_sim is None else round(best_sim, 4),
                              sessions=sessions, notes=notes)

    def _why_empty(self, index: StashIndex, vector: np.ndarray, now_s: float, where: Filter,
                   min_sim: float, best_sim: float | None) -> tuple[tuple[str, ...],
                                                                     dict[str, int]]:
        """Notes for an empty answer: the best similarity the filter let through (so the
        caller knows how far to lower min_similarity), and the sessions that hold segments,
        with those of other sessions that would have matched (a segment stashed under one
        session_id is not seen by a retrieval naming another, or none)."""
        sessions: dict[str, int] = {}
        for offset in index.visible(Filter(ALL_SESSIONS), now_s):
            sid = index.rows[index.ids[offset]].session_id
            sessions[sid] = sessions.get(sid, 0) + 1
        notes = []
        if best_sim is None:
            scope = ("any session" if where.session_id == ALL_SESSIONS
                     else f"session {where.session_id!r}")
            notes.append(f"no live segment in {scope} passes the filters")
        else:
            lower = max(-1.0, best_sim - 0.01)
            notes.append(f"nothing reached min_similarity {min_sim:.2f}; the best similarity "
                         f"seen was {best_sim:.3f} (min_similarity {lower:.2f} would show it)")
        if where.session_id != ALL_SESSIONS:
            others = replace(where, session_id=ALL_SESSIONS)
            rows = index.visible(others, now_s)
            sims = index.similarities(vector, rows)
            matching: dict[str, int] = {}
            for offset in rows[sims >= min_sim]:
                sid = index.rows[index.ids[offset]].session_id
                if sid != where.session_id:
                    matching[sid] = matching.get(sid, 0) + 1
            if matching:
                named = ", ".join(f"{sid!r} ({n})" for sid, n in sorted(matching.items()))
                notes.append(f"segments of other sessions match: {named}; pass that "
                             "session_id, or all_sessions")
            elif sessions and where.session_id not in sessions:
                named = ", ".join(f"{sid!r} ({n})" for sid, n in sorted(sessions.items()))
                notes.append(f"session {where.session_id!r} holds no segments; sessions "
                             f"holding segments: {named}")
        return tuple(notes), sessions

    def _weights(self) -> Weights:
        return Weights.from_config(self.settings)

    def _check(self, request: RetrieveRequest) -> tuple[int, float, int, int, Filter]:
        """The request's numbers with defaults applied, and its filter; UsageError if bad."""
        if not request.query or not request.query.strip():
            raise UsageError("retrieve: the query is empty")
        top_k = self.settings.default_top_k if request.top_k is None else request.top_k
        if not 1 <= top_k <= MAX_TOP_K:
            raise UsageError(f"top_k must be between 1 and {MAX_TOP_K}, not {top_k}")
        min_sim = (self.settings.min_similarity if request.min_similarity is None
                   else request.min_similarity)
        if not -1.0 <= min_sim <= 1.0:
            raise UsageError(f"min_similarity must be between -1 and 1, not {min_sim}")
        hops = self.settings.max_hops if request.max_hops is None else request.max_hops
        if not 0 <= hops <= MAX_HOPS_LIMIT:
            raise UsageError(f"max_hops must be between 0 and {MAX_HOPS_LIMIT}, not {hops}")
        budget = request.max_tokens or self.settings.default_max_tokens
        if budget < 1:
            raise UsageError(f"max_tokens must be 1 or more, not {budget}")
        since = parse_time(request.since, "since")
        until = parse_time(request.until, "until")
        if since and until and since > until:
            raise UsageError(f"since ({request.since}) is after until ({request.until})")
        session = ALL_SESSIONS if request.all_sessions else (request.session_id or "").strip()
        if not session:
            raise UsageError("session_id is empty; name a session or ask all_sessions")
        types = tuple(SegmentType.parse(t).value for t in request.types)
        return top_k, min_sim, hops, budget, Filter(session, types, request.topic or None,
                                                    since, until)

    def _dedupe(self, index: StashIndex, order: list[str], top_k: int
                ) -> list[tuple[str, list[str]]]:
        hashes = {sid: index.rows[sid].text_hash for sid in order}
        vectors = {sid: index.vector(sid) for sid in order}
        return collapse_duplicates(order, hashes, vectors,
                                   self.settings.dedupe_similarity)[:top_k]

    def _chain(self, index: StashIndex, hits: list[RetrievedSegment], vector: np.ndarray,
               now_s: float, hops: int, where: Filter) -> list[RetrievedSegment]:
        """Segments the hits reference (up to ``hops`` away), scored below their hit.
        They keep to the session filter and expiry, not to the similarity cut-off."""
        if not hops or not hits:
            return []
        allowed = index.mask(Filter(where.session_id), now_s)
        reached = follow_references(
            [h.segment_id for h in hits],
            lambda sid: [r for r in index.rows[sid].references
                         if r in index.position and allowed[index.position[r]]], hops)
        scores = {h.segment_id: h.score for h in hits}
        chained = []
        for sid, (distance, origin) in reached.items():
            row = index.rows[sid]
            sim = float(index.vector(sid) @ vector)
            age, recency, _ = score_parts(sim, epoch(row.created_at), epoch(row.stashed_at),
                                          now_s, self._weights())
            score = scores[origin] * self.settings.reference_decay ** distance
            chained.append(self._result(index, sid, (sim, float(age), float(recency), score),
                                        distance, origin, []))
        return sorted(chained, key=lambda r: -r.score)

    def _result(self, index: StashIndex, sid: str, parts: tuple[float, float, float, float],
                hops: int, origin: str | None, duplicates: list[str]) -> RetrievedSegment:
        row = index.rows[sid]
        sim, age, recency, score = parts
        limit = self.settings.preview_chars
        preview = row.text if len(row.text) <= limit else row.text[:limit].rstrip() + "…"
        return RetrievedSegment(
            segment_id=sid, text=preview, type=row.segment_type, session_id=row.session_id,
            topic=row.topic, source=row.source, created_at=iso(row.created_at),
            stashed_at=iso(row.stashed_at), tokens=row.tokens, similarity=round(sim, 4),
            score=round(score, 4),
            score_parts=ScoreParts(round(sim, 4), round(age, 4), round(recency, 4), hops),
            reached_from=origin, duplicates=tuple(duplicates), protected=row.protected)

    # ----- merge, list, delete, protect, gc -------------------------------------------------
    def _rows(self, segment_ids: Sequence[str]) -> list[SegmentRow]:
        """Live rows of the ids, in order; a UsageError naming any unknown id."""
        if not segment_ids:
            raise UsageError("give at least one segment id")
        index = self.index()
        missing = [sid for sid in segment_ids if sid not in index.rows]
        if missing:
            raise UsageError(f"unknown segment id(s): {', '.join(missing)}")
        return [index.rows[sid] for sid in dict.fromkeys(segment_ids)]

    def _public(self, row: SegmentRow) -> Segment:
        return public_segment(row, self.index().referenced_by.get(row.segment_id, ()))

    def merge(self, segment_ids: Sequence[str], remove: bool = False) -> MergeResult:
        """Full segments to put back into the agent's window (``remove``: and forget them)."""
        with self._lock:
            rows = self._rows(segment_ids)
            segments = tuple(self._public(r) for r in rows)
            removed = self.delete([r.segment_id for r in rows]).segment_ids if remove else ()
        return MergeResult(segments=segments, tokens_added=sum(r.tokens for r in rows),
                           removed=tuple(removed))

    def get(self, segment_ids: Sequence[str]) -> SegmentList:
        """Segments by id (``contextd stash show``)."""
        with self._lock:
            segments = tuple(self._public(r) for r in self._rows(segment_ids))
        return SegmentList(segments=segments, total=len(segments))

    def list(self, session_id: str = "", all_sessions: bool = False, types: Sequence[str] = (),
             topic: str | None = None, limit: int = 50, offset: int = 0,
             include_expired: bool = False) -> SegmentList:
        """Stored segments, newest stash first. Expired ones (retrieval no longer sees them;
        gc deletes them) only with ``include_expired``."""
        if limit < 1 or offset < 0:
            raise UsageError("limit must be 1 or more and offset 0 or more")
        wanted = {SegmentType.parse(t).value for t in types}
        now = self.now()
        with self._lock:
            rows = [r for r in self.index().rows.values()
                    if (include_expired or r.protected or r.expires_at is None
                        or r.expires_at > now)
                    and (all_sessions or r.session_id == (session_id or "default"))
                    and (not wanted or r.segment_type in wanted)
                    and (topic is None or r.topic == topic)]
            rows.sort(key=lambda r: (r.stashed_at, r.segment_id), reverse=True)
            page = tuple(self._public(r) for r in rows[offset:offset + limit])
        return SegmentList(segments=page, total=len(rows))

    def delete(self, segment_ids: Sequence[str]) -> ChangeResult:
        """Forget segments (unknown ids are an error; nothing is deleted then)."""
        with self._lock:
            ids = [r.segment_id for r in self._rows(segment_ids)]
            count = self.store.delete_segments(ids)
            self.index().remove(ids)
        return ChangeResult(segment_ids=tuple(ids), count=count)

    def protect(self, segment_ids: Sequence[str], protected: bool = True) -> ChangeResult:
        """Protect segments from expiry and gc (or lift the protection)."""
        with self._lock:
            ids = [r.segment_id for r in self._rows(segment_ids)]
            count = self.store.protect_segments(ids, protected)
            self.index().set_protected(ids, protected)
        return ChangeResult(segment_ids=tuple(ids), count=count)

    def gc(self) -> GcResult:
        """Delete expired segments and, by ``[stash] gc_max_age_days``, unprotected ones
        stashed longer ago; protected segments are never collected."""
        with self._lock:
            index = self.index()
            now = self.now()
            max_age = self.settings.gc_max_age_days
            cutoff = now - timedelta(days=max_age) if max_age > 0 else None
            expired, aged = [], []
            for row in index.rows.values():
                if row.protected:
                    continue
                if row.expires_at is not None and row.expires_at <= now:
                    expired.append(row.segment_id)
                elif cutoff is not None and row.stashed_at < cutoff:
                    aged.append(row.segment_id)
            if expired or aged:
                self.store.delete_segments(expired + aged)
                index.remove(expired + aged)
            return GcResult(expired=tuple(expired), aged_out=tuple(aged), remaining=len(index))

    def stats(self) -> dict[str, Any]:
        """Segments held in memory, by session, for get_context_stats."""
        with self._lock:
            if self._index is None:
                return {"loaded": False}
            sessions: dict[str, int] = {}
            for row in self._index.rows.values():
                sessions[row.session_id] = sessions.get(row.session_id, 0) + 1
            return {"loaded": True, "model": self._index.model, "segments": len(self._index),
                    "sessions": sessions}
