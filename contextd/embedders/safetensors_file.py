"""Read a ``.safetensors`` weight file into numpy arrays, with numpy alone.

The format is a little-endian u64 header length, a JSON header (name -> dtype, shape, byte
offsets) and the raw tensors. Parsing it here keeps the default install free of torch (and of
the ``safetensors`` package, whose numpy loader is the same twenty lines): the ONNX graph of the
embedding model is built from these arrays (:mod:`contextd.embedders.bert_graph`).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from contextd.errors import ModelUnavailableError

# safetensors dtype -> numpy dtype read from the file (BF16 is widened to float32 below).
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8",
           "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
# A header larger than this is not a safetensors file (the format's own limit is 100 MB).
_MAX_HEADER = 100_000_000


def _header(path: Path, head: bytes, size: int) -> tuple[dict, int]:
    """The JSON header of a safetensors file whose first bytes are ``head`` (the length and
    the header at least) and the offset of its tensors; ModelUnavailableError if it is not
    one."""
    if len(head) < 8:
        raise ModelUnavailableError(f"{path} is not a safetensors file (too short)")
    (length,) = struct.unpack("<Q", head[:8])
    if length > min(_MAX_HEADER, size - 8, len(head) - 8):
        raise ModelUnavailableError(f"{path} is not a safetensors file (bad header length)")
    try:
        return json.loads(head[8:8 + length]), 8 + length
    except ValueError as exc:
        raise ModelUnavailableError(f"{path} is not a safetensors file ({exc})") from None


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of ``path`` as a numpy array (float32 for BF16); raises
    ModelUnavailableError naming the file when it is truncated or not safetensors."""
    data = path.read_bytes()
    header, offset = _header(path, data, len(data))
    body = memoryview(data)[offset:]
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        begin, end = spec["data_offsets"]
        if spec["dtype"] not in _DTYPES or end > len(body):
            raise ModelUnavailableError(
                f"{path}: tensor {name!r} has dtype {spec['dtype']} or lies past the file's end")
        array = np.frombuffer(body[begin:end], dtype=_DTYPES[spec["dtype"]])
        if spec["dtype"] == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.reshape(spec["shape"])
    return tensors


def mapped_float32(path: Path, names: tuple[str, ...]) -> np.ndarray | None:
    """The first of ``names`` that ``path`` holds as float32, memory-mapped read-only (its
    pages are the page cache's, read as they are touched, not a copy on the heap); None
    when it holds none of them as float32."""
    with open(path, "rb") as file:
        head = file.read(8)
        if len(head) == 8:
            head += file.read(min(struct.unpack("<Q", head)[0], _MAX_HEADER))
    size = path.stat().st_size
    header, offset = _header(path, head, size)
    for name in names:
        spec = header.get(name)
        if spec is not None and spec.get("dtype") == "F32":
            begin, end = spec["data_offsets"]
            if offset + end > size or end - begin != 4 * int(np.prod(spec["shape"])):
                raise ModelUnavailableError(f"{path}: tensor {name!r} lies past the file's end")
            return np.memmap(path, dtype="<f4", mode="r", offset=offset + begin,
                             shape=tuple(spec["shape"]))
    return None
