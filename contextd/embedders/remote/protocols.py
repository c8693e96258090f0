"""The two wire protocols: OpenAI's ``/v1/embeddings`` and Ollama's ``/api/embed``.

OpenAI's is spoken by OpenAI, Azure-style gateways, Text Embeddings Inference, vLLM,
LiteLLM, LM Studio and llama.cpp's server; Ollama speaks its own (and, since 0.2, OpenAI's
too). A protocol only knows URLs and JSON shapes; retries, batching and errors are shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextd.config.env import OLLAMA_BASE_URL, OPENAI_BASE_URL


@dataclass(frozen=True)
class Answer:
    """A parsed reply: one vector per input, in input order, and the tokens the server
    counted (None when it does not say)."""

    vectors: list[list[float]]
    tokens: int | None


@dataclass(frozen=True)
class Protocol:
    """How to ask one kind of server for embeddings."""

    kind: str
    default_base_url: str
    path: str

    def url(self, base_url: str) -> str:
        return (base_url or self.default_base_url).rstrip("/") + self.path

    def body(self, model: str, texts: list[str]) -> dict[str, Any]:
        if self.kind == "ollama":
            return {"model": model, "input": texts}
        return {"model": model, "input": texts, "encoding_format": "float"}

    def parse(self, payload: Any, expected: int) -> Answer:
        """The vectors of a 200 reply; raises ValueError when it is not the protocol's shape
        or holds another number of vectors than ``expected``."""
        if not isinstance(payload, dict):
            raise ValueError("the reply is not a JSON object")
        if self.kind == "ollama":
            vectors = payload.get("embeddings")
            tokens = payload.get("prompt_eval_count")
        else:
            data = payload.get("data")
            if not isinstance(data, list):
                raise ValueError("the reply has no 'data' list")
            # The index field says which input a vector belongs to; servers may reorder.
            ordered = sorted(data, key=lambda item: item.get("index", 0))
            vectors = [item.get("embedding") for item in ordered]
            tokens = (payload.get("usage") or {}).get("prompt_tokens")
        if not isinstance(vectors, list) or not all(isinstance(v, list) for v in vectors):
            raise ValueError("the reply holds no list of vectors")
        if len(vectors) != expected:
            raise ValueError(f"the reply holds {len(vectors)} vectors for {expected} inputs")
        return Answer(vectors, tokens if isinstance(tokens, int) else None)


OPENAI = Protocol("openai", OPENAI_BASE_URL, "/embeddings")
OLLAMA = Protocol("ollama", OLLAMA_BASE_URL, "/api/embed")
