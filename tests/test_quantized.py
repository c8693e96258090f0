"""The int8 first pass of the semantic search (contextd.vectors.quantized) returns the exact top-k: the
same rows, in the same order, as scoring every float32 row, on the real model's embeddings of
this repository's code and on vectors crowded around the query."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from contextd.chunkers.chunking import chunk_file
from contextd.config.sections import ContextConfig
from contextd.embedders.registry import get_embedder
from contextd.vectors.quantized import (
    FULL_PASS_SHARE, RESCORE_MIN, approximate_scores, exact_top, quantize,
)

REPO = Path(__file__).resolve().parents[1]
QUERIES = ["where is the API key compared in constant time", "parse the config file",
           "embed a batch of chunks", "how are secrets removed from text",
           "rank hits with maximal marginal relevance", "split markdown by headings",
           "open the duckdb database", "watch the project for file changes"]


def exact_ranking(matrix: np.ndarray, vector: np.ndarray, depth: int) -> list[int]:
    return [int(i) for i in np.argsort(-(matrix @ vector), kind="stable")[:depth]]


def first_pass_ranking(matrix: np.ndarray, vector: np.ndarray, depth: int) -> list[int]:
    codes, factors = quantize(matrix)
    rows, scores = exact_top(approximate_scores(codes, factors, vector), matrix, vector, depth)
    assert np.allclose(scores, matrix[rows] @ vector)
    return [int(i) for i in rows]


@pytest.fixture(scope="module")
def embedded_code():
    """The real model's vectors for the chunks of contextd's own modules, and the queries'."""
    config = ContextConfig()
    texts = []
    for path in sorted((REPO / "contextd").rglob("*.py"))[:60]:
        texts += [c.text for c in chunk_file(path.name, path.read_bytes(), config).chunks]
    embedder = get_embedder(config.embedding)
    return embedder.embed(texts), [embedder.embed_query(q) for q in QUERIES]


@pytest.mark.slow
def test_exact_top_k_on_real_embeddings(embedded_code):
    matrix, queries = embedded_code
    assert RESCORE_MIN < FULL_PASS_SHARE * len(matrix)  # the candidates are a few rows only
    for vector in queries:
        assert first_pass_ranking(matrix, vector, 12) == exact_ranking(matrix, vector, 12)


def test_exact_top_k_among_near_ties():
    """20k rows close to the query and to each other: the int8 pass alone orders them wrongly,
    the rescoring puts them in their exact order."""
    rng = np.random.default_rng(7)
    query = rng.standard_normal(384).astype(np.float32)
    query /= np.linalg.norm(query)
    rows = query + rng.standard_normal((20_000, 384)).astype(np.float32) * 0.02
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    codes, factors = quantize(rows)
    approximate_only = np.argsort(-approximate_scores(codes, factors, query))[:50]
    assert list(approximate_only) != exact_ranking(rows, query, 50)
    assert first_pass_ranking(rows, query, 50) == exact_ranking(rows, query, 50)


@pytest.mark.parametrize("depth", [10, 5_000])  # a few candidates; every row scored in place
def test_dead_rows_are_never_returned(depth):
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((4_000, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    vector = matrix[4] + matrix[5]  # even row 4 would be first if it were alive
    codes, factors = quantize(matrix)
    approximate = approximate_scores(codes, factors, vector)
    approximate[::2] = -np.inf  # even rows were re-written or removed
    rows, scores = exact_top(approximate, matrix, vector, depth)
    assert len(rows) == min(depth, 2_000) and not any(r % 2 == 0 for r in rows)
    assert rows[0] == 5 and list(scores) == sorted(scores, reverse=True)


def test_empty_and_zero_vectors():
    codes, factors = quantize(np.zeros((0, 384), dtype=np.float32))
    assert codes.shape == (0, 384) and len(factors) == 0
    zero = np.zeros((3, 384), dtype=np.float32)
    codes, factors = quantize(zero)
    assert not codes.any() and np.all(np.isfinite(factors))
    assert np.all(approximate_scores(codes, factors, np.ones(384, dtype=np.float32)) == 0)
