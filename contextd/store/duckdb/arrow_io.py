"""Ids and vectors in and out of DuckDB through the Arrow C data interface, with nanoarrow.

The store moves vectors in bulk in one shape: a text column (text hashes, chunk or segment
ids) beside a ``FLOAT[]`` column. DuckDB's numpy paths cost one Python object per row there:
``fetchnumpy`` makes a numpy array per row (an extra full copy of the vectors and ~2x the
time), a registered object array of rows is converted value by value (~15 ms a window of
1,024 rows). The Arrow C data interface is DuckDB's zero-copy path; nanoarrow (Apache
Arrow's own small C library, ~3 MB installed, where pyarrow is 174 MB) builds and reads its
structs, so no hand-written C structs or release callbacks live here:

* reads: a relation's Arrow C stream is read batch by batch (131,072 rows a batch), its ids
  decoded by nanoarrow, its floats copied once out of the batch (a view would outlive it:
  the batch's memory is DuckDB's and goes when the stream is released).
* writes: :func:`vector_table` wraps the numpy buffers as a struct of a UTF-8 and a
  list-of-float32 column that DuckDB scans (``register``).
"""

from __future__ import annotations

from typing import Any, Sequence

import nanoarrow as na
import numpy as np

_VECTOR_COLUMN = na.list_(na.float32())


def vector_table(names: tuple[str, str], texts: Sequence[str], vectors: np.ndarray) -> Any:
    """Two columns, ``names[0]`` (text) and ``names[1]`` (``FLOAT[]``), that DuckDB scans
    through the Arrow PyCapsule interface: ``cur.register(name, table)`` then SQL over
    ``name``. The array holds references to its buffers until it is dropped."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise ValueError(f"{len(texts)} texts and vectors of shape {vectors.shape}")
    rows, dims = vectors.shape
    offsets = np.arange(rows + 1, dtype=np.int32) * dims
    column = na.c_array_from_buffers(_VECTOR_COLUMN, rows, [None, na.c_buffer(offsets)],
                                     children=[na.c_array(vectors.ravel(), na.float32())])
    schema = na.struct({names[0]: na.string(), names[1]: _VECTOR_COLUMN})
    return na.c_array_from_buffers(schema, rows, [None],
                                   children=[na.c_array(texts, na.string()), column])


def _batch_vectors(view: Any) -> np.ndarray:
    """The (rows, dims) float32 rows of one batch's list-of-float32 column view, copied out
    of the batch."""
    rows = view.length
    width = np.int64 if view.buffer(1).data_type == "int64" else np.int32
    offsets = np.frombuffer(view.buffer(1), dtype=width)[view.offset:view.offset + rows + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    dims = (end - start) // rows if rows else 0
    if rows and (dims * rows != end - start or not np.all(np.diff(offsets) == dims)):
        raise ValueError("vectors of different lengths in one result")
    floats = view.child(0)
    flat = np.frombuffer(floats.buffer(1), dtype=np.float32)
    first = floats.offset + start
    return flat[first:first + rows * dims].reshape(rows, dims).copy()


def ids_and_vectors(relation: Any) -> tuple[list[str], np.ndarray]:
    """(ids, float32 matrix) of a relation of two columns, a text id and a ``FLOAT[]``
    vector, in the relation's row order; ``([], (0, 0) matrix)`` for no rows."""
    ids: list[str] = []
    parts: list[np.ndarray] = []
    with na.c_array_stream(relation) as stream:
        columns = list(stream.get_schema().children)
        formats = [child.format for child in columns]
        if len(formats) == 2 and formats[1] in ("+l", "+L"):
            formats.append(columns[1].child(0).format)
        if formats[:1] not in (["u"], ["U"]) or formats[1:] not in (["+l", "f"], ["+L", "f"]):
            raise ValueError(f"expected (text, FLOAT[]) columns, got Arrow formats {formats}")
        for batch in stream:
            if batch.length == 0:
                continue
            view = batch.view()
            id_view, vector_view = view.child(0), view.child(1)
            if id_view.null_count or vector_view.null_count or vector_view.child(0).null_count:
                raise ValueError("NULL id or vector in a vector read")
            ids.extend(na.Array(batch.child(0)).to_pylist())
            parts.append(_batch_vectors(vector_view))
    if not parts:
        return [], np.zeros((0, 0), dtype=np.float32)
    return ids, parts[0] if len(parts) == 1 else np.concatenate(parts)
