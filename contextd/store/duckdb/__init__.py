"""The embedded DuckDB store, composed of one mixin per area as the PostgreSQL store is.

* :mod:`.store` — :class:`DuckDBStore`: opening, schema migrations, connections and
  transactions, the generation counter, stats, snapshots and close;
* :mod:`.contents` — files, chunks, symbols and links; :mod:`.vectors` — embeddings;
* :mod:`.knowledge`, :mod:`.stash`, :mod:`.sessions`, :mod:`.skips`, :mod:`.usage`,
  :mod:`.operations` — one area each;
* :mod:`.sql` — the helpers they share.
"""

from contextd.store.duckdb.store import DuckDBStore

__all__ = ["DuckDBStore"]
