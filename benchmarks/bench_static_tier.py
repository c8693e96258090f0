"""Would a static (model2vec) embedding model make a good instant semantic tier? (issue 13)

A static model is distilled offline from the packaged MiniLM (``model2vec.distill`` on the
model directory that contextd.embedders.model_files finds; no hub access), cached under
benchmarks/.cache/static/, and registered for this process only as an embedding backend named
``static``. The public evaluation (benchmarks/eval) then runs over two indexes of each corpus:
one embedded by today's ONNX int8 MiniLM, one by the static model. Printed:

- distillation time (or the time it took when it was cached);
- embedding throughput, chunks/s, of the static model and of ONNX int8 on the same chunks;
- index time (chunk + embed) of each eval corpus with either embedder;
- quality side by side: Recall@1/5/10 and MRR of the semantic provider alone, of the hybrid
  (RRF of semantic, full-text and symbol), of the hybrid without semantic (what a first answer
  has today while embedding is pending) and of contextd's own query path, for task-style and
  docstring queries. "static tier" rows are what a first tier would answer before the
  transformer's vectors are in.

    .venv/bin/python -m benchmarks.bench_static_tier                  # ~3 min on 2 shared cores
    .venv/bin/python -m benchmarks.bench_static_tier --corpora requests --strategies none

Needs the bench extra (``pip install -e '.[bench]'``: model2vec, its distillation dependency
skeletoken, and the torch extra, since distillation runs the model in torch). Index directories are fresh for each run (timed), under
benchmarks/.cache/static/index/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.eval import run as eval_run
from benchmarks.eval.corpora import CACHE, CORPUS_LIST
from benchmarks.eval.run import STRATEGIES, Tally, merge, print_table
from contextd.config.loading import config_from_dict
from contextd.embedders.common import require_extra
from contextd.embedders.model_files import locate_model
from contextd.errors import ContextdError
from contextd.embedders.registry import get_embedder
from contextd.hookspecs import hookimpl
from contextd.indexer import Indexer
from contextd.plugins.manager import get_plugin_manager
from contextd.config.project import Project
from contextd.store.duckdb import DuckDBStore

STATIC = CACHE / "static"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
PCA_DIMS = 256
THROUGHPUT_CHUNKS = 1000
LEXICAL_SYSTEMS = ("full_text", "symbol", "lexical only")


def distilled_model() -> tuple[Path, float, bool]:
    """The static model's directory, the distillation's time in seconds, and whether it was
    distilled now (False: read from the cache, with the time recorded then)."""
    files = locate_model(MODEL_NAME)
    target = STATIC / f"{files.name}-{files.version}-pca{PCA_DIMS}"
    record = target / "distill_seconds.json"
    if record.is_file():
        return target, json.loads(record.read_text())["seconds"], False
    os.environ["HF_HUB_OFFLINE"] = "1"  # distil from the local directory only, never the hub
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from model2vec.distill import distill

    started = time.perf_counter()
    model = distill(model_name=str(files.path), pca_dims=PCA_DIMS)
    seconds = time.perf_counter() - started
    model.save_pretrained(str(target))
    record.write_text(json.dumps({"seconds": seconds}))
    return target, seconds, True


class StaticEmbedder:
    """The distilled model behind contextd's embedder interface (identity, dimension, embed,
    embed_query): token vectors looked up and mean-pooled, L2-normalised like the
    transformer's so cosine scores mean the same."""

    def __init__(self, path: Path):
        from model2vec import StaticModel

        self.model = StaticModel.from_pretrained(str(path), normalize=True)
        self.dimension = PCA_DIMS
        self.identity = f"{path.name}/static/{PCA_DIMS}"

    def embed(self, texts) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return self.model.encode(list(texts), batch_size=1024).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


class StaticPlugin:
    """Registers the ``static`` backend for this process only."""

    def __init__(self, path: Path):
        self.path = path

    @hookimpl
    def register_embedders(self, register):
        register("static", lambda config: StaticEmbedder(self.path))


EMBEDDINGS = {"onnx-int8": {}, "static": {"backend": "static", "dimension": PCA_DIMS}}


def build_index(name: str, root: Path, strategy: str, embedding: str):
    """A fresh index of ``root`` embedded by ``embedding``; returns project, store, seconds."""
    db = STATIC / "index" / f"{name}-{strategy}-{embedding}" / "context.duckdb"
    shutil.rmtree(db.parent, ignore_errors=True)
    db.parent.mkdir(parents=True)
    config = config_from_dict({"storage": {"db_path": str(db)},
                               "contextualizer": {"strategy": strategy},
                               "watcher": {"use_gitignore": False},
                               "embedding": EMBEDDINGS[embedding]})
    project = Project(root=root, config=config)
    store = DuckDBStore(db)
    get_embedder(config.embedding).embed_query("warm up")  # model load is not index time
    started = time.perf_counter()
    indexer = Indexer(project, store)
    indexer.ensure_indexed()
    indexer.embed_pending()
    return project, store, time.perf_counter() - started


def without_semantic(run_systems):
    """Wrap eval's run_systems to add "lexical only": the RRF of full-text and symbol, what a
    first answer holds today while the transformer's vectors are pending."""

    def run(providers, case, project, files):
        out = run_systems(providers, case, project, files)
        lexical = {pid: p for pid, p in providers.items() if pid != "semantic"}
        fused = run_systems(lexical, case, project, files)
        out["lexical only"] = fused["hybrid"]
        return out

    return run


def chunk_texts(store, limit: int) -> list[str]:
    """Up to ``limit`` chunks of an index, as the embedder sees them (prefix + text)."""
    rows = store._con.execute("SELECT coalesce(index_text, text) FROM chunks "
                              "ORDER BY chunk_id LIMIT ?", [limit]).fetchall()
    return [r[0] for r in rows]


def throughput(texts: list[str]) -> dict[str, float]:
    """chunks/s of each embedder over the same texts (best of 2 for the fast one)."""
    figures = {}
    for embedding in EMBEDDINGS:
        config = config_from_dict({"embedding": EMBEDDINGS[embedding]}).embedding
        embedder = get_embedder(config)
        embedder.embed(texts[:8])
        rounds = 2 if embedding == "static" else 1
        best = min(_timed(embedder, texts) for _ in range(rounds))
        figures[embedding] = len(texts) / best
    return figures


def _timed(embedder, texts) -> float:
    started = time.perf_counter()
    embedder.embed(texts)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="*", default=[c.name for c in CORPUS_LIST])
    parser.add_argument("--strategies", nargs="*", default=["structural"],
                        choices=STRATEGIES, help="contextualizer strategies (default: the "
                        "product's default, structural)")
    args = parser.parse_args(argv)
    try:
        require_extra("distilling a static model", "bench", "model2vec", "skeletoken", "torch")
    except ContextdError as exc:
        parser.exit(1, f"{exc}\n")
    path, seconds, fresh = distilled_model()
    print(f"distillation: {seconds:.1f} s ({'now' if fresh else 'cached; time when made'}),"
          f" {path}")
    get_plugin_manager().register(StaticPlugin(path), name="bench-static-tier")
    eval_run.run_systems = without_semantic(eval_run.run_systems)

    totals: dict[tuple[str, str, str], dict[str, Tally]] = {}
    index_times: list[tuple[str, float, float]] = []
    sample_texts: list[str] = []
    for corpus, strategy, kind, root, variant, cases, files in eval_run.eval_sets(
            args.corpora, args.strategies):
        seconds_by = {}
        for embedding in EMBEDDINGS:
            print(f"indexing {corpus.name}/{variant} ({strategy}) with {embedding} ...",
                  file=sys.stderr)
            project, store, seconds_by[embedding] = build_index(
                f"{corpus.name}-{variant}", root, strategy, embedding)
            if len(sample_texts) < THROUGHPUT_CHUNKS:
                sample_texts += chunk_texts(store, THROUGHPUT_CHUNKS - len(sample_texts))
            tallies = eval_run.evaluate_index(project, store, cases, files, root)
            merge(totals.setdefault((kind, strategy, embedding), {}), tallies)
        index_times.append((f"{corpus.name}/{variant} ({strategy})",
                            seconds_by["onnx-int8"], seconds_by["static"]))

    print(f"\n### embedding throughput, {len(sample_texts)} eval chunks (chunks/s)")
    for name, rate in throughput(sample_texts).items():
        print(f"- {name}: {rate:,.0f}")
    print("\n### index time (chunk + embed), s")
    print("| corpus | onnx-int8 | static |\n|---|---|---|")
    for name, onnx_s, static_s in index_times:
        print(f"| {name} | {onnx_s:.1f} | {static_s:.1f} |")
    for kind in ("task", "docstring"):
        for strategy in args.strategies:
            side = {}
            for embedding in EMBEDDINGS:
                for system, tally in totals[(kind, strategy, embedding)].items():
                    if embedding == "static" and system in LEXICAL_SYSTEMS:
                        continue  # no vectors in it: identical in both indexes
                    label = system if system in LEXICAL_SYSTEMS else f"{system} [{embedding}]"
                    side[label] = tally
            print_table(f"ALL corpora - {kind} - prefixes: {strategy}", dict(sorted(
                side.items(), key=lambda kv: kv[0].split(" [")[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
