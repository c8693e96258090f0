"""Memory: agent memory of one project for orchestrators and scripts (README.md, "Agent memory").

    from contextd import Memory
    with Memory.open("path/to/project") as memory:
        ids = memory.stash("Traceback ... KeyError: 'user_id'", type="error_log",
                           session_id="agent-7").segment_ids
        found = memory.retrieve("the missing user id crash", session_id="agent-7")
        full = memory.merge([s.segment_id for s in found.segments])

It goes through the project's owner process (:func:`contextd.runtime.owner.connect`), like the
CLI and the MCP tools, so several agents in several processes share one memory.
"""

from __future__ import annotations

from typing import Any, Sequence

from contextd.config.project import Project
from contextd.operations import expose
from contextd.runtime.owner import connect
from contextd.stash.model import (
    DEFAULT_SESSION, RetrieveRequest, RetrieveResult, SegmentInput, StashRequest, StashResult,
)


class Memory:
    """Agent memory of one project, for orchestrators and scripts.

    Wraps the project's shared Engine (:func:`contextd.runtime.owner.connect`): this process
    becomes the owner of the index or talks to the one that is. Besides :meth:`stash` and
    :meth:`retrieve`, its methods are the memory operations that name ``Memory`` in their
    declaration (:mod:`contextd.operations.memory`): ``merge(segment_ids, remove=False)``,
    ``get(segment_ids)``, ``list(session_id=..., all_sessions=..., types=..., topic=...,
    limit=..., offset=..., include_expired=...)``, ``delete(segment_ids)``,
    ``protect(segment_ids, protected=True)`` and ``gc()``.
    """

    def __init__(self, engine: Any):
        self.engine = engine

    @classmethod
    def open(cls, root: str | None = None, config_path: str | None = None) -> "Memory":
        """The memory of a project directory (detected from the cwd when None)."""
        return cls(connect(Project.open(root, config_path)))

    def stash(self, segments: str | SegmentInput | Sequence[SegmentInput], *,
              type: str = "message", topic: str | None = None, source: str | None = None,
              session_id: str = DEFAULT_SESSION, references: Sequence[str] = (),
              timestamp: str | None = None, expires_in_days: float | None = None,
              protected: bool = False) -> StashResult:
        """Stash one text (with the keyword fields) or ready SegmentInputs."""
        if isinstance(segments, str):
            segments = [SegmentInput(text=segments, type=type, topic=topic, source=source,
                                     session_id=session_id, references=tuple(references),
                                     timestamp=timestamp)]
        elif isinstance(segments, SegmentInput):
            segments = [segments]
        return self.engine.stash(StashRequest(tuple(segments), expires_in_days, protected))

    def retrieve(self, query: str, **options: Any) -> RetrieveResult:
        """Segments relevant to ``query``; options are the fields of RetrieveRequest
        (top_k, min_similarity, session_id, all_sessions, types, topic, since, until,
        max_tokens, max_hops)."""
        if "types" in options:
            options["types"] = tuple(options["types"])
        return self.engine.retrieve_stashed(RetrieveRequest(query=query, **options))

    def close(self) -> None:
        """Let go of the project (another process takes ownership if this one had it)."""
        self.engine.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


expose(Memory, via="engine")
