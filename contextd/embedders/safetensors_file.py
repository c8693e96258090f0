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


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of ``path`` as a numpy array (float32 for BF16); raises
    ModelUnavailableError naming the file when it is truncated or not safetensors."""
    data = path.read_bytes()
    if len(data) < 8:
        raise ModelUnavailableError(f"{path} is not a safetensors file (too short)")
    (length,) = struct.unpack("<Q", data[:8])
    if length > min(_MAX_HEADER, len(data) - 8):
        raise ModelUnavailableError(f"{path} is not a safetensors file (bad header length)")
    try:
        header = json.loads(data[8:8 + length])
    except ValueError as exc:
        raise ModelUnavailableError(f"{path} is not a safetensors file ({exc})") from None
    body = memoryview(data)[8 + length:]
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
