"""The indexer: bootstrap, resume, incremental refresh and the embedding stage.

Modules: :mod:`.plan` (scan and change detection, priority order), :mod:`.worker` (per-file
read, hash, scrub, chunk, and the one call of the contextualizer stage), :mod:`.pipeline`
(worker pool and batched atomic writes), :mod:`.embed_stage` (vectors beside chunking) and
:mod:`.core` (the :class:`Indexer`).
"""

from typing import Any

from contextd.indexer.report import IndexReport

__all__ = ["Indexer", "IndexReport"]


def __getattr__(name: str) -> Any:
    """``Indexer`` on first use: a thin client that only rebuilds an IndexReport from the
    owner's answer must not import DuckDB, numpy and the embedders for it (about half of a
    cold ``contextd query``'s CPU time when an owner serves it)."""
    if name == "Indexer":
        from contextd.indexer.core import Indexer

        return Indexer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
