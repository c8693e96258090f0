"""Built-in contextualizers: ``structural`` (the default, no LLM) and ``llm``
(opt-in, an HTTP endpoint the user configures). Registered ``trylast`` so a third-party plugin
registering the same name replaces a built-in."""

from __future__ import annotations

from contextd.contextualizers.llm import LLMContextualizer
from contextd.contextualizers.structural import StructuralContextualizer
from contextd.hookspecs import hookimpl

__all__ = ["LLMContextualizer", "StructuralContextualizer"]


@hookimpl(trylast=True)
def register_contextualizers(register):
    """Offer the built-in contextualizers."""
    register(StructuralContextualizer.name, StructuralContextualizer)
    register(LLMContextualizer.name, LLMContextualizer)
