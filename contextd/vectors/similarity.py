"""Cosine scores of one vector against a matrix of unit vectors, for the semantic provider
and agent memory alike (a module of its own, so that memory does not import the providers)."""

from __future__ import annotations

import numpy as np

# Below this many rows the matrix-vector product runs on the calling thread (einsum): OpenBLAS
# would split it over its threads, and on a loaded 2-core machine the hand-off costs more than
# the product (10k rows: p95 ~7 ms on one thread, ~15 ms on two). Above it the product is
# memory-bound and two threads read faster.
SINGLE_THREAD_ROWS = 50_000


def similarities(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector``, on this thread for small matrices (see SINGLE_THREAD_ROWS)."""
    if len(matrix) < SINGLE_THREAD_ROWS:
        return np.einsum("ij,j->i", matrix, vector)
    return matrix @ vector
