"""Remote embedders: ``openai`` (any OpenAI-compatible ``/v1/embeddings`` server: OpenAI,
Text Embeddings Inference, vLLM, LiteLLM...) and ``ollama`` (Ollama's ``/api/embed``).

For teams that run an embedding server on a GPU box: bulk indexing goes to the server (with
batching, a concurrency limit, retries and a per-minute rate limit), while vectors are stored
under an identity naming the server's model, dimension and host, so they never mix with a
local model's. Settings come from ``[embedding]`` in context.toml, else the environment and
the project's ``.env`` (:mod:`contextd.config.env`). Importing this package does no network
I/O; nothing is sent until texts are embedded.
"""

from __future__ import annotations

from contextd.config.sections import EmbeddingConfig


def _build(config: EmbeddingConfig, protocol):
    from contextd.embedders.remote.embedder import RemoteEmbedder
    from contextd.embedders.remote.query_local import LocalQueries

    embedder = LocalQueries if config.query_backend == "local" else RemoteEmbedder
    return embedder(config, protocol)


def openai_factory(config: EmbeddingConfig):
    """An embedder for an OpenAI-compatible server."""
    from contextd.embedders.remote.protocols import OPENAI

    return _build(config, OPENAI)


def ollama_factory(config: EmbeddingConfig):
    """An embedder for an Ollama server."""
    from contextd.embedders.remote.protocols import OLLAMA

    return _build(config, OLLAMA)
