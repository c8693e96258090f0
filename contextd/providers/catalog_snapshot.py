"""The chunk catalog saved beside the index, so that the next process starts from it.

A command run after the background owner's idle exit loaded the catalog of a 60k-chunk project
from the store: ~1.1 s of its ~3.5 s (60k rows with their texts read, the texts written to
the spool, the symbol postings built). So a catalog closing writes what it holds (a
:mod:`~contextd.providers.saved_pair` named ``catalog``): its live texts, and as arrays its
entries, the files they came from with their content hashes, its definitions and references.
The next process copies the texts into its own spool and rebuilds the rest from the arrays,
then takes in the files written since (the store's ``changes_since``), like any sync. A
snapshot whose files the store no longer holds as saved (another database at that place) is
refused by the catalog, which then loads from the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Sequence

import numpy as np

from contextd.providers.saved_pair import joined, load_pair, save_pair, split

NAME = "catalog"
FORMAT = 1


def _coded(values: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """(codes, vocabulary) of few distinct values (kinds, languages)."""
    vocabulary = sorted(set(values))
    code = {value: i for i, value in enumerate(vocabulary)}
    return np.asarray([code[v] for v in values], dtype=np.uint16), vocabulary


@dataclass
class Snapshot:
    """What a saved catalog holds, as read back: columns of its entries (``at`` relative to
    the texts' start), its files, its definitions and its references."""

    generation: int
    waiting: list[int]  # files written but not taken in when it was saved: read again
    entries: dict[str, Any]
    files: dict[int, tuple[str, str]]  # file_id → (path, content hash)
    symbols: list[tuple[int, str, str, str, int]]  # file_id, chunk_id, name, kind, line
    links: list[tuple[int, str, str]]  # file_id, chunk_id, target
    texts: Path
    texts_size: int


def save(folder: Path, generation: int, waiting: Sequence[int], entries: Sequence[Any],
         blob_of: Callable[[Any], bytes], files: dict[int, tuple[str, str]],
         symbols: Sequence[tuple[int, str, str, str, int]],
         links: Sequence[tuple[int, str, str]]) -> None:
    """Write a snapshot of a catalog at ``generation``: its ``entries`` (ChunkEntry; packed
    texts by ``blob_of(entry)``), ``files`` (file_id → path, content hash), definitions and
    references."""
    offsets = np.zeros(len(entries), dtype=np.int64)

    def write_texts(out: BinaryIO) -> int:
        at = 0
        for i, entry in enumerate(entries):
            blob = blob_of(entry)
            out.write(blob)
            offsets[i] = at
            at += len(blob)
        return at

    kinds, kind_names = _coded([e.kind for e in entries])
    languages, language_names = _coded([e.language for e in entries])
    symbol_kinds, symbol_kind_names = _coded([s[3] for s in symbols])
    file_ids = sorted(files)
    meta = {"format": FORMAT, "generation": generation, "waiting": list(waiting),
            "entries": len(entries), "files": len(file_ids), "symbols": len(symbols),
            "links": len(links), "kinds": kind_names, "languages": language_names,
            "symbol_kinds": symbol_kind_names}
    arrays = {
        "chunk_ids": joined(e.chunk_id for e in entries),
        "embed_hashes": joined(e.embed_hash for e in entries),
        "entry_ints": np.asarray([(e.file_id, e.ordinal, e.start_line, e.end_line, e.tokens,
                                   e.size) for e in entries], dtype=np.int64).reshape(-1, 6),
        "at": offsets, "kinds": kinds, "languages": languages,
        "file_ids": np.asarray(file_ids, dtype=np.int64),
        "file_paths": joined(files[f][0] for f in file_ids),
        "file_hashes": joined(files[f][1] for f in file_ids),
        "symbol_ints": np.asarray([(s[0], s[4]) for s in symbols],
                                  dtype=np.int64).reshape(-1, 2),
        "symbol_chunks": joined(s[1] for s in symbols),
        "symbol_names": joined(s[2] for s in symbols),
        "symbol_kinds": symbol_kinds,
        "link_files": np.asarray([link[0] for link in links], dtype=np.int64),
        "link_chunks": joined(link[1] for link in links),
        "link_targets": joined(link[2] for link in links),
    }
    # The offsets are filled while the texts are written, before the arrays are.
    save_pair(folder, NAME, meta, arrays, write_texts)


def load(folder: Path) -> Snapshot | None:
    """The snapshot saved in ``folder`` (None: none); ValueError, KeyError or OSError when
    it cannot be read or its two files are not one save's."""
    pair = load_pair(folder, NAME)
    if pair is None:
        return None
    meta, arrays, texts = pair
    if meta.get("format") != FORMAT:
        raise ValueError(f"format {meta.get('format')}, not {FORMAT}")
    count = meta["entries"]
    kinds, languages = meta["kinds"], meta["languages"]
    entries = {
        "chunk_ids": split(arrays["chunk_ids"], count),
        "embed_hashes": split(arrays["embed_hashes"], count),
        "ints": arrays["entry_ints"].tolist(),
        "at": arrays["at"].tolist(),
        "kinds": [kinds[c] for c in arrays["kinds"].tolist()],
        "languages": [languages[c] for c in arrays["languages"].tolist()],
    }
    file_ids = arrays["file_ids"].tolist()
    files = dict(zip(file_ids, zip(split(arrays["file_paths"], len(file_ids)),
                                   split(arrays["file_hashes"], len(file_ids)))))
    symbol_kinds = meta["symbol_kinds"]
    symbols = [(fid, cid, name, symbol_kinds[kind], line)
               for (fid, line), cid, name, kind in zip(
                   arrays["symbol_ints"].tolist(), split(arrays["symbol_chunks"], meta["symbols"]),
                   split(arrays["symbol_names"], meta["symbols"]),
                   arrays["symbol_kinds"].tolist())]
    links = list(zip(arrays["link_files"].tolist(), split(arrays["link_chunks"], meta["links"]),
                     split(arrays["link_targets"], meta["links"])))
    return Snapshot(meta["generation"], meta["waiting"], entries, files, symbols, links, texts,
                    meta["bytes"])
