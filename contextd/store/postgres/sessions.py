"""Search sessions on PostgreSQL: the kept results of search_knowledge
(:mod:`contextd.sessions`), readable by every process of the workspace."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Sequence

from contextd.store.base import StoredSearchSession
from contextd.store.postgres.session import PostgresSession


def _json(value: Any) -> Any:
    """A JSONB value as psycopg returns it (decoded), or text from elsewhere."""
    return json.loads(value) if isinstance(value, str) else value


class SearchSessionsMixin(PostgresSession):
    """IndexStore's ``*_search_session(s)`` methods."""

    def put_search_session(self, session: StoredSearchSession) -> None:
        with self._transaction() as tx:
            tx.conn.execute(
                """INSERT INTO search_sessions (workspace_id, session_id, query, created_at,
                   params, result_count, results) VALUES (%s, %s, %s, %s, %s::jsonb, %s,
                   %s::jsonb)""",
                [self.workspace, session.session_id, session.query, session.created_at,
                 json.dumps(session.params), session.result_count,
                 json.dumps(list(session.results), ensure_ascii=False)])

    def get_search_sessions(self, session_ids: Sequence[str]) -> dict[str, StoredSearchSession]:
        rows = self._rows(
            """SELECT session_id, query, created_at, params, result_count, results
               FROM search_sessions WHERE workspace_id = %s AND session_id = ANY(%s)""",
            [self.workspace, list(session_ids)])
        return {r[0]: StoredSearchSession(r[0], r[1], r[2], _json(r[3]) or {}, r[4],
                                          tuple(_json(r[5])))
                for r in rows}

    def list_search_sessions(self, limit: int = 100) -> list[StoredSearchSession]:
        rows = self._rows(
            """SELECT session_id, query, created_at, params, result_count FROM search_sessions
               WHERE workspace_id = %s ORDER BY created_at DESC, session_id COLLATE "C"
               LIMIT %s""", [self.workspace, limit])
        return [StoredSearchSession(r[0], r[1], r[2], _json(r[3]) or {}, r[4]) for r in rows]

    def prune_search_sessions(self, keep: int, created_before: datetime | None = None) -> int:
        with self._transaction() as tx:
            deleted = tx.conn.execute(
                """DELETE FROM search_sessions WHERE workspace_id = %s AND session_id NOT IN (
                       SELECT session_id FROM search_sessions WHERE workspace_id = %s
                       ORDER BY created_at DESC, session_id COLLATE "C" LIMIT %s)""",
                [self.workspace, self.workspace, keep]).rowcount
            if created_before is not None:
                deleted += tx.conn.execute(
                    "DELETE FROM search_sessions WHERE workspace_id = %s AND created_at < %s",
                    [self.workspace, created_before]).rowcount
        return deleted
