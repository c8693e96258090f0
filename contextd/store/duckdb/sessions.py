"""Search sessions: stored, listed and pruned."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Sequence


from contextd.store.base import StoredSearchSession
from contextd.store.duckdb.sql import first_row


class SearchSessionsMixin:
    """Search sessions of :class:`contextd.store.duckdb.store.DuckDBStore`."""

    def put_search_session(self, session: StoredSearchSession) -> None:
        with self._transaction() as cur:
            cur.execute("""INSERT INTO search_sessions (session_id, query, created_at, params,
                           result_count, results) VALUES (?, ?, ?, ?, ?, ?)""",
                        [session.session_id, session.query, session.created_at,
                         json.dumps(session.params), session.result_count,
                         json.dumps(list(session.results), ensure_ascii=False)])

    def get_search_sessions(self, session_ids: Sequence[str]) -> dict[str, StoredSearchSession]:
        rows = self._cursor().execute(
            """SELECT session_id, query, created_at, params, result_count, results
               FROM search_sessions WHERE session_id IN (SELECT unnest(?))""",
            [list(session_ids)]).fetchall()
        return {r[0]: StoredSearchSession(r[0], r[1], r[2], json.loads(r[3] or "{}"), r[4],
                                          tuple(json.loads(r[5])))
                for r in rows}

    def list_search_sessions(self, limit: int = 100) -> list[StoredSearchSession]:
        rows = self._cursor().execute(
            """SELECT session_id, query, created_at, params, result_count
               FROM search_sessions ORDER BY created_at DESC, session_id LIMIT ?""",
            [limit]).fetchall()
        return [StoredSearchSession(r[0], r[1], r[2], json.loads(r[3] or "{}"), r[4])
                for r in rows]

    def prune_search_sessions(self, keep: int, created_before: datetime | None = None) -> int:
        with self._transaction() as cur:
            before = first_row(cur.execute("SELECT count(*) FROM search_sessions"))[0]
            cur.execute("""DELETE FROM search_sessions WHERE session_id NOT IN (
                               SELECT session_id FROM search_sessions
                               ORDER BY created_at DESC, session_id LIMIT ?)""", [keep])
            if created_before is not None:
                cur.execute("DELETE FROM search_sessions WHERE created_at < ?",
                            [created_before])
            after = first_row(cur.execute("SELECT count(*) FROM search_sessions"))[0]
        return before - after
