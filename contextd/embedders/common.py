"""What every built-in backend shares: resolved model settings, identity, batching, pooling.

Kept free of heavy imports (numpy only) so that building an embedder object, reading its
identity or listing backends costs milliseconds; the model itself loads on first use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from contextd.config.sections import EmbeddingConfig
from contextd.embedders.model_files import ModelFiles, locate_model
from contextd.embedders.scratch_memory import batch_tokens, transient
from contextd.errors import MissingExtraError, ModelUnavailableError


def cache_root() -> Path:
    """The user cache directory of contextd: $CONTEXTD_CACHE_DIR, else
    $XDG_CACHE_HOME/contextd, else ~/.cache/contextd (not created here)."""
    explicit = os.environ.get("CONTEXTD_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "contextd"


def cpu_count() -> int:
    """Cores this process may run on (respects affinity masks and container CPU sets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class ModelSettings:
    """A configuration resolved against the model on disk, shared by the backends."""

    files: ModelFiles
    backend: str
    precision: str
    max_length: int
    dimension: int
    normalize: bool
    batch_size: int
    threads: int

    @classmethod
    def resolve(cls, config: EmbeddingConfig, backend: str, precision: str) -> "ModelSettings":
        """Locate the model and check the configuration fits it (raises
        ModelUnavailableError with the fix when it does not)."""
        files = locate_model(config.model)
        if files.pooling_mode != "mean":
            raise ModelUnavailableError(
                f"model {config.model!r} uses {files.pooling_mode} pooling; the built-in "
                f"embedders implement mean pooling only")
        pooling = files.read_json("1_Pooling/config.json")
        native = int(pooling.get("word_embedding_dimension") or
                     files.read_json("config.json").get("hidden_size", config.dimension))
        if native != config.dimension:
            raise ModelUnavailableError(
                f"model {config.model!r} produces {native}-dimensional vectors but "
                f"[embedding] dimension is {config.dimension}; set dimension = {native}")
        return cls(files=files, backend=backend, precision=precision,
                   max_length=min(config.max_seq_length, files.max_positions),
                   dimension=native, normalize=config.normalize,
                   batch_size=config.batch_size, threads=config.threads or cpu_count())

    @property
    def identity(self) -> str:
        """Names the vector space, e.g. ``all-MiniLM-L6-v2/onnx-int8/256``: vectors with
        different identities are never compared or mixed in one index."""
        base = f"{self.files.name}/{self.backend}-{self.precision}/{self.max_length}"
        return base if self.normalize else base + "/raw"


def embed_sorted(lengths: Sequence[int], batch_size: int, dimension: int,
                 run_batch: Callable[[np.ndarray], np.ndarray],
                 max_tokens: int | None = None) -> np.ndarray:
    """Embed in batches of similar length (so little padding is computed) and return the
    vectors in the original order.

    ``run_batch(indices)`` embeds the items at ``indices`` and returns their vectors. With
    ``max_tokens`` a batch also holds at most that many padded tokens (rows times its longest
    item), so long texts go in smaller batches: a transformer's attention buffers grow with
    rows x length^2: 64 texts of 256 tokens made a 600 MB peak, 8 of them ~350 MB. Near the
    process's memory budget the cap shrinks, and each batch waits for any other large
    transient of the process to end (:mod:`contextd.embedders.scratch_memory`).
    """
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    out = np.empty((len(order), dimension), dtype=np.float32)
    if max_tokens:  # fewer while the process is near its memory budget
        max_tokens = batch_tokens(max_tokens)
    start = 0
    while start < len(order):
        end = min(start + batch_size, len(order))
        if max_tokens:
            # Sorted ascending: the batch's width is its last item's length.
            while end - start > 1 and (end - start) * max(1, lengths[order[end - 1]]) > max_tokens:
                end -= 1
        indices = order[start:end]
        with transient(release=False):  # not beside another large transient (a BM25 freeze)
            out[indices] = run_batch(indices)
        start = end
    return out


def mean_pool(hidden: np.ndarray, mask: np.ndarray, normalize: bool) -> np.ndarray:
    """Mean of the token vectors that are not padding, optionally L2-normalised, exactly as
    sentence-transformers' Pooling(mean) + Normalize modules compute it."""
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
    if normalize:
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype(np.float32, copy=False)


def require_extra(feature: str, extra: str, *modules: str) -> None:
    """Raise MissingExtraError, one line naming the pip extra, when a module ``feature``
    needs is not installed (checked without importing it, so the check costs microseconds)."""
    import importlib.util

    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"{feature} needs {', '.join(missing)}, which the default install leaves out; "
            f"install the {extra} extra: pip install 'contextd[{extra}]'")
