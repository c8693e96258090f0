"""Built-in embedders: ``onnx`` (ONNX Runtime, fp32 or int8), ``torch``
(sentence-transformers, the reference), and the remote ``openai`` and ``ollama``
(:mod:`contextd.embedders.remote`: an embedding server embeds for the team).

This package is the built-in plugin for :func:`contextd.hookspecs.register_embedders`.
Importing it is cheap: the backend modules, and torch/onnxruntime/sentence-transformers behind
them, load only when a factory is called or an embedder is first used. Use
:func:`contextd.embedders.registry.get_embedder` rather than these factories directly.
"""

from __future__ import annotations

from contextd.config.sections import EmbeddingConfig
from contextd.embedders.remote import ollama_factory, openai_factory
from contextd.hookspecs import hookimpl


def onnx_factory(config: EmbeddingConfig):
    """An :class:`~contextd.embedders.onnx_backend.OnnxEmbedder` for ``config``."""
    from contextd.embedders.onnx_backend import OnnxEmbedder

    return OnnxEmbedder(config)


def torch_factory(config: EmbeddingConfig):
    """A :class:`~contextd.embedders.torch_backend.TorchEmbedder` for ``config``."""
    from contextd.embedders.torch_backend import TorchEmbedder

    return TorchEmbedder(config)


@hookimpl(trylast=True)
def register_embedders(register):
    """Register the built-in backends; trylast so a third party may replace any name."""
    register("onnx", onnx_factory)
    register("torch", torch_factory)
    register("openai", openai_factory)
    register("ollama", ollama_factory)
