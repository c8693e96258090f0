"""Fusion, de-duplication and MMR on hand-made snippets (exact math, no model needed)."""

from __future__ import annotations

import numpy as np
import pytest

from contextd.query.fusion import (
    FusionStrategy, deduplicate, fuse, mmr_select, rrf_scores, trim_snippet,
)
from contextd.records import ContextSnippet


def snip(cid, score=1.0, path="a.py", start=1, end=5, tokens=10, text=None, providers=("p",)):
    return ContextSnippet(chunk_id=cid, score=score, file_path=path, label=cid, kind="CODE",
                          text=text or f"text of {cid}", language="python", start_line=start,
                          end_line=end, tokens=tokens, providers=providers)


def test_rrf_matches_hand_computed_ranks():
    rankings = {"semantic": ["a", "b", "c"], "symbol": ["c", "a"]}
    weights = {"semantic": 0.6, "symbol": 0.3}
    scores = rrf_scores(rankings, weights, k=60)
    assert scores["a"] == pytest.approx(0.6 / 61 + 0.3 / 62)
    assert scores["b"] == pytest.approx(0.6 / 62)
    assert scores["c"] == pytest.approx(0.6 / 63 + 0.3 / 61)
    assert sorted(scores, key=scores.get, reverse=True) == ["a", "c", "b"]


def test_fuse_rrf_normalises_and_attributes():
    ranked = {"semantic": [snip("a", path="x.py"), snip("b", path="y.py")],
              "symbol": [snip("b", path="y.py", providers=("symbol",))]}
    fused = fuse(ranked, {"semantic": 1.0, "symbol": 1.0}, FusionStrategy.RRF, rrf_k=60)
    assert [s.chunk_id for s in fused] == ["b", "a"]
    assert fused[0].score == pytest.approx((1 / 62 + 1 / 61) / (2 / 61))
    assert set(fused[0].providers) == {"p", "symbol"}
    assert fused[0].metadata["provider_ranks"] == {"semantic": 2, "symbol": 1}
    assert all(0 <= s.score <= 1 for s in fused)


def test_weighted_average_and_cascade():
    ranked = {"one": [snip("a", 0.9), snip("b", 0.5)], "two": [snip("b", 1.0), snip("c", 0.8)]}
    avg = fuse(ranked, {"one": 1.0, "two": 3.0}, FusionStrategy.WEIGHTED_AVERAGE)
    assert {s.chunk_id: round(s.score, 4) for s in avg} == {
        "b": round((0.5 + 3.0) / 4, 4), "c": round(2.4 / 4, 4), "a": round(0.9 / 4, 4)}
    cascade = fuse(ranked, {}, FusionStrategy.CASCADE, order=["two", "one"])
    assert [s.chunk_id for s in cascade] == ["b", "c", "a"]


def test_deduplicate_merges_same_chunk_and_overlapping_ranges():
    items = [snip("a", 0.9, start=1, end=10, providers=("x",)),
             snip("a", 0.5, start=1, end=10, providers=("y",)),
             snip("b", 0.7, start=8, end=20, providers=("z",)),
             snip("c", 0.6, start=21, end=30)]
    out = deduplicate(items)
    assert [s.chunk_id for s in out] == ["a", "c"]
    assert set(out[0].providers) == {"x", "y", "z"}
    assert out[0].metadata["merged"] == ["b"]


def test_mmr_drops_near_duplicate_that_plain_ranking_keeps():
    a, dup, other = snip("a", 1.0, "a.py"), snip("dup", 0.95, "b.py"), snip("o", 0.9, "c.py")
    vectors = {"a": np.array([1.0, 0.0, 0.0], np.float32),
               "dup": np.array([0.999, 0.045, 0.0], np.float32),
               "o": np.array([0.0, 1.0, 0.0], np.float32)}
    plain = mmr_select([a, dup, other], vectors, 0.5, 1000, k=2, rerank=False)
    diverse = mmr_select([a, dup, other], vectors, 0.5, 1000, k=2)
    assert [s.chunk_id for s in plain.snippets] == ["a", "dup"]
    assert [s.chunk_id for s in diverse.snippets] == ["a", "o"]
    assert not diverse.used_word_overlap


def test_mmr_falls_back_to_word_overlap_without_vectors():
    items = [snip("a", 1.0, text="alpha beta gamma"), snip("b", 0.9, text="alpha beta gamma"),
             snip("c", 0.8, text="delta epsilon")]
    chosen = mmr_select(items, {}, 0.5, 1000, k=2)
    assert [s.chunk_id for s in chosen.snippets] == ["a", "c"]
    assert chosen.used_word_overlap


@pytest.mark.parametrize("budget", [1, 15, 39, 60, 200])
def test_mmr_never_exceeds_budget(budget):
    text = "\n".join(f"line number {i} with some words" for i in range(40))
    items = [snip(str(i), 1 - i / 100, path=f"{i}.py", tokens=90, text=text) for i in range(8)]
    chosen = mmr_select(items, {}, 0.5, budget, k=8)
    assert chosen.total_tokens <= budget
    assert sum(s.tokens for s in chosen.snippets) == chosen.total_tokens


def test_trim_snippet_cuts_whole_lines():
    text = "\n".join(f"def f{i}(): return {i}" for i in range(30))
    item = snip("a", tokens=400, text=text, start=10, end=39)
    cut = trim_snippet(item, 50)
    assert cut.tokens <= 50 and cut.metadata["truncated"]
    assert cut.end_line == 10 + cut.text.count("\n")
    assert text.startswith(cut.text)
