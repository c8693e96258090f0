"""The chunk catalog keeps chunk texts out of the process's memory (issue 26: the owner's
peak RSS at 60k chunks) and still hands every provider the stored text.

The catalog writes the texts to a spool file beside the index and keeps only where they lie;
these tests check that through what the catalog holds (the Python memory a full load leaves
allocated does not grow with the texts' length) and through what it returns (the store's
rows, texts included, after files are re-written often enough to compact the spool).
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from golden import open_indexed
from contextd.indexer import Indexer
from contextd.providers import catalog as catalog_module
from contextd.providers.catalog import ChunkCatalog
from contextd.providers.spool import spool_folder

FILES = 100
FUNCTIONS_PER_FILE = 12


def _function(file: int, number: int, version: int, words: int = 8) -> str:
    """A small function whose docstring holds ``words`` words (its text's length) and whose
    body calls one function (one reference)."""
    doc = " ".join(f"ledger{version}" for _ in range(words))
    return (f"def handler_{file}_{number}(value):\n    \"\"\"{doc}\"\"\"\n"
            f"    return compute_{file}(value, {version})\n\n\n")


def _write(root: Path, file: int, version: int, words: int = 8) -> None:
    (root / f"module_{file:03d}.py").write_text(
        "".join(_function(file, n, version, words) for n in range(FUNCTIONS_PER_FILE)))


def _indexed(root: Path, words: int):
    root.mkdir()
    (root / "context.toml").write_text('[contextualizer]\nstrategy = "none"\n')
    for file in range(FILES):
        _write(root, file, 0, words)
    return open_indexed(root)


@pytest.fixture
def project(tmp_path):
    project, store = _indexed(tmp_path / "p", 8)
    yield project, store
    store.close()


def _catalog_memory(project, store) -> tuple[int, int, int]:
    """(chunks, bytes of their texts, Python memory a full catalog load leaves allocated)."""
    rows = store.chunks_for_files(None)
    chunks, text_bytes = len(rows), sum(len(r.text) for r in rows)
    del rows
    catalog = ChunkCatalog(store, spool_folder(project))
    tracemalloc.start()
    try:
        catalog.sync()
        held, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    some = list(catalog.rows)[:5]
    assert catalog.rows_by_id(some) == store.chunks_by_id(some)
    return chunks, text_bytes, held


@pytest.mark.slow
def test_the_catalog_does_not_grow_with_the_length_of_the_texts(tmp_path):
    """Two projects alike in every way (files, chunks, symbols, references) but the length
    of their docstrings: the catalog of the one with 10 times more text holds about the
    same memory. Holding the texts (twice: text and index text, as before issue 26) it held
    more than twice the difference in text."""
    figures = []
    for name, words in (("short", 4), ("long", 60)):
        project, store = _indexed(tmp_path / name, words)
        try:
            figures.append(_catalog_memory(project, store))
        finally:
            store.close()
    (short_chunks, short_text, short_held), (long_chunks, long_text, long_held) = figures
    assert short_chunks == long_chunks >= FILES * FUNCTIONS_PER_FILE
    assert long_text - short_text > 400_000
    # tracemalloc counts every thread's allocations: in a full run, threads left by earlier
    # tests (warm-ups, watchers) add tens of KB either way. Holding the texts costs more
    # than the extra text itself (+720 KB for +537 KB before the spool).
    assert long_held - short_held < 0.25 * (long_text - short_text), figures


def test_texts_stay_right_across_rewrites_and_spool_compactions(project, monkeypatch):
    project, store = project
    monkeypatch.setattr(catalog_module, "SPOOL_COMPACT_MIN_DEAD", 0)
    catalog = ChunkCatalog(store, spool_folder(project))
    catalog.sync()
    root = Path(project.root)
    for version in (1, 2, 3):
        for file in range(0, FILES, 3):
            _write(root, file, version)
        Indexer(project, store, embed=False).ensure_indexed()
        catalog.sync()
        # Dead texts never outweigh the live ones for long: the spool is rewritten.
        live = sum(entry.size for entry in catalog.rows.values())
        assert catalog.spool.size <= 2 * live
    stored = {r.chunk_id: r for r in store.chunks_for_files(None)}
    assert set(catalog.rows) == set(stored)
    assert catalog.rows_by_id(list(stored)) == stored
    assert list(catalog.iter_chunks()) == list(stored.values())
    rewritten = catalog.paths["module_003.py"]
    assert all(", 3)" in r.text for r in catalog.chunks_for_files([rewritten]))


def test_symbol_and_reference_lookups_follow_rewrites_and_removals_as_the_store(tmp_path):
    """The catalog's definitions and references (one entry per name or target, keys computed
    again when a file is dropped, issue 37's memory) answer as the store does after files
    are re-written, a name moves between files, and a file is removed."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "context.toml").write_text('[contextualizer]\nstrategy = "none"\n')
    for file in range(4):
        _write(root, file, 0)
    (root / "shared.py").write_text("def handler_0_0(value):\n    return compute_1(value)\n")
    project, store = open_indexed(root)
    try:
        catalog = ChunkCatalog(store, spool_folder(project))
        names = ["handler_0_0", "handler_1_3", "handler_3_11", "compute_1", "compute_2"]

        def same_as_the_store() -> None:
            catalog.sync()
            assert catalog.find_symbols(names, ["handler_2", "hand"]) == \
                store.find_symbols(names, ["handler_2", "hand"])
            assert catalog.find_references(names) == store.find_references(names)

        same_as_the_store()
        _write(root, 1, 1)  # re-written: its references and definitions are read again
        (root / "shared.py").write_text("def handler_1_3(value):\n    return compute_2(1)\n")
        Indexer(project, store, embed=False).ensure_indexed()
        same_as_the_store()
        (root / "module_002.py").unlink()
        Indexer(project, store, embed=False).ensure_indexed()
        same_as_the_store()
        assert not catalog.find_symbols(["handler_2_0"])
    finally:
        store.close()
