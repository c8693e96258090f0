"""The process's large transients (contextd.embedders.scratch_memory): embedding batches
shrink near the memory budget without changing a vector, and a BM25 freeze never runs beside
an embedding batch (issue 37: the owner's peak passed [owner] memory_limit_mb when both did).
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from contextd.config.sections import EmbeddingConfig
from contextd.embedders import scratch_memory
from contextd.embedders.common import embed_sorted
from contextd.embedders.registry import get_embedder
from contextd.providers.fulltext import BM25Index

LENGTHS = [300, 5, 256, 10, 256, 7, 200, 3, 60, 64, 40, 33] * 4
WAIT_S = 60.0


@pytest.fixture
def budget():
    """Set a memory budget for the test, and none again after it. None before it too: an
    owner started in this process by an earlier test (``Indexer.follow_vectors``) leaves its
    ``[owner] memory_limit_mb`` set, the budget being the process's."""
    scratch_memory.limit_to(None)
    yield scratch_memory.limit_to
    scratch_memory.limit_to(None)


def _batches(max_tokens: int) -> list[list[int]]:
    """The padded widths of the batches embed_sorted forms over LENGTHS."""
    seen: list[list[int]] = []

    def run(indices):
        seen.append([LENGTHS[i] for i in indices])
        return np.zeros((len(indices), 2), dtype=np.float32)

    embed_sorted(LENGTHS, 16, 2, run, max_tokens=max_tokens)
    assert sum(map(len, seen)) == len(LENGTHS)
    return seen


def _largest(batches: list[list[int]]) -> int:
    return max(len(batch) * max(batch) for batch in batches if len(batch) > 1)


def test_resident_size_is_read():
    assert scratch_memory.resident_mb() > 1


def test_batches_shrink_near_the_memory_budget(budget):
    roomy = _batches(512)
    budget(1 << 20)  # a budget far above this process: batches as configured
    assert _batches(512) == roomy
    budget(1)  # this process is far above it
    tight = _batches(512)
    assert _largest(tight) <= 512 // scratch_memory.NEAR_LIMIT_DIVISOR < _largest(roomy)
    assert len(tight) > len(roomy)


def test_vectors_do_not_depend_on_the_budget(budget):
    embedder = get_embedder(dataclasses.replace(EmbeddingConfig(), quantize="int8"))
    texts = [f"def handler_{i}(request):\n    return respond(request, {i})\n" * (1 + i % 9)
             for i in range(24)]
    roomy = embedder.embed(texts)
    budget(1)
    tight = embedder.embed(texts)
    assert np.sum(roomy * tight, axis=1).min() >= 0.99999


def test_a_bm25_freeze_waits_for_an_embedding_batch_to_end():
    index = BM25Index()
    for n in range(50):
        index.add(f"c{n}", [f"w{n % 7}", f"v{n % 5}", "shared"])
    in_batch, leave_batch = threading.Event(), threading.Event()
    started, frozen = threading.Event(), threading.Event()

    def batch(indices):
        in_batch.set()
        leave_batch.wait(WAIT_S)
        return np.zeros((len(indices), 2), dtype=np.float32)

    def freeze():
        started.set()
        index.freeze()
        frozen.set()

    embedding = threading.Thread(target=embed_sorted, args=([5], 1, 2, batch, 512))
    embedding.start()
    assert in_batch.wait(WAIT_S)
    freezing = threading.Thread(target=freeze)
    freezing.start()
    assert started.wait(WAIT_S)
    assert not frozen.wait(0.3)  # its turn comes only after the batch
    leave_batch.set()
    assert frozen.wait(WAIT_S)
    embedding.join(WAIT_S)
    freezing.join(WAIT_S)
    assert index.frozen_count == 50 and index.delta_count == 0
