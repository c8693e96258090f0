"""Search sessions: search once, keep the best results, read them back in pieces.

An agent's tool answers are capped (Claude Code warns at 10k tokens), yet a research question
needs more than one answer's worth of evidence. search_knowledge therefore runs the ordinary
query path (:meth:`contextd.runtime.engine.Engine.query`), keeps its top results in a *session* in the
index database and answers with the session id and a short preview; get_search_results hands
out the full chunks of one or several sessions later. Sessions live in the store, not in the
memory of the process that ran the search, so every process of the project (another MCP
server, the CLI) sees them; the newest ``sessions.max_sessions`` are kept and each expires
``sessions.expire_after_hours`` after it was made.

The manager lives in the process that owns the database (the Engine's); others reach it
through the owner socket like every Engine method.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from contextd.errors import UsageError
from contextd.query.records import Hit, QueryRequest, QueryResponse
from contextd.records import to_dict
from contextd.sessions.records import (
    SearchRequest, SearchResults, SearchSession, SessionHit, SessionInfo, SessionList,
)
from contextd.sessions.scope import search_scope
from contextd.store.base import StoredSearchSession

SESSION_PREFIX = "search_"
# Token budget of the query behind a session: large enough that the budget never cuts the
# kept results below ``results_per_session`` (chunks are at most a few hundred tokens).
SESSION_QUERY_TOKENS = 200_000
# Characters of each result's text shown in search_knowledge's preview.
PREVIEW_CHARS = 300
# Tokens of full results one get_search_results answer may carry (its text and structured
# copies both count against the client's cap; query_context uses the same bound).
RESULTS_MAX_TOKENS = 6000
# Most sessions one get_search_results call may read.
MAX_SESSIONS_PER_CALL = 20


def new_session_id() -> str:
    """``search_`` and 8 random hex characters."""
    return SESSION_PREFIX + secrets.token_hex(4)


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _iso(moment: datetime | None) -> str:
    return moment.replace(tzinfo=timezone.utc).isoformat(timespec="seconds") if moment else ""


def knowledge_query(search: SearchRequest, k: int, min_score: float | None) -> QueryRequest:
    """The QueryRequest behind a search: its files and folders as the scope (see
    :mod:`contextd.sessions.scope`) and its knowledge contexts (``["*"]``: all of them),
    searched beside the project index."""
    return QueryRequest(query=search.query, k=k, max_tokens=SESSION_QUERY_TOKENS,
                        min_score=min_score or None, task_id="search_session",
                        wait_for_model=True, scope=search_scope(search.files, search.folders),
                        contexts=tuple(search.contexts) or None)


def _pages(metadata: dict[str, Any]) -> tuple[int, ...]:
    """The pages of a document hit (``metadata["page"]``: a number, a list, or "3-4")."""
    page = metadata.get("page", metadata.get("pages"))
    if page is None or page == "":
        return ()
    if isinstance(page, (list, tuple)):
        return tuple(int(p) for p in page)
    first, _, last = str(page).partition("-")
    return tuple(range(int(first), int(last or first) + 1))


def file_uri(root: Path, file_path: str) -> str:
    """The ``file://`` URI of a root-relative path."""
    return (root / file_path).resolve().as_uri()


class SessionManager:
    """Creates, reads and expires search sessions in one project's store."""

    def __init__(self, project: Any, store: Any, query: Callable[[QueryRequest], QueryResponse]):
        self.project = project
        self.store = store
        self._query = query

    @property
    def config(self):
        return self.project.config.sessions

    # ----- search_knowledge ------------------------------------------------------------
    def search(self, search: SearchRequest) -> SearchSession:
        """Run the query, keep its best results as a new session, answer with a preview."""
        if not search.query.strip():
            raise UsageError("query is empty: say what to search for")
        cfg = self.config
        min_similarity = (cfg.min_similarity if search.min_similarity is None
                          else search.min_similarity)
        request = knowledge_query(search, cfg.results_per_session, min_similarity)
        response = self._query(request)
        notes: list[str] = list(response.notes)
        session_id = new_session_id()
        hits = [self._hit(session_id, rank, hit) for rank, hit in enumerate(
            (h for h in response.hits if h.score >= min_similarity), start=1)]
        hits = hits[:cfg.results_per_session]
        created = _utc_now()
        stored = StoredSearchSession(
            session_id=session_id, query=search.query, created_at=created,
            params={key: value for key, value in to_dict(search).items()
                    if key != "query" and value not in ((), [], None)},
            result_count=len(hits), results=tuple(to_dict(h) for h in hits))
        self.store.put_search_session(stored)
        self._prune(created)
        preview = tuple(_shortened(h) for h in hits[:cfg.preview_results])
        if not hits:
            notes.append("nothing matched: try other words, a wider scope or a lower "
                         "min_similarity")
        return SearchSession(session=self._info(stored), preview=preview,
                             notes=tuple(dict.fromkeys(notes)))

    def _hit(self, session_id: str, rank: int, hit: Hit) -> SessionHit:
        metadata = hit.metadata or {}
        return SessionHit(
            rank=rank, chunk_id=hit.chunk_id, file_path=hit.file_path,
            file_uri=file_uri(self.project.root, hit.file_path), start_line=hit.start_line,
            end_line=hit.end_line, label=hit.label, kind=hit.kind, language=hit.language,
            score=hit.score, text=hit.snippet, tokens=hit.tokens, pages=_pages(metadata),
            document=str(metadata.get("document") or ""),
            contexts=tuple(metadata.get("contexts") or ()), session_id=session_id)

    def _prune(self, now: datetime) -> None:
        hours = self.config.expire_after_hours
        cutoff = now - timedelta(hours=hours) if hours > 0 else None
        self.store.prune_search_sessions(self.config.max_sessions, cutoff)

    # ----- get_search_results ----------------------------------------------------------
    def results(self, session_ids: Sequence[str], limit: int | None = None) -> SearchResults:
        """Up to ``limit`` full results of each session, sessions in the order given.
        Unknown or expired ids are one error naming all of them."""
        ids = list(dict.fromkeys(s.strip() for s in session_ids if s and s.strip()))
        if not ids:
            raise UsageError("give session_id or session_ids: the ids search_knowledge "
                             "returned (list_search_results lists them)",
                             cli="give --show SESSION_ID: the id contextd search printed "
                                 "(contextd search --list lists them)")
        if len(ids) > MAX_SESSIONS_PER_CALL:
            raise UsageError(f"at most {MAX_SESSIONS_PER_CALL} sessions per call, got "
                             f"{len(ids)}")
        limit = self.config.default_limit if limit is None else limit
        if limit < 1:
            raise UsageError(f"limit must be at least 1, got {limit}")
        found = {sid: s for sid, s in self.store.get_search_sessions(ids).items()
                 if self._alive(s)}
        missing = [sid for sid in ids if sid not in found]
        if missing:
            mcp, cli = self._unknown_message(missing)
            raise UsageError(mcp, cli=cli)
        infos, results, omitted, tokens = [], [], 0, 0
        for sid in ids:
            stored = found[sid]
            infos.append(self._info(stored))
            for data in stored.results[:limit]:
                hit = SessionHit(**{**data, "pages": tuple(data.get("pages") or ()),
                                    "contexts": tuple(data.get("contexts") or ()),
                                    "session_id": sid})
                if results and tokens + hit.tokens > RESULTS_MAX_TOKENS:
                    omitted += 1
                    continue
                tokens += hit.tokens
                results.append(hit)
        notes = ()
        if omitted:
            notes = (f"{omitted} result(s) left out to keep this answer under "
                     f"{RESULTS_MAX_TOKENS} tokens; ask for fewer sessions or a lower limit",)
        return SearchResults(sessions=tuple(infos), results=tuple(results), omitted=omitted,
                             notes=notes)

    def _unknown_message(self, missing: list[str]) -> tuple[str, str]:
        """The error for unknown sessions, in the MCP tools' words and the CLI's."""
        live = [s.session_id for s in self.store.list_search_sessions(self.config.max_sessions)
                if self._alive(s)]
        known = f"current sessions: {', '.join(live)}" if live else "there are no sessions now"
        hours = self.config.expire_after_hours
        life = f"expire after {hours:g} h and " if hours > 0 else ""
        why = (f"unknown search session(s) {', '.join(missing)}: sessions {life}only the "
               f"last {self.config.max_sessions} are kept")
        return (f"{why}; run search_knowledge again ({known})",
                f"{why}; search again with contextd search QUERY ({known}; contextd search "
                "--list lists them)")

    # ----- list_search_results ---------------------------------------------------------
    def list(self) -> SessionList:
        """Live sessions, newest first."""
        cfg = self.config
        sessions = tuple(self._info(s) for s in self.store.list_search_sessions(cfg.max_sessions)
                         if self._alive(s))
        return SessionList(sessions=sessions, max_sessions=cfg.max_sessions,
                           expire_after_hours=cfg.expire_after_hours)

    # ----- helpers ---------------------------------------------------------------------
    def _expiry(self, stored: StoredSearchSession) -> datetime | None:
        hours = self.config.expire_after_hours
        return stored.created_at + timedelta(hours=hours) if hours > 0 else None

    def _alive(self, stored: StoredSearchSession) -> bool:
        expiry = self._expiry(stored)
        return expiry is None or expiry > _utc_now()

    def _info(self, stored: StoredSearchSession) -> SessionInfo:
        return SessionInfo(session_id=stored.session_id, query=stored.query,
                           created_at=_iso(stored.created_at),
                           expires_at=_iso(self._expiry(stored)),
                           result_count=stored.result_count, params=dict(stored.params))


def _shortened(hit: SessionHit) -> SessionHit:
    """A preview copy of a hit: its text cut to PREVIEW_CHARS at a line end."""
    text = hit.text
    if len(text) > PREVIEW_CHARS:
        cut = text.rfind("\n", 0, PREVIEW_CHARS)
        text = text[:cut if cut > PREVIEW_CHARS // 2 else PREVIEW_CHARS].rstrip() + "\n…"
    return SessionHit(**{**to_dict(hit), "text": text, "pages": hit.pages,
                         "contexts": hit.contexts})
