"""The embedding cache, proven by counting calls to the real model: a counting backend wraps
the real ONNX embedder and enters through the plugin manager, like any third-party embedder."""

from __future__ import annotations

import dataclasses

import pytest
from test_indexer import FUNC, make_repo

from contextd.config.sections import EmbeddingConfig
from contextd.embedders import onnx_factory
from contextd.hookspecs import hookimpl
from contextd.indexer import Indexer
from contextd.runtime.jobs import JobRunner
from contextd.plugins.manager import get_plugin_manager
from contextd.config.project import Project
from contextd.store.duckdb import DuckDBStore


class CountingEmbedder:
    """The real model, counting the texts it is asked to embed."""

    def __init__(self, inner, tag: str):
        self.inner = inner
        self.identity = f"{inner.identity}/{tag}"
        self.dimension = inner.dimension
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


class CountingPlugin:
    def __init__(self):
        self.embedders: dict[str, CountingEmbedder] = {}

    @hookimpl
    def register_embedders(self, register):
        for tag in ("counting-a", "counting-b"):
            register(tag, lambda config, tag=tag: self._make(config, tag))

    def _make(self, config, tag):
        # get_embedder is calling this factory (under its lock): build the real one directly.
        real = onnx_factory(dataclasses.replace(config, backend="onnx"))
        return self.embedders.setdefault(tag, CountingEmbedder(real, tag))


@pytest.fixture
def counting():
    plugin = CountingPlugin()
    pm = get_plugin_manager()
    pm.register(plugin, name="counting-embedder")
    yield plugin
    pm.unregister(plugin)


def indexer_with(root, backend: str) -> Indexer:
    project = Project.open(root)
    config = dataclasses.replace(project.config,
                                 embedding=EmbeddingConfig(backend=backend, batch_size=8))
    return Indexer(Project(root, config), DuckDBStore(project.db_path))


def test_cache_reembeds_only_what_changed(tmp_path, counting):
    root = make_repo(tmp_path / "repo", {
        "app.py": "".join(FUNC.format(name=f"f{i}", doc=f"Function {i}.", n=i)
                          for i in (0, 1, 2, 3, 0)),  # f0 twice: one text to embed
        "notes.md": "# Notes\n\nNothing here changes.\n",
    })
    indexer = indexer_with(root, "counting-a")
    report = indexer.ensure_indexed()
    model = counting.embedders["counting-a"]
    assert report.chunks_written == 6 and len(model.texts) == 5
    assert report.chunks_embedded == 5 and indexer.status()["embeddings_pending"] == 0

    (root / "app.py").write_text("".join(FUNC.format(
        name=f"f{i}", doc="Edited." if i == 2 else f"Function {i}.", n=i)
        for i in (0, 1, 2, 3, 0)))
    model.texts.clear()
    indexer.refresh(["app.py"])
    assert len(model.texts) == 1
    assert model.texts[0].endswith(FUNC.format(name="f2", doc="Edited.", n=2).strip())

    model.texts.clear()
    result = JobRunner(indexer, indexer.store).rebuild(vacuum=False)
    assert result.status == "completed" and model.texts == []

    indexer.store.close()
    other = indexer_with(root, "counting-b")
    report = other.refresh(force=True)
    assert len(counting.embedders["counting-b"].texts) == 5 == report.chunks_embedded
