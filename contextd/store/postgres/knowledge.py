"""The knowledge base on PostgreSQL: named contexts, their documents and memberships
(:mod:`contextd.knowledge`). A document's chunks are files under ``kb://`` (contents.py);
these tables say which contexts hold them and where they came from."""

from __future__ import annotations

import json
from typing import Any, Sequence

from contextd.store.base import DocumentRecord, KnowledgeDocument
from contextd.store.postgres.session import PostgresSession, _Transaction
from contextd.store.rows import iso

DEFAULT_CONTEXT = ("default", "default", "Documents added without naming a context")


class KnowledgeMixin(PostgresSession):
    """IndexStore's ``kb_*`` methods. Changes of contexts or memberships bump the generation:
    cached scopes (which documents a context holds) catch up with ``changes_since``."""

    def _ensure_default_context(self) -> None:
        """Every workspace has the ``default`` context (migration 003 made it for those
        that existed then)."""
        with self._transaction() as tx:
            tx.conn.execute("""INSERT INTO kb_contexts (workspace_id, name, display_name,
                               description) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING""",
                            [self.workspace, *DEFAULT_CONTEXT])

    def _dicts(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        with self._connection() as conn:
            cur = conn.execute(sql, params)
            names = [d.name for d in cur.description]
            return [{k: iso(v) for k, v in zip(names, row)} for row in cur.fetchall()]

    def kb_contexts(self, name: str | None = None) -> list[dict[str, Any]]:
        return self._dicts(
            f"""SELECT c.name, c.display_name, c.description, c.created_at, c.updated_at,
                       count(f.file_id) AS documents,
                       coalesce(sum(f.chunk_count), 0)::bigint AS chunks,
                       coalesce(sum(f.size_bytes), 0)::bigint AS size_bytes
                FROM kb_contexts c
                LEFT JOIN kb_memberships m ON m.workspace_id = c.workspace_id
                     AND m.context = c.name
                LEFT JOIN file_state f ON f.workspace_id = m.workspace_id AND f.path = m.path
                WHERE c.workspace_id = %s {"AND c.name = %s" if name is not None else ""}
                GROUP BY c.name, c.display_name, c.description, c.created_at, c.updated_at
                ORDER BY c.name COLLATE "C" """,
            [self.workspace] + ([name] if name is not None else []))

    def kb_create_context(self, name: str, display_name: str, description: str) -> bool:
        with self._transaction() as tx:
            created = tx.conn.execute(
                """INSERT INTO kb_contexts (workspace_id, name, display_name, description)
                   VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING""",
                [self.workspace, name, display_name, description]).rowcount == 1
            if created:
                tx.touch()  # cached scopes learn the name
        return created

    def kb_delete_context(self, name: str) -> list[str]:
        with self._transaction() as tx:
            paths = [r[0] for r in tx.conn.execute(
                "SELECT path FROM kb_memberships WHERE workspace_id = %s AND context = %s",
                [self.workspace, name]).fetchall()]
            tx.conn.execute("DELETE FROM kb_contexts WHERE workspace_id = %s AND name = %s",
                            [self.workspace, name])
            tx.touch()
            return self._kb_unlink(tx, paths, [name])[1]

    def kb_documents(self, context: str | None = None,
                     paths: Sequence[str] | None = None) -> list[dict[str, Any]]:
        where, params = "", [self.workspace]
        if context is not None:
            where += (" AND d.path IN (SELECT path FROM kb_memberships WHERE workspace_id = %s "
                      "AND context = %s)")
            params += [self.workspace, context]
        if paths is not None:
            where += " AND d.path = ANY(%s)"
            params.append(list(paths))
        return self._dicts(
            f"""SELECT d.path, d.source, d.format, cardinality(d.page_starts) AS pages,
                       d.title, f.size_bytes, f.chunk_count AS chunks, f.content_hash,
                       f.secrets_redacted,
                       array_agg(m.context ORDER BY m.context COLLATE "C")
                           FILTER (WHERE m.context IS NOT NULL) AS contexts,
                       d.added_at, d.updated_at, coalesce(d.metadata, '{{}}'::jsonb) AS metadata
                FROM kb_documents d
                JOIN file_state f ON f.workspace_id = d.workspace_id AND f.path = d.path
                LEFT JOIN kb_memberships m ON m.workspace_id = d.workspace_id
                     AND m.path = d.path
                WHERE d.workspace_id = %s {where}
                GROUP BY d.path, d.source, d.format, d.page_starts, d.title, f.size_bytes,
                         f.chunk_count, f.content_hash, f.secrets_redacted, d.added_at,
                         d.updated_at, d.metadata
                ORDER BY d.path COLLATE "C" """, params)

    def kb_write_documents(self, documents: Sequence[DocumentRecord],
                           contexts: Sequence[str]) -> int:
        if not documents:
            return self.generation()
        with self._transaction() as tx:
            self.write_files([d.file for d in documents])  # type: ignore[attr-defined]
            with tx.conn.cursor() as cur:
                cur.executemany(
                    """INSERT INTO kb_documents (workspace_id, path, source, format,
                       page_starts, title, metadata)
                       VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb)
                       ON CONFLICT (workspace_id, path) DO UPDATE SET
                       source = EXCLUDED.source, format = EXCLUDED.format,
                       page_starts = EXCLUDED.page_starts, title = EXCLUDED.title,
                       metadata = EXCLUDED.metadata, updated_at = LOCALTIMESTAMP""",
                    [(self.workspace, d.file.path, d.source, d.format,
                      list(d.page_starts) or None, d.title,
                      json.dumps(d.metadata) if d.metadata else None) for d in documents])
            self._kb_link(tx, [d.file.path for d in documents], contexts)
        return self._result_generation(tx)

    def kb_link(self, paths: Sequence[str], contexts: Sequence[str]) -> int:
        with self._transaction() as tx:
            return self._kb_link(tx, paths, contexts)

    def _kb_link(self, tx: _Transaction, paths: Sequence[str], contexts: Sequence[str]
                 ) -> int:
        pairs = [(c, p) for c in dict.fromkeys(contexts) for p in dict.fromkeys(paths)]
        added = tx.conn.execute(
            """INSERT INTO kb_memberships (workspace_id, context, path)
               SELECT %s, context, path FROM unnest(%s::text[], %s::text[]) AS p(context, path)
               ON CONFLICT DO NOTHING""",
            [self.workspace, [c for c, _ in pairs], [p for _, p in pairs]]).rowcount
        if added:
            tx.touch()
        self._kb_touch(tx, contexts)
        return added

    def kb_unlink(self, paths: Sequence[str], contexts: Sequence[str] | None
                  ) -> tuple[int, list[str]]:
        with self._transaction() as tx:
            return self._kb_unlink(tx, paths, contexts)

    def _kb_unlink(self, tx: _Transaction, paths: Sequence[str],
                   contexts: Sequence[str] | None) -> tuple[int, list[str]]:
        """Remove memberships; documents left in no context are deleted with their files.
        Returns (memberships removed, orphaned paths)."""
        if not paths:
            return 0, []
        where, params = "workspace_id = %s AND path = ANY(%s)", [self.workspace, list(paths)]
        if contexts is not None:
            where += " AND context = ANY(%s)"
            params.append(list(contexts))
        removed = tx.conn.execute(f"DELETE FROM kb_memberships WHERE {where}", params).rowcount
        orphans = [r[0] for r in tx.conn.execute(
            """DELETE FROM kb_documents d WHERE d.workspace_id = %s AND d.path = ANY(%s)
               AND NOT EXISTS (SELECT 1 FROM kb_memberships m WHERE m.workspace_id = %s
                               AND m.path = d.path)
               RETURNING d.path""", [self.workspace, list(paths), self.workspace]).fetchall()]
        orphans.sort()
        if orphans:
            self.delete_files(orphans)  # type: ignore[attr-defined]
        if removed:
            tx.touch()
        self._kb_touch(tx, contexts)
        return removed, orphans

    def _kb_touch(self, tx: _Transaction, contexts: Sequence[str] | None) -> None:
        if contexts:
            tx.conn.execute("UPDATE kb_contexts SET updated_at = LOCALTIMESTAMP "
                            "WHERE workspace_id = %s AND name = ANY(%s)",
                            [self.workspace, list(contexts)])

    def kb_document_map(self) -> dict[str, KnowledgeDocument]:
        rows = self._rows(
            """SELECT d.path, d.source, d.format, d.page_starts,
                      array_agg(m.context ORDER BY m.context COLLATE "C")
                          FILTER (WHERE m.context IS NOT NULL), d.metadata
               FROM kb_documents d LEFT JOIN kb_memberships m
                    ON m.workspace_id = d.workspace_id AND m.path = d.path
               WHERE d.workspace_id = %s
               GROUP BY d.path, d.source, d.format, d.page_starts, d.metadata""",
            [self.workspace])
        return {path: KnowledgeDocument(path, source, fmt, tuple(pages or ()),
                                        tuple(contexts or ()), dict(meta or {}))
                for path, source, fmt, pages, contexts, meta in rows}
