"""``query_backend = "local"``: chunks embedded by the server, queries in-process.

A query answered locally saves a network round trip per query (ONNX int8 embeds a query in
under a millisecond), but only if the local model puts the query in the same vector space as
the server's chunks. The user declares it (the server runs ``local_model``); it is checked
once, when the embedder is first asked for a query vector (at start-up, when the module warms
the model): one probe text is embedded by both, and unless their cosine reaches
:data:`SAME_SPACE_COSINE` every query goes to the server, and stats say why.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

import numpy as np

from contextd.config.sections import EmbeddingConfig
from contextd.embedders.remote.embedder import RemoteEmbedder
from contextd.embedders.remote.protocols import Protocol
from contextd.errors import ContextdError

log = logging.getLogger(__name__)

SAME_SPACE_COSINE = 0.99
PROBE_TEXT = "def parse_config(path): read the settings file and validate every key"


class LocalQueries(RemoteEmbedder):
    """A remote embedder whose ``embed_query`` runs locally once the probe agreed; chunks
    (``embed``) and everything else are the remote embedder's own."""

    def __init__(self, config: EmbeddingConfig, protocol: Protocol):
        super().__init__(config, protocol)
        self._local_config = dataclasses.replace(config, backend="onnx",
                                                 model=config.local_model)
        self._lock = threading.Lock()
        self._local: Any = None
        self._decided = False
        self.route = "undecided: no query embedded yet"

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector from the local model when the probe agreed, else the server's
        (the first call runs the probe; ``prepare`` makes that the first call)."""
        with self._lock:
            if not self._decided:
                self._local = self._probe()
                self._decided = True
        if self._local is None:
            return super().embed_query(text)
        return self._local.embed_query(text)

    def _probe(self) -> Any:
        """The local embedder when it agrees with the server on the probe text, else None
        (with ``route`` saying why)."""
        from contextd.embedders.registry import get_embedder

        remote_vector = super().embed_query(PROBE_TEXT)  # a server error is the user's
        try:
            local = get_embedder(self._local_config)
            local_vector = local.embed_query(PROBE_TEXT)
        except ContextdError as exc:
            self.route = f"remote (local model unusable: {exc})"
            log.warning("query_backend = local refused: %s", exc)
            return None
        cosine = float(np.dot(remote_vector, local_vector) /
                       max(np.linalg.norm(remote_vector) * np.linalg.norm(local_vector), 1e-12))
        if cosine < SAME_SPACE_COSINE:
            self.route = (f"remote (local {local.identity} disagrees with the server: probe "
                          f"cosine {cosine:.3f} < {SAME_SPACE_COSINE})")
            log.warning("query_backend = local refused: %s", self.route)
            return None
        self.route = f"local ({local.identity}, probe cosine {cosine:.4f})"
        return local

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "query_backend": self.route}
