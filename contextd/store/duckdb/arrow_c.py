"""Ids and vectors in and out of DuckDB through the Arrow C data interface, without pyarrow.

The store moves vectors in bulk in one shape: a text column (text hashes, chunk or segment
ids) beside a ``FLOAT[]`` column. DuckDB's numpy paths cost one Python object per row, or
per value, there: ``fetchnumpy`` makes a numpy array per row (an extra full copy of the
vectors, ~1.5x the time), and a registered object array of rows is converted value by value
(a 1,024 x 384 window: ~15 ms, against ~2 ms here). The Arrow C data interface is DuckDB's
zero-copy path, and its structs are a stable C ABI that ctypes describes in a few lines:

* reads: a relation's ``__arrow_c_stream__()`` (a PyCapsule holding an ``ArrowArrayStream``)
  is read batch by batch, ids decoded from the UTF-8 buffer; the matrix is a numpy view of
  DuckDB's float buffer, which it keeps alive (a batch is 131,072 rows: at 60k chunks no
  copy at all; several batches are joined with one copy).
* writes: :class:`VectorTable` hands DuckDB's scan (``register``) a struct of a large-UTF-8
  and a large-list-of-float32 column whose buffers are the numpy arrays themselves
  (``__arrow_c_array__``, the Arrow PyCapsule interface): no copy before DuckDB's own.

The structs a write hands out, and every buffer they point to, belong to the
:class:`VectorTable`, which the caller keeps registered until the statement reading it is
done; their ``release`` callback only marks the struct it is given as released.
"""

from __future__ import annotations

import ctypes
from typing import Any, Iterator, Sequence

import duckdb
import numpy as np


class ArrowSchema(ctypes.Structure):
    pass


ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_char_p),
    ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowSchema))),
    ("dictionary", ctypes.POINTER(ArrowSchema)),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))),
    ("private_data", ctypes.c_void_p)]


class ArrowArray(ctypes.Structure):
    pass


ArrowArray._fields_ = [
    ("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.POINTER(ArrowArray)),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))),
    ("private_data", ctypes.c_void_p)]


class ArrowArrayStream(ctypes.Structure):
    pass


ArrowArrayStream._fields_ = [
    ("get_schema", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ArrowArrayStream),
                                    ctypes.POINTER(ArrowSchema))),
    ("get_next", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ArrowArrayStream),
                                  ctypes.POINTER(ArrowArray))),
    ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.POINTER(ArrowArrayStream))),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArrayStream))),
    ("private_data", ctypes.c_void_p)]

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# A capsule keeps the pointer to its name: these bytes live as long as the module.
_SCHEMA_CAPSULE, _ARRAY_CAPSULE = b"arrow_schema", b"arrow_array"

# Offsets width by format: utf8 / large utf8, list / large list (Arrow C data interface).
_STRINGS = {b"u": ctypes.c_int32, b"U": ctypes.c_int64}
_LISTS = {b"+l": ctypes.c_int32, b"+L": ctypes.c_int64}


def _buffer(address: int | None, ctype: Any, count: int) -> np.ndarray:
    """``count`` values of ``ctype`` at ``address`` as a numpy view (valid while the batch
    that owns them is not released)."""
    if count == 0:
        return np.zeros(0, dtype=ctype)
    return np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctype)), (count,))


def _offsets(array: ArrowArray, width: Any) -> np.ndarray:
    """The ``length + 1`` offsets of a string or list array (its second buffer)."""
    return _buffer(array.buffers[1], width, array.offset + array.length + 1)[array.offset:]


def _strings(array: ArrowArray, width: Any) -> list[str]:
    offsets = _offsets(array, width)
    start, end = int(offsets[0]), int(offsets[-1])
    data = ctypes.string_at(array.buffers[2] + start, end - start) if end > start else b""
    bounds = (offsets - start).tolist()
    text = data.decode("utf-8")
    if len(text) == len(data):  # ASCII (ids are hex): byte offsets are character offsets
        return [text[a:b] for a, b in zip(bounds, bounds[1:])]
    return [data[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:])]


def _vectors(batch: _Batch, array: ArrowArray, width: Any) -> np.ndarray:
    """The rows of a list-of-float32 array as a read-only (length, dims) view of the batch's
    floats, which it keeps alive."""
    offsets = _offsets(array, width)
    child = array.children[0].contents
    n = array.length
    start, end = int(offsets[0]), int(offsets[-1])
    dims = (end - start) // n if n else 0
    if n and (dims * n != end - start or not np.all(np.diff(offsets) == dims)):
        raise ValueError("vectors of different lengths in one result")
    if dims == 0:
        return np.zeros((n, 0), dtype=np.float32)
    address = child.buffers[1] + (child.offset + start) * ctypes.sizeof(ctypes.c_float)
    return np.asarray(_Floats(batch, address, (n, dims)))


def _has_nulls(array: ArrowArray) -> bool:
    """Whether an array holds a NULL (a null count of -1 is unknown: then a validity bitmap
    may say so)."""
    return array.null_count > 0 or (array.null_count < 0 and bool(array.buffers[0]))


class _Batch:
    """One batch DuckDB handed out, released when this object goes: a numpy array over its
    floats (:class:`_Floats`) keeps it alive through the array's base."""

    def __init__(self) -> None:
        self.array = ArrowArray()

    def __del__(self) -> None:
        if self.array.release:
            self.array.release(ctypes.byref(self.array))


class _Floats:
    """``numpy.asarray`` of this is a read-only (rows, dims) float32 view of a batch's
    floats, whose base keeps the batch."""

    def __init__(self, batch: _Batch, address: int, shape: tuple[int, int]):
        self.batch = batch
        self.__array_interface__ = {"version": 3, "shape": shape, "data": (address, True),
                                    "typestr": np.dtype(np.float32).str}


def _batches(capsule: object) -> Iterator[tuple[list[bytes], _Batch]]:
    """(column formats, batch) of every batch of the stream, each released once nothing
    refers to it; the stream is released when the last batch is read (or the consumer
    stops). Batches outlive the stream: the Arrow C stream interface makes them
    independent."""
    stream = ArrowArrayStream.from_address(_capsule_pointer(capsule, b"arrow_array_stream"))

    def check(status: int) -> None:
        if status:
            error = stream.get_last_error(ctypes.byref(stream))
            raise duckdb.Error((error or b"Arrow stream error").decode("utf-8", "replace"))

    try:
        schema = ArrowSchema()
        check(stream.get_schema(ctypes.byref(stream), ctypes.byref(schema)))
        try:
            formats = [schema.children[i].contents.format for i in range(schema.n_children)]
            if formats[1:2] and formats[1] in _LISTS:
                formats.append(schema.children[1].contents.children[0].contents.format)
        finally:
            schema.release(ctypes.byref(schema))
        while True:
            batch = _Batch()
            check(stream.get_next(ctypes.byref(stream), ctypes.byref(batch.array)))
            if not batch.array.release:  # the end of the stream
                return
            yield formats, batch
    finally:
        if stream.release:
            stream.release(ctypes.byref(stream))
            stream.release = type(stream.release)()  # released: the capsule must not again


def ids_and_vectors(relation: Any) -> tuple[list[str], np.ndarray]:
    """(ids, float32 matrix) of a relation of two columns, a text id and a ``FLOAT[]``
    vector, in the relation's row order; ``([], (0, 0) matrix)`` for no rows. The matrix is
    read-only: of one batch (up to 131,072 rows) it is a view of DuckDB's own buffer, no copy;
    of several, one copy joins them."""
    ids: list[str] = []
    parts: list[np.ndarray] = []
    batches = _batches(relation.__arrow_c_stream__())
    try:
        for formats, batch in batches:
            if len(formats) != 3 or formats[0] not in _STRINGS or formats[1] not in _LISTS \
                    or formats[2] != b"f":
                raise ValueError(f"expected (text, FLOAT[]) columns, got Arrow formats "
                                 f"{formats}")
            if batch.array.length == 0:
                continue
            id_array = batch.array.children[0].contents
            vector_array = batch.array.children[1].contents
            if any(_has_nulls(a) for a in (id_array, vector_array,
                                           vector_array.children[0].contents)):
                raise ValueError("NULL id or vector in a vector read")
            ids.extend(_strings(id_array, _STRINGS[formats[0]]))
            parts.append(_vectors(batch, vector_array, _LISTS[formats[1]]))
    finally:
        batches.close()  # the stream is released now, even when a check above failed
    if not parts:
        return [], np.zeros((0, 0), dtype=np.float32)
    if len(parts) == 1:
        return ids, parts[0]
    matrix = np.concatenate(parts)
    matrix.flags.writeable = False
    return ids, matrix


# ----- writes -------------------------------------------------------------------------------
_SchemaRelease = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))
_ArrayRelease = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))


@_SchemaRelease
def _release_schema(schema: Any) -> None:
    # Marks the struct released, nothing more: what it points to belongs to a VectorTable.
    schema.contents.release = _SchemaRelease()


@_ArrayRelease
def _release_array(array: Any) -> None:
    array.contents.release = _ArrayRelease()


def _address(array: np.ndarray) -> int:
    return array.ctypes.data


class VectorTable:
    """Two columns, ``text`` (large UTF-8) and ``vector`` (large list of float32), that
    DuckDB scans through the Arrow PyCapsule interface: ``cur.register(name, table)`` then
    SQL over ``name``. Keep it registered (and referenced) until that SQL is done."""

    def __init__(self, names: tuple[str, str], texts: Sequence[str], vectors: np.ndarray):
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(texts):
            raise ValueError(f"{len(texts)} texts and vectors of shape {vectors.shape}")
        encoded = [t.encode("utf-8") for t in texts]
        self.names = tuple(n.encode("utf-8") for n in names)
        self.length = len(encoded)
        self.text_offsets = np.zeros(self.length + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=self.text_offsets[1:])
        # One byte at least: a buffer's address must not be NULL.
        self.text_data = np.frombuffer(b"".join(encoded) or b"\0", dtype=np.uint8)
        self.vector_offsets = np.arange(self.length + 1, dtype=np.int64) * vectors.shape[1]
        self.vectors = vectors if vectors.size else np.zeros(1, dtype=np.float32)
        self._handed_out: list[Any] = []  # structs (and their pointer arrays) DuckDB holds

    def _keep(self, *objects: Any) -> None:
        self._handed_out.extend(objects)

    def _schema(self, fmt: bytes, name: bytes, children: Sequence[ArrowSchema] = ()
                ) -> ArrowSchema:
        pointers = (ctypes.POINTER(ArrowSchema) * len(children))(
            *(ctypes.pointer(c) for c in children))
        schema = ArrowSchema(format=fmt, name=name, metadata=None, flags=0,
                             n_children=len(children),
                             children=ctypes.cast(pointers,
                                                  ctypes.POINTER(ctypes.POINTER(ArrowSchema))),
                             release=_release_schema)
        self._keep(schema, pointers)
        return schema

    def _array(self, length: int, buffers: Sequence[int | None],
               children: Sequence[ArrowArray] = ()) -> ArrowArray:
        buffer_array = (ctypes.c_void_p * len(buffers))(*buffers)
        pointers = (ctypes.POINTER(ArrowArray) * len(children))(
            *(ctypes.pointer(c) for c in children))
        array = ArrowArray(length=length, null_count=0, offset=0, n_buffers=len(buffers),
                           n_children=len(children),
                           buffers=ctypes.cast(buffer_array, ctypes.POINTER(ctypes.c_void_p)),
                           children=ctypes.cast(pointers,
                                                ctypes.POINTER(ctypes.POINTER(ArrowArray))),
                           release=_release_array)
        self._keep(array, buffer_array, pointers)
        return array

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        """Fresh schema and array structs in capsules (DuckDB moves and releases them; it
        may ask more than once)."""
        text_name, vector_name = self.names
        schema = self._schema(b"+s", b"", [
            self._schema(b"U", text_name),
            self._schema(b"+L", vector_name, [self._schema(b"f", b"item")])])
        array = self._array(self.length, [None], [
            self._array(self.length, [None, _address(self.text_offsets),
                                      _address(self.text_data)]),
            self._array(self.length, [None, _address(self.vector_offsets)], [
                self._array(int(self.vector_offsets[-1]), [None, _address(self.vectors)])])])
        return (_capsule_new(ctypes.addressof(schema), _SCHEMA_CAPSULE, None),
                _capsule_new(ctypes.addressof(array), _ARRAY_CAPSULE, None))
