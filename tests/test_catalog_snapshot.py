"""The catalog saved at close and loaded by the next process (issue 26: a command after the
background owner's idle exit spent ~1.1 s of its ~3.5 s loading the catalog of a 60k-chunk
project from the store).

What the next process loads must be exactly what the store holds: files written, re-written
and removed after the save are taken in; a snapshot cut short, mixed with another save's
texts, or saved from another database is ignored. Real DuckDB store, real indexer, real files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from golden import open_indexed
from contextd.indexer import Indexer
from contextd.providers.catalog import ChunkCatalog
from contextd.providers.saved_pair import snapshot_folder
from contextd.providers.spool import spool_folder


def _write(root: Path, name: str, version: int) -> None:
    (root / name).write_text(
        f"class Ledger{name[0].upper()}:\n    \"\"\"Entries v{version}.\"\"\"\n\n"
        f"    def post_{version}(self, entry):\n        return record(entry, {version})\n\n\n"
        f"def settle(ledger):\n    return Ledger{name[0].upper()}().post_{version}(ledger)\n")


def _indexed(root: Path, delta_version: int = 0):
    root.mkdir(exist_ok=True)
    (root / "context.toml").write_text('[contextualizer]\nstrategy = "none"\n')
    for name in ("alpha.py", "beta.py", "gamma.py"):
        _write(root, name, 0)
    _write(root, "delta.py", delta_version)
    (root / "notes.md").write_text("# Ledger\n\nHow entries are posted and settled.\n")
    return open_indexed(root)


@pytest.fixture
def project(tmp_path):
    project, store = _indexed(tmp_path / "p")
    yield project, store
    store.close()


def _catalog(project, store) -> ChunkCatalog:
    return ChunkCatalog(store, spool_folder(project), snapshot_folder(project))


def _same_as_the_store(catalog: ChunkCatalog, store) -> None:
    fresh = ChunkCatalog(store, None)  # loaded from the store alone
    fresh.sync()
    catalog.sync()
    assert set(catalog.rows) == set(fresh.rows)
    assert catalog.rows == {cid: e for cid, e in catalog.rows.items()}  # entries intact
    ids = list(fresh.rows)
    assert catalog.rows_by_id(ids) == fresh.rows_by_id(ids) == store.chunks_by_id(ids)
    assert catalog.paths == fresh.paths
    for name in ("settle", "ledgera", "post_0", "post_1", "record"):
        assert catalog.find_symbols([name], [name[:4]]) == fresh.find_symbols([name], [name[:4]])
        assert catalog.find_references([name]) == fresh.find_references([name])


def test_the_next_process_starts_from_the_saved_catalog_and_takes_in_the_rest(project):
    project, store = project
    first = _catalog(project, store)
    first.sync()
    first.save()
    folder = snapshot_folder(project)
    assert (folder / "catalog.npz").exists() and (folder / "catalog.spool").exists()

    unchanged = _catalog(project, store)
    unchanged.sync()
    assert unchanged.loaded_from_snapshot
    _same_as_the_store(unchanged, store)

    root = Path(project.root)
    _write(root, "alpha.py", 1)  # re-written
    _write(root, "epsilon.py", 0)  # new
    (root / "beta.py").unlink()  # removed
    Indexer(project, store, embed=False).ensure_indexed()
    later = _catalog(project, store)
    later.sync()
    assert later.loaded_from_snapshot
    assert "beta.py" not in later.paths and "epsilon.py" in later.paths
    _same_as_the_store(later, store)
    assert any("post_1" in r.text for r in later.chunks_for_files([later.paths["alpha.py"]]))


@pytest.mark.parametrize("damage", ["texts of another save", "texts cut short", "no texts"])
def test_a_damaged_snapshot_is_ignored(project, damage):
    project, store = project
    folder = snapshot_folder(project)
    catalog = _catalog(project, store)
    catalog.sync()
    catalog.save()
    texts = folder / "catalog.spool"
    if damage == "texts of another save":
        kept = texts.read_bytes()
        _write(Path(project.root), "gamma.py", 2)
        Indexer(project, store, embed=False).ensure_indexed()
        catalog.sync()
        catalog.save()
        texts.write_bytes(kept)  # the first save's texts beside the second's arrays
    elif damage == "texts cut short":
        texts.write_bytes(texts.read_bytes()[:-10])
    else:
        texts.unlink()
    again = _catalog(project, store)
    again.sync()
    assert not again.loaded_from_snapshot
    _same_as_the_store(again, store)


def test_a_snapshot_of_another_database_is_ignored(tmp_path):
    """The index removed and made again (another file content at an old generation): the
    saved files no longer match the store's."""
    project, store = _indexed(tmp_path / "p")
    try:
        catalog = _catalog(project, store)
        catalog.sync()
        catalog.save()
    finally:
        store.close()
    folder = snapshot_folder(project)
    saved = {name: (folder / name).read_bytes()
             for name in ("catalog.npz", "catalog.spool")}
    shutil.rmtree(folder)
    project, store = _indexed(tmp_path / "p", delta_version=3)  # delta.py re-written
    try:
        for name, data in saved.items():
            (folder / name).write_bytes(data)
        again = _catalog(project, store)
        again.sync()
        assert not again.loaded_from_snapshot
        _same_as_the_store(again, store)
    finally:
        store.close()


def test_files_written_after_the_last_sync_are_taken_in_by_the_next_process(project):
    """Saved while behind the store (a file removed and one re-written since its last
    sync): the next process drops and re-reads them."""
    project, store = project
    catalog = _catalog(project, store)
    catalog.sync()
    root = Path(project.root)
    (root / "gamma.py").unlink()
    _write(root, "delta.py", 4)
    Indexer(project, store, embed=False).ensure_indexed()
    catalog.save()
    again = _catalog(project, store)
    again.sync()
    assert again.loaded_from_snapshot
    assert "gamma.py" not in again.paths
    _same_as_the_store(again, store)


def _vectors(index) -> dict[str, list[float]]:
    return {cid: index.matrix[row].tolist() for cid, row in index.position.items()}


def test_the_vectors_are_saved_and_loaded_with_the_catalog(tmp_path):
    """The real model's vectors: saved at shutdown, loaded by the next module (the rows of
    a re-written file read again from the store), equal to a load from the store alone."""
    from contextd import ContextModule
    from contextd.providers.semantic import VectorIndex

    project, store = _indexed(tmp_path / "p")
    try:
        Indexer(project, store).ensure_indexed()  # the vectors too
        module = ContextModule(project, store)
        module.pipeline.warm_up(wait=True)
        first = module.pipeline.provider("semantic").index
        assert isinstance(first, VectorIndex) and len(first) and not first.loaded_from_snapshot
        module.shutdown()
        assert (snapshot_folder(project) / "vectors.npz").exists()

        _write(Path(project.root), "alpha.py", 5)
        Indexer(project, store).ensure_indexed()
        module = ContextModule(project, store)
        module.pipeline.warm_up(wait=True)
        index = module.pipeline.provider("semantic").index
        assert index.loaded_from_snapshot and module.pipeline.catalog.loaded_from_snapshot
        fresh = VectorIndex(module.pipeline.catalog, index.model, index.dimension)
        fresh.sync()
        assert _vectors(index) == _vectors(fresh) and len(index) == len(fresh)
        alpha = module.pipeline.catalog.paths["alpha.py"]
        assert any("post_5" in r.text for r in module.pipeline.catalog.chunks_for_files([alpha])
                   if r.chunk_id in index.position)
        module.shutdown()
    finally:
        store.close()


def test_mmr_vectors_of_an_index_behind_the_store_are_read_from_the_store(tmp_path):
    """The answer after a ``git checkout`` asks vectors of its few candidates for MMR: while
    the in-memory index is behind the store they are read from the store, equal to what
    the index holds once it catches up, and the index is left to its own catch-up (taking
    in every re-written file first cost that answer seconds, issue 37)."""
    from contextd import ContextModule

    project, store = _indexed(tmp_path / "p")
    try:
        Indexer(project, store).ensure_indexed()  # the vectors too
        module = ContextModule(project, store)
        module.pipeline.warm_up(wait=True)
        semantic = module.pipeline.provider("semantic")
        index = semantic.index
        version = index.version
        _write(Path(project.root), "alpha.py", 7)
        Indexer(project, store).ensure_indexed()
        catalog = module.pipeline.catalog
        generation = store.generation()
        catalog.sync(generation)
        alpha = [r.chunk_id for r in catalog.chunks_for_files([catalog.paths["alpha.py"]])]
        beta = [r.chunk_id for r in catalog.chunks_for_files([catalog.paths["beta.py"]])]
        asked = semantic.vectors(alpha + beta, generation)
        assert index.version == version and not index.is_current(generation)
        assert set(asked) == set(alpha + beta)
        assert not any(cid in index.position for cid in alpha)  # not taken in by the ask
        semantic.ready_index(generation)
        assert index.is_current(generation)
        held = semantic.vectors(alpha + beta, generation)
        assert {c: v.tolist() for c, v in asked.items()} == \
            {c: v.tolist() for c, v in held.items()}
        module.shutdown()
    finally:
        store.close()
