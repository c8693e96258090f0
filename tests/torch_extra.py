"""Tests that need the ``torch`` extra (torch, sentence-transformers): the reference backend
and the comparisons of the torch-free ONNX graph with ``torch.onnx.export``.

They carry the ``torch`` marker (CI's second session runs ``-m torch`` in a venv with the
extra) and are skipped where the extra is not installed, unless CONTEXTD_REQUIRE_TORCH is set:
then they run and fail, so a CI session meant to test torch cannot pass by skipping.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest


def torch_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None
               for name in ("torch", "sentence_transformers"))


def requires_torch(test):
    """Mark ``test`` as needing the torch extra (see the module docstring)."""
    skip = pytest.mark.skipif(
        not torch_installed() and not os.environ.get("CONTEXTD_REQUIRE_TORCH"),
        reason="needs the torch extra: pip install 'contextd[torch]'")
    return pytest.mark.torch(skip(test))


def block_torch(monkeypatch) -> None:
    """Make torch, transformers and sentence-transformers impossible to import in this
    process (a ``None`` entry in sys.modules is Python's own "not importable"), as in a
    default install: in a venv without the extra it changes nothing."""
    for name in ("torch", "transformers", "sentence_transformers"):
        monkeypatch.setitem(sys.modules, name, None)
