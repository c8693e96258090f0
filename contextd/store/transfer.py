"""Copy an index between backends (DuckDB ⇄ PostgreSQL) without re-embedding: the rows of
:data:`~contextd.store.rows.TRANSFER_COLUMNS`, vectors and LLM prefixes included."""

from __future__ import annotations

from contextd.store.base import IndexStore
from contextd.store.rows import TRANSFER_COLUMNS


def copy_index(source: IndexStore, target: IndexStore) -> dict[str, int]:
    """Replace ``target``'s index with ``source``'s, in one transaction of the target;
    returns the rows copied per table."""
    tables = {table: source.export_rows(table) for table in TRANSFER_COLUMNS}
    target.import_rows(tables)
    return {table: len(rows) for table, rows in tables.items()}
