"""The remote embedder: batches of texts sent to a server, several requests in flight.

Texts are sorted by estimated length and grouped into requests of at most
``max_batch_items`` texts and ``max_batch_tokens`` estimated tokens (texts of similar length
share a request, so a server that pads a batch to its longest text computes little padding),
sent ``concurrency`` at a time over one keep-alive connection pool, and the answers put back
in input order. A call returns every vector or
raises: the indexer stores a window of vectors only when its call returned, so a request
that fails for good loses nothing (the texts stay "missing" and are asked for again) and a
retried request cannot store a vector twice (the embeddings table is keyed by text).
"""

from __future__ import annotations

import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, Sequence
from urllib.parse import urlsplit

import numpy as np

from contextd.config.sections import EmbeddingConfig
from contextd.config.env import api_key, default_api_key_variable
from contextd.embedders.remote.client import RemoteClient
from contextd.embedders.remote.protocols import Protocol
from contextd.embedders.remote.ratelimit import RateLimiter
from contextd.errors import RemoteEmbeddingError
from contextd.text.tokens import estimate_tokens

# [CLS] and [SEP] (or the model's equivalents) come on top of the text's own tokens.
SPECIAL_TOKENS = 2


def remote_identity(kind: str, config: EmbeddingConfig) -> str:
    """The identity stored with remote vectors, e.g.
    ``openai:text-embedding-3-small/1536@api.openai.com``: backend kind, the server's model
    name, dimension and host. A local model has another identity, and so does the same model
    name on another server, so vectors of different spaces are never mixed."""
    host = urlsplit(config.base_url).netloc if config.base_url else "default"
    base = f"{kind}:{config.model}/{config.dimension}@{host}"
    return base if config.normalize else base + "/raw"


def plan_batches(token_counts: Sequence[int], max_items: int, max_tokens: int
                 ) -> list[list[int]]:
    """Indices of the texts grouped into requests of at most ``max_items`` texts and
    ``max_tokens`` tokens, shortest texts first (a single longer text makes a request of its
    own; the server truncates or refuses it). Every index appears exactly once."""
    batches: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    for i in np.argsort(np.asarray(token_counts, dtype=np.int64), kind="stable").tolist():
        if current and (len(current) >= max_items or tokens + token_counts[i] > max_tokens):
            batches.append(current)
            current, tokens = [], 0
        current.append(i)
        tokens += token_counts[i]
    if current:
        batches.append(current)
    return batches


class RemoteEmbedder:
    """Embeds through an OpenAI-compatible or Ollama server (see the module docstring)."""

    prepared = True  # nothing to export: the server holds the model

    def __init__(self, config: EmbeddingConfig, protocol: Protocol):
        self.config = config
        self.kind = protocol.kind
        self.identity = remote_identity(protocol.kind, config)
        self.dimension = config.dimension
        key, _ = api_key(config)
        self.client = RemoteClient(
            protocol, config.base_url, config.model, key, default_api_key_variable(config),
            config.concurrency, config.timeout_s, config.max_retries,
            RateLimiter(config.requests_per_minute, config.tokens_per_minute))
        self.model_path = self.client.url  # where the model lives, for `embedders list`
        self._pool = ThreadPoolExecutor(config.concurrency, thread_name_prefix="contextd-remote")

    def prepare(self, force: bool = False) -> str:
        """Check the server answers with vectors of the configured dimension (one request);
        returns its URL."""
        self.embed_query("contextd probe")
        return self.client.url

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``: float32, shape (len(texts), dimension), in input order."""
        texts = list(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        started = time.perf_counter()
        counts = [estimate_tokens(t) + SPECIAL_TOKENS for t in texts]
        batches = plan_batches(counts, self.config.max_batch_items, self.config.max_batch_tokens)
        futures = [self._pool.submit(self._embed_batch, texts, counts, batch, out)
                   for batch in batches]
        try:
            _, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for future in pending:  # a failed batch fails the call: start no more requests
                future.cancel()
            wait(futures)
        finally:
            self.client.count(busy_s=time.perf_counter() - started)
        for future in futures:
            if not future.cancelled() and future.exception() is not None:
                raise future.exception()
        return out

    def _embed_batch(self, texts: list[str], counts: list[int], batch: list[int],
                     out: np.ndarray) -> None:
        answer = self.client.embed([texts[i] for i in batch], sum(counts[i] for i in batch))
        out[batch] = self._checked(answer.vectors)

    def _checked(self, vectors: list[list[float]]) -> np.ndarray:
        """The vectors as float32, checked against the configured dimension and normalised."""
        found = {len(v) for v in vectors}
        if found != {self.dimension}:
            got = ", ".join(str(n) for n in sorted(found))
            raise RemoteEmbeddingError(
                f"embedding server {self.client.url} returned {got}-dimensional vectors for "
                f"model {self.config.model!r} but [embedding] dimension is {self.dimension}; "
                f"set dimension = {max(found)} (vectors of another dimension are a new index: "
                f"the project is re-embedded)")
        matrix = np.asarray(vectors, dtype=np.float32)
        if self.config.normalize:
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        return matrix

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query: float32, shape (dimension,)."""
        return self.embed([text])[0]

    def stats(self) -> dict[str, Any]:
        """Counters for ``contextd stats`` and get_context_stats."""
        with self.client.counters_lock:
            counters = self.client.counters.as_dict()
        return {"backend": self.kind, "endpoint": self.client.url, "model": self.config.model,
                "identity": self.identity, "dimension": self.dimension,
                "query_backend": "remote (same as indexing)",
                "concurrency": self.config.concurrency, **counters}
