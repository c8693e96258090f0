"""The knowledge base: contexts, documents and which context holds which document."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Sequence

import duckdb

from contextd.store.base import DocumentRecord, KnowledgeDocument
from contextd.store.duckdb.sql import first_row, iso


class KnowledgeMixin:
    """The knowledge base of :class:`contextd.store.duckdb.store.DuckDBStore`."""

    def kb_contexts(self, name: str | None = None) -> list[dict[str, Any]]:
        cur = self._cursor().execute(
            f"""SELECT c.name, c.display_name, c.description, c.created_at, c.updated_at,
                       count(f.file_id) AS documents,
                       coalesce(sum(f.chunk_count), 0) AS chunks,
                       coalesce(sum(f.size_bytes), 0) AS size_bytes
                FROM kb_contexts c
                LEFT JOIN kb_memberships m ON m.context = c.name
                LEFT JOIN file_state f ON f.path = m.path
                {"WHERE c.name = ?" if name is not None else ""}
                GROUP BY ALL ORDER BY c.name""", [name] if name is not None else [])
        names = [d[0] for d in cur.description]
        return [{k: iso(v) for k, v in zip(names, row)} for row in cur.fetchall()]

    def kb_create_context(self, name: str, display_name: str, description: str) -> bool:
        with self._transaction() as cur:
            if first_row(cur.execute("SELECT 1 FROM kb_contexts WHERE name = ?", [name])):
                return False
            cur.execute("INSERT INTO kb_contexts (name, display_name, description) "
                        "VALUES (?, ?, ?)", [name, display_name, description])
            self._bump_generation(cur)  # cached scopes learn the name
            return True

    def kb_delete_context(self, name: str) -> list[str]:
        with self._transaction() as cur:
            paths = [r[0] for r in cur.execute(
                "SELECT path FROM kb_memberships WHERE context = ?", [name]).fetchall()]
            cur.execute("DELETE FROM kb_contexts WHERE name = ?", [name])
            self._bump_generation(cur)
            return self._kb_unlink(cur, paths, [name])[1]

    def kb_documents(self, context: str | None = None,
                     paths: Sequence[str] | None = None) -> list[dict[str, Any]]:
        where, params = [], []
        if context is not None:
            where.append("d.path IN (SELECT path FROM kb_memberships WHERE context = ?)")
            params.append(context)
        if paths is not None:
            where.append("d.path IN (SELECT unnest(?))")
            params.append(list(paths))
        cur = self._cursor().execute(
            f"""SELECT d.path, d.source, d.format, len(d.page_starts) AS pages, d.title,
                       f.size_bytes, f.chunk_count AS chunks, f.content_hash,
                       f.secrets_redacted,
                       list(m.context ORDER BY m.context) FILTER (m.context IS NOT NULL)
                           AS contexts,
                       d.added_at, d.updated_at, d.metadata
                FROM kb_documents d JOIN file_state f ON f.path = d.path
                LEFT JOIN kb_memberships m ON m.path = d.path
                {"WHERE " + " AND ".join(where) if where else ""}
                GROUP BY ALL ORDER BY d.path""", params)
        names = [d[0] for d in cur.description]
        rows = [{k: iso(v) for k, v in zip(names, row)} for row in cur.fetchall()]
        for row in rows:
            row["metadata"] = json.loads(row["metadata"]) if row["metadata"] else {}
        return rows

    def kb_write_documents(self, documents: Sequence[DocumentRecord],
                           contexts: Sequence[str]) -> int:
        if not documents:
            return self.generation()
        paths = [d.file.path for d in documents]
        with self._transaction() as cur:
            gen = self.write_files([d.file for d in documents])
            added = dict(cur.execute("SELECT path, added_at FROM kb_documents "
                                     "WHERE path IN (SELECT unnest(?))", [paths]).fetchall())
            cur.execute("DELETE FROM kb_documents WHERE path IN (SELECT unnest(?))", [paths])
            now = datetime.now()
            self._insert(cur, "kb_documents", {
                "path": paths, "source": [d.source for d in documents],
                "format": [d.format for d in documents],
                "page_starts": [list(d.page_starts) or None for d in documents],
                "title": [d.title for d in documents],
                "metadata": [json.dumps(d.metadata) if d.metadata else None
                             for d in documents],
                "added_at": [added.get(p, now) for p in paths],
                "updated_at": [now] * len(paths)})
            self._kb_link(cur, paths, contexts)
        return gen

    def kb_link(self, paths: Sequence[str], contexts: Sequence[str]) -> int:
        with self._transaction() as cur:
            return self._kb_link(cur, paths, contexts)

    def _kb_link(self, cur: duckdb.DuckDBPyConnection, paths: Sequence[str],
                 contexts: Sequence[str]) -> int:
        pairs = [(c, p) for c in dict.fromkeys(contexts) for p in dict.fromkeys(paths)]
        existing = set(cur.execute(
            "SELECT context, path FROM kb_memberships WHERE path IN (SELECT unnest(?))",
            [list(paths)]).fetchall())
        new = [pair for pair in pairs if pair not in existing]
        if new:
            self._bump_generation(cur)
            self._insert(cur, "kb_memberships", {"context": [c for c, _ in new],
                                                 "path": [p for _, p in new]})
        self._kb_touch(cur, contexts)
        return len(new)

    def kb_unlink(self, paths: Sequence[str], contexts: Sequence[str] | None
                  ) -> tuple[int, list[str]]:
        with self._transaction() as cur:
            return self._kb_unlink(cur, paths, contexts)

    def _kb_unlink(self, cur: duckdb.DuckDBPyConnection, paths: Sequence[str],
                   contexts: Sequence[str] | None) -> tuple[int, list[str]]:
        if not paths:
            return 0, []
        where = "path IN (SELECT unnest(?))"
        params: list[Any] = [list(paths)]
        if contexts is not None:
            where += " AND context IN (SELECT unnest(?))"
            params.append(list(contexts))
        removed = first_row(cur.execute(f"SELECT count(*) FROM kb_memberships WHERE {where}",
                                     params))[0]
        cur.execute(f"DELETE FROM kb_memberships WHERE {where}", params)
        orphans = [r[0] for r in cur.execute(
            """SELECT path FROM kb_documents WHERE path IN (SELECT unnest(?))
               AND path NOT IN (SELECT path FROM kb_memberships) ORDER BY path""",
            [list(paths)]).fetchall()]
        if orphans:
            cur.execute("DELETE FROM kb_documents WHERE path IN (SELECT unnest(?))", [orphans])
            self.delete_files(orphans)
        if removed and not orphans:
            self._bump_generation(cur)
        self._kb_touch(cur, contexts)
        return removed, orphans

    @staticmethod
    def _kb_touch(cur: duckdb.DuckDBPyConnection, contexts: Sequence[str] | None) -> None:
        if contexts:
            cur.execute("UPDATE kb_contexts SET updated_at = now() "
                        "WHERE name IN (SELECT unnest(?))", [list(contexts)])

    def kb_document_map(self) -> dict[str, KnowledgeDocument]:
        rows = self._cursor().execute(
            """SELECT d.path, d.source, d.format, d.page_starts,
                      list(m.context ORDER BY m.context) FILTER (m.context IS NOT NULL),
                      d.metadata
               FROM kb_documents d LEFT JOIN kb_memberships m ON m.path = d.path
               GROUP BY ALL""").fetchall()
        return {path: KnowledgeDocument(path, source, fmt, tuple(pages or ()),
                                        tuple(contexts or ()),
                                        json.loads(meta) if meta else {})
                for path, source, fmt, pages, contexts, meta in rows}
