"""The in-memory vector index while the vectors are being computed (issue 37).

Each store write (a window of vectors) used to make the index re-read every file still
missing vectors and look up all their hashes' vectors: 3-7 s and +65 MB of the owner's peak
per answer while 55k chunks waited on wagtail. It now asks which of the waiting hashes have a
vector (only when vectors were written since it last looked) and reads those vectors only;
what it holds must still be exactly what an index loaded from the store at once holds.
Real DuckDB store, real indexer, real embedding model.
"""

from __future__ import annotations

from golden import open_indexed
from contextd.indexer import Indexer
from contextd.indexer.embed_stage import embed_missing
from contextd.providers.base import ProviderQuery
from contextd.providers.semantic import VectorIndex
from contextd.records import ContextScope, TokenBudget

FILES = {
    "ledger.py": "def post(entry):\n    \"\"\"Post an entry to the ledger.\"\"\"\n    return 1\n",
    "tax.py": "def vat(amount):\n    \"\"\"Value added tax at the standard rate.\"\"\"\n"
              "    return amount * 0.2\n",
    "clock.py": "def tick():\n    \"\"\"Advance the clock by one second.\"\"\"\n    return 2\n",
}


def _vectors(index: VectorIndex) -> dict[str, list[float]]:
    return {cid: index.matrix[row].tolist() for cid, row in index.position.items()}


def _same_as_a_fresh_load(index: VectorIndex) -> None:
    fresh = VectorIndex(index.catalog, index.model, index.dimension)
    fresh.sync()
    assert _vectors(index) == _vectors(fresh)
    assert index.waiting.keys() == fresh.waiting.keys()
    assert index.files_missing_vectors == fresh.files_missing_vectors


def test_vectors_written_later_are_taken_in_by_reading_those_vectors_only(tmp_path):
    from contextd import ContextModule

    root = tmp_path / "p"
    root.mkdir()
    (root / "context.toml").write_text('[contextualizer]\nstrategy = "none"\n')
    for name, text in FILES.items():
        (root / name).write_text(text)
    project, store = open_indexed(root)  # no vectors yet
    module = ContextModule(project, store)
    try:
        module.pipeline.warm_up(wait=True)
        semantic = module.pipeline.provider("semantic")
        embedder = semantic.context.embedder.get_nowait()
        index = semantic.ready_index(store.generation())
        catalog = module.pipeline.catalog
        assert len(index) == 0 and len(index.files_missing_vectors) == len(catalog.paths) > 3

        asked: list[str] = []
        real_batches = store.vector_batches

        def vector_batches(model, hashes, rows):  # the real read, its hashes recorded
            asked.extend(hashes)
            return real_batches(model, hashes, rows)

        store.vector_batches = vector_batches
        looked_up: list[int] = []
        real_lookup = store.embedded_hashes

        def embedded_hashes(model, hashes):  # the real lookup, counted
            looked_up.append(len(hashes))
            return real_lookup(model, hashes)

        store.embedded_hashes = embedded_hashes
        embed_missing(store, embedder, 8, paths=["tax.py"])
        semantic.ready_index(store.generation())
        tax = {e.chunk_id: e.embed_hash for e in catalog.entries_for_files(
            [catalog.paths["tax.py"]])}
        assert set(index.position) == set(tax)
        assert set(asked) == set(tax.values())  # not the hashes still waiting
        _same_as_a_fresh_load(index)

        # A file re-written while it waits: its old chunks wait no more, its new ones do.
        (root / "clock.py").write_text(FILES["clock.py"].replace("one second", "one minute"))
        looked_up.clear()
        Indexer(project, store, embed=False).ensure_indexed()
        semantic.ready_index(store.generation())
        assert not looked_up  # no vector was written: the waiting hashes are not looked up
        _same_as_a_fresh_load(index)
        asked.clear()
        embed_missing(store, embedder, 8)
        semantic.ready_index(store.generation())
        assert len(index) == len(catalog.rows) and not index.waiting
        assert set(asked) == {e.embed_hash for e in catalog.rows.values()
                              if e.embed_hash not in tax.values()}
        _same_as_a_fresh_load(index)
        hits = semantic.query(ProviderQuery("value added tax", 5), ContextScope(), TokenBudget())
        assert hits and hits[0].file_path == "tax.py"
    finally:
        module.shutdown()
        store.close()

