"""int8 codes of unit vectors, for a first pass over every chunk that reads a quarter of the
bytes of the float32 matrix.

A query's exact cosine against 100k float32 vectors reads 150 MB and is bound by memory
bandwidth: 6-16 ms on this machine kind, most of a warm query. The same pass over int8 codes
with NumKong's SIMD dot kernels (VNNI/AMX where present) reads 38 MB: ~1.5 ms when they are
in cache, ~3.5 ms from memory. Each row keeps its own scale, so the approximate cosine is off
by ~1e-3; the best candidates of that pass, several times more than asked for, are then
scored exactly from the float32 rows. A row of the true top-k would be missed only if its
int8 error exceeded its gap to hundreds of rows ranked above it, so the answer is the exact
top-k (tests/test_quantized.py: on the real model's vectors and on crowded near-ties).
"""

from __future__ import annotations

import numkong
import numpy as np

# The exact pass scores this many times the rows asked for (and at least RESCORE_MIN), so a
# row that the int8 pass put a little too low is still found.
RESCORE_OVERSAMPLE = 4
RESCORE_MIN = 64
# When the candidates would be this share of all rows or more (a scope that filters most
# rows out looks deep), every row is scored exactly in place instead of gathering copies.
FULL_PASS_SHARE = 0.25
_CODE_MAX = 127


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes of ``vectors`` (rows scaled so their largest component is ±127) and the
    float32 factor that turns a row's integer dot product back into its float one."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peaks = np.abs(vectors).max(axis=1) if len(vectors) else np.zeros(0, dtype=np.float32)
    peaks = np.where(peaks > 0, peaks, 1.0).astype(np.float32)
    codes = np.rint(vectors * (_CODE_MAX / peaks)[:, None]).astype(np.int8)
    return codes, peaks / _CODE_MAX


def approximate_scores(codes: np.ndarray, factors: np.ndarray, vector: np.ndarray
                       ) -> np.ndarray:
    """Approximate ``rows @ vector`` for the rows behind ``codes`` (one float32 score each)."""
    if not len(codes):
        return np.zeros(0, dtype=np.float32)
    query_codes, query_factor = quantize(vector[None, :])
    dots = np.asarray(numkong.cdist(query_codes, codes, metric="dot", out_dtype="float32"))[0]
    return dots * factors * query_factor[0]


def exact_top(approximate: np.ndarray, matrix: np.ndarray, vector: np.ndarray, depth: int
              ) -> tuple[np.ndarray, np.ndarray]:
    """Rows and exact scores of the ``depth`` best rows, best first: the int8 pass's best
    candidates rescored from the float32 ``matrix``. Rows whose approximate score is -inf
    (dead rows) are never returned."""
    wanted = min(len(approximate), max(depth * RESCORE_OVERSAMPLE, RESCORE_MIN))
    if wanted <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if wanted >= FULL_PASS_SHARE * len(approximate):
        exact = matrix[:len(approximate)] @ vector
        exact[~np.isfinite(approximate)] = -np.inf
        order = np.argsort(-exact, kind="stable")[:depth]
        order = order[np.isfinite(exact[order])]
        return order, exact[order]
    candidates = np.argpartition(-approximate, wanted - 1)[:wanted]
    candidates = candidates[np.isfinite(approximate[candidates])]
    exact = matrix[candidates] @ vector
    order = np.argsort(-exact, kind="stable")[:depth]
    return candidates[order], exact[order]
