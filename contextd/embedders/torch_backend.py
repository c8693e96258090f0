"""The sentence-transformers (PyTorch) embedder: the reference the ONNX backend is checked
against, loaded from the installed model package with downloads forbidden. It needs the
``torch`` extra (``pip install 'contextd[torch]'``); without it, building this backend fails
with one line that says so.

It always runs in fp32: torch dynamic int8 loses more quality than ONNX per-channel int8, and
the usual way of applying it to a SentenceTransformer silently does nothing, so
``quantize`` is ignored here and the identity says ``torch-fp32``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from contextd.config.sections import EmbeddingConfig
from contextd.embedders.common import ModelSettings, embed_sorted, require_extra
from contextd.embedders.model_files import forbid_downloads


class TorchEmbedder:
    """Embeds with sentence-transformers on the CPU; the model loads on first use."""

    prepared = True  # nothing to export: the installed package is the model

    def __init__(self, config: EmbeddingConfig):
        require_extra("the torch embedding backend", "torch", "torch", "sentence_transformers")
        self.settings = ModelSettings.resolve(config, "torch", "fp32")
        self.identity = self.settings.identity
        self.dimension = self.settings.dimension
        self.model_path: Path = self.settings.files.path
        self._explicit_threads = config.threads
        self._lock = threading.Lock()
        self._model = None

    def prepare(self, force: bool = False) -> Path:
        """Load the model now (there is nothing to write); returns the model directory."""
        self._load()
        return self.model_path

    def _load(self):
        with self._lock:
            if self._model is None:
                forbid_downloads()
                import torch
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging

                # A "Loading weights" bar on every load (and every ONNX export) is noise on
                # a CLI's stderr; progress that matters is ours.
                transformers_logging.disable_progress_bar()

                if self._explicit_threads:
                    torch.set_num_threads(self._explicit_threads)
                model = SentenceTransformer(str(self.model_path), device="cpu")
                model.max_seq_length = self.settings.max_length
                self._model = model
            return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self._load().encode(texts, batch_size=len(texts), convert_to_numpy=True,
                                   normalize_embeddings=self.settings.normalize,
                                   show_progress_bar=False).astype(np.float32, copy=False)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``: float32, shape (len(texts), dimension), in input order."""
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        texts = list(texts)
        # Character length is a good enough proxy for token length to group similar sizes.
        return embed_sorted([len(t) for t in texts], self.settings.batch_size, self.dimension,
                            lambda idx: self._encode([texts[i] for i in idx]))

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query: float32, shape (dimension,)."""
        return self._encode([text])[0]
