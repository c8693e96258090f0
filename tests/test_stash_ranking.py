"""Ranking maths of agent memory against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from contextd.config.sections import StashConfig
from contextd.stash.ranking import (
    SECONDS_PER_DAY, Weights, collapse_duplicates, decay, follow_references, score_parts,
)

DAY = SECONDS_PER_DAY


def test_default_weights_are_the_seeds():
    weights = Weights.from_config(StashConfig())
    assert (weights.similarity, weights.age, weights.recency) == (0.6, 0.2, 0.2)
    assert (weights.age_decay_days, weights.recency_decay_days) == (30.0, 7.0)


def test_decay_is_exponential_in_days_and_never_above_one():
    assert decay(0.0, 30.0) == 1.0
    assert decay(30 * DAY, 30.0) == pytest.approx(math.e ** -1)
    assert decay(7 * DAY, 7.0) == pytest.approx(0.36787944)
    assert decay(-5 * DAY, 7.0) == 1.0  # a timestamp in the future is "now"


def test_combined_score_by_hand():
    # Created 15 days ago, stashed 3.5 days ago, cosine 0.8:
    # 0.6*0.8 + 0.2*exp(-15/30) + 0.2*exp(-3.5/7) = 0.48 + 0.121306 + 0.121306 = 0.722612
    now = 100 * DAY
    age, recency, score = score_parts(0.8, now - 15 * DAY, now - 3.5 * DAY, now, Weights())
    assert age == pytest.approx(0.60653066)
    assert recency == pytest.approx(0.60653066)
    assert score == pytest.approx(0.7226123, abs=1e-6)


def test_weights_change_the_order_of_a_fresh_and_a_stale_match():
    now = 400 * DAY
    sims = np.array([0.80, 0.75])
    created = np.array([now - 300 * DAY, now - 0.5 * DAY])
    stashed = np.array([now - 60 * DAY, now - 0.5 * DAY])
    _, _, default = score_parts(sims, created, stashed, now, Weights())
    # Stale: 0.48 + 0.2*exp(-10) + 0.2*exp(-60/7) = 0.48 + 0.0000091 + 0.0000379
    # Fresh: 0.45 + 0.2*exp(-0.5/30) + 0.2*exp(-0.5/7) = 0.45 + 0.1966942 + 0.1862119
    assert default[0] == pytest.approx(0.4800470, abs=1e-6)
    assert default[1] == pytest.approx(0.8329061, abs=1e-6)
    _, _, similarity_only = score_parts(sims, created, stashed, now, Weights(1.0, 0.0, 0.0))
    assert list(np.argsort(-similarity_only)) == [0, 1]
    assert list(np.argsort(-default)) == [1, 0]


def test_reference_chains_stop_at_max_hops_and_keep_the_nearest_path():
    graph = {"a": ["b"], "b": ["c", "a"], "c": ["d"], "d": ["e"], "x": ["c"]}
    refs = lambda sid: graph.get(sid, [])  # noqa: E731
    assert follow_references(["a"], refs, 2) == {"b": (1, "a"), "c": (2, "a")}
    assert follow_references(["a"], refs, 0) == {}
    assert follow_references(["a", "x"], refs, 2) == {"b": (1, "a"), "c": (1, "x"),
                                                      "d": (2, "x")}


def test_identical_and_near_identical_segments_collapse_into_the_best():
    vectors = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0]),
               "c": np.array([0.999, 0.0447]), "d": np.array([1.0, 0.0])}
    hashes = {"a": "h1", "b": "h2", "c": "h3", "d": "h1"}
    kept = collapse_duplicates(["a", "b", "c", "d"], hashes, vectors, threshold=0.97)
    assert kept == [("a", ["c", "d"]), ("b", [])]
    # A stricter threshold keeps the near duplicate, never the identical text.
    strict = collapse_duplicates(["a", "b", "c", "d"], hashes, vectors, threshold=0.9999)
    assert strict == [("a", ["d"]), ("b", []), ("c", [])]
