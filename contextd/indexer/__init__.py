"""The indexer: bootstrap, resume, incremental refresh and the embedding stage.

Modules: :mod:`.plan` (scan and change detection, priority order), :mod:`.worker` (per-file
read, hash, scrub, chunk, and the one call of the contextualizer stage), :mod:`.pipeline`
(worker pool and batched atomic writes), :mod:`.embed_stage` (vectors beside chunking) and
:mod:`.core` (the :class:`Indexer`).
"""

from contextd.indexer.core import Indexer
from contextd.indexer.report import IndexReport

__all__ = ["Indexer", "IndexReport"]
