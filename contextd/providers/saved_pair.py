"""A pair of files beside the index that the next process starts from: arrays and bytes.

The in-memory indexes of a large project take a second or more to build from the store (the
catalog's 60k entries with their texts, 60k vectors); a process closing writes them beside
the index and the next one reads them back in a fraction of that. Each is a pair:
``NAME.npz`` (numpy arrays and a JSON ``meta``) and ``NAME.spool`` (bytes the arrays point
into: texts, float32 rows). Both are written to scratch names and renamed, the bytes first;
the arrays name a random token the bytes' file starts with, so a crash between the two
renames leaves a pair that is refused, never one that mixes two saves. Nothing is written
where the index is sealed at rest (its texts and vectors would reach the disk in the clear)
or has no local folder.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable

import numpy as np

_TOKEN_BYTES = 16
_COPY_BLOCK = 8 << 20


def snapshot_folder(project: Any) -> Path | None:
    """Where a project's pairs are kept: beside its index, or nowhere when the index is
    sealed at rest or has no local folder."""
    if project is None or project.config.security.encrypt_db:
        return None
    folder = Path(project.db_path).parent
    return folder if folder.is_dir() else None


def joined(values: Iterable[str]) -> np.ndarray:
    """Strings as one array of UTF-8 bytes, NUL-separated (none of them holds a NUL)."""
    return np.frombuffer("\0".join(values).encode(), dtype=np.uint8)


def split(array: np.ndarray, count: int) -> list[str]:
    """The ``count`` strings of a :func:`joined` array (ValueError if there are not)."""
    values = array.tobytes().decode().split("\0") if count else []
    if len(values) != count:
        raise ValueError(f"{len(values)} strings where {count} were saved")
    return values


def save_pair(folder: Path, name: str, meta: dict[str, Any], arrays: dict[str, np.ndarray],
              write_bytes: Callable[[BinaryIO], int]) -> None:
    """Write ``NAME.spool`` (what ``write_bytes(out)`` writes; it returns how many bytes) and
    ``NAME.npz`` (``arrays`` and ``meta``), as one save."""
    token = secrets.token_bytes(_TOKEN_BYTES)
    scratch = f".{os.getpid()}.part"
    bytes_part = folder / f"{name}.spool{scratch}"
    arrays_part = folder / f"{name}.npz{scratch}"
    try:
        with open(bytes_part, "wb") as out:
            out.write(token)
            size = write_bytes(out)
        meta = {**meta, "token": token.hex(), "bytes": size}
        with open(arrays_part, "wb") as out:
            np.savez(out, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
                     **arrays)
        os.replace(bytes_part, folder / f"{name}.spool")
        os.replace(arrays_part, folder / f"{name}.npz")
    finally:
        for part in (bytes_part, arrays_part):
            part.unlink(missing_ok=True)


def load_pair(folder: Path, name: str
              ) -> tuple[dict[str, Any], dict[str, np.ndarray], Path] | None:
    """(meta, arrays, the bytes' file) of a saved pair; None when there is none; ValueError
    or OSError when it cannot be read or its two files are not one save's."""
    try:
        with np.load(folder / f"{name}.npz", allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except FileNotFoundError:
        return None
    meta = json.loads(arrays.pop("meta").tobytes().decode())
    path = folder / f"{name}.spool"
    with open(path, "rb") as source:
        if source.read(_TOKEN_BYTES).hex() != meta["token"]:
            raise ValueError(f"{path} is not the one {name}.npz was saved with")
    if path.stat().st_size != _TOKEN_BYTES + meta["bytes"]:
        raise ValueError(f"{path} is cut short")
    return meta, arrays, path


def copy_bytes(path: Path, size: int, append: Callable[[bytes], Any]) -> None:
    """Hand the saved bytes to ``append(block)`` (the new process's own spool), in blocks."""
    with open(path, "rb") as source:
        source.seek(_TOKEN_BYTES)
        left = size
        while left:
            block = source.read(min(_COPY_BLOCK, left))
            if not block:
                raise ValueError(f"{path} ended early")
            append(block)
            left -= len(block)
