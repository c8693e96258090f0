"""SQL helpers every area of the DuckDB store shares."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa



CHUNK_ROW_SQL = """
    SELECT c.chunk_id, c.file_id, f.path, c.ordinal, c.kind, coalesce(c.label, ''),
           coalesce(c.language, ''), c.start_line, c.end_line, c.tokens_est, c.text,
           coalesce(c.index_text, c.text), c.embed_hash, coalesce(c.parent, '')
    FROM chunks c JOIN file_state f USING (file_id)
"""


def iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def list_array(vectors: np.ndarray) -> pa.ListArray:
    """Rows of a matrix as an Arrow list column, without a Python list per row."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    flat = pa.array(vectors.ravel())
    return pa.ListArray.from_arrays(
        pa.array(np.arange(0, vectors.size + 1, vectors.shape[1], dtype=np.int32)), flat)


def first_row(result: duckdb.DuckDBPyConnection) -> tuple | None:
    """The first row of a result, read to its end. DuckDB keeps a half-read result (and its
    transaction) open on the cursor: it makes CHECKPOINT wait for ever and the cursor refuse
    other work."""
    rows = result.fetchall()
    return rows[0] if rows else None
