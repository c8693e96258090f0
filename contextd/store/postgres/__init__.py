"""The PostgreSQL + pgvector store: many projects (workspaces) in one shared database.

Layout, one job per module:

- :mod:`.connection` — redacted URLs, one-line errors, the pool, versioned migrations
  (``migrations/NNN_*.sql``, numbered on their own, apart from DuckDB's);
- :mod:`.workspace` — the workspace id of a project, advisory-lock keys;
- :mod:`.session` — per-thread transactions and the cross-process generation counter;
- :mod:`.contents`, :mod:`.vectors`, :mod:`.operations`, :mod:`.knowledge`, :mod:`.stash`,
  :mod:`.sessions`, :mod:`.skips`, :mod:`.usage` — the SQL of each area of
  :class:`~contextd.store.base.IndexStore`, as mixins over the session;
- :mod:`.store` — :class:`PostgresStore`, their composition;
- :mod:`.admin` — listing and dropping workspaces.

To add an area: a migration with its tables (each with ``workspace_id`` first in its key), a
mixin module whose methods filter by ``self.workspace`` and write inside
``self._transaction()``, the mixin added to :class:`PostgresStore`'s bases, its tables to
``store.WORKSPACE_TABLES``, and to ``rows.TRANSFER_COLUMNS`` if ``contextd store copy``
should carry them.
"""

from contextd.store.postgres.store import PostgresStore, open_postgres

__all__ = ["PostgresStore", "open_postgres"]
