"""SQL helpers every area of the DuckDB store shares."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb
import numpy as np


CHUNK_ROW_SQL = """
    SELECT c.chunk_id, c.file_id, f.path, c.ordinal, c.kind, coalesce(c.label, ''),
           coalesce(c.language, ''), c.start_line, c.end_line, c.tokens_est, c.text,
           coalesce(c.index_text, c.text), c.embed_hash, coalesce(c.parent, '')
    FROM chunks c JOIN file_state f USING (file_id)
"""


def iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def vector_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows of a matrix as a column DuckDB's numpy scan reads as FLOAT[]: an object array of
    float32 views of the rows. DuckDB converts it value by value (~20 µs a 384-float row):
    fine for a store copy's one-off insert, while the embedding writes go through
    :func:`contextd.store.duckdb.arrow_io.vector_table`."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return np.fromiter(vectors, dtype=object, count=len(vectors))


def numpy_columns(columns: dict[str, Any]) -> dict[str, np.ndarray]:
    """Columns as DuckDB's numpy scan takes them: a 1-D array as it is, a matrix as its
    rows (:func:`vector_rows`), a list as an object array. DuckDB infers an object column's
    type from all its values (str, int, float, bool, datetime, list; None is NULL; a column
    of None or of empty lists only is typed NULL) and the INSERT casts it to the table's."""
    out = {}
    for name, values in columns.items():
        if isinstance(values, np.ndarray):
            out[name] = vector_rows(values) if values.ndim == 2 else values
        else:
            out[name] = np.fromiter(values, dtype=object, count=len(values))
    return out


def insert_columns(cur: duckdb.DuckDBPyConnection, table: str, columns: dict[str, Any]) -> None:
    """Insert rows given column by column (lists, or numpy arrays) in one statement: DuckDB
    scans the registered numpy arrays (~38k chunks/s with their symbols and links, measured by
    benchmarks/bench_store_io.py, where executemany manages ~580 rows/s)."""
    name = f"_incoming_{table}"
    cur.register(name, numpy_columns(columns))
    try:
        cols = ", ".join(columns)
        cur.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {name}")
    finally:
        cur.unregister(name)


def first_row(result: duckdb.DuckDBPyConnection) -> tuple | None:
    """The first row of a result, read to its end. DuckDB keeps a half-read result (and its
    transaction) open on the cursor: it makes CHECKPOINT wait for ever and the cursor refuse
    other work."""
    rows = result.fetchall()
    return rows[0] if rows else None
