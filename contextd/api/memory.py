"""Memory: agent memory of one project for orchestrators and scripts (seed 001).

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
from contextd.runtime.owner import connect
from contextd.stash.model import (
    DEFAULT_SESSION, ChangeResult, GcResult, MergeResult, RetrieveRequest, RetrieveResult,
    SegmentInput, SegmentList, StashRequest, StashResult,
)


class Memory:
    """Agent memory of one project, for orchestrators and scripts.

    Wraps the project's shared Engine (:func:`contextd.runtime.owner.connect`): this process
    becomes the owner of the index or talks to the one that is.
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

    def merge(self, segment_ids: Sequence[str], remove: bool = False) -> MergeResult:
        """Full segments to put back into the window (``remove``: and forget them)."""
        return self.engine.merge_stashed(list(segment_ids), remove=remove)

    def get(self, segment_ids: Sequence[str]) -> SegmentList:
        """Segments by id."""
        return self.engine.get_stashed(list(segment_ids))

    def list(self, **filters: Any) -> SegmentList:
        """Stored segments, newest first (session_id, all_sessions, types, topic, limit,
        offset)."""
        return self.engine.list_stashed(**filters)

    def delete(self, segment_ids: Sequence[str]) -> ChangeResult:
        """Forget segments."""
        return self.engine.delete_stashed(list(segment_ids))

    def protect(self, segment_ids: Sequence[str], protected: bool = True) -> ChangeResult:
        """Protect segments from expiry and gc (or lift the protection)."""
        return self.engine.protect_stashed(list(segment_ids), protected=protected)

    def gc(self) -> GcResult:
        """Collect expired and aged-out unprotected segments."""
        return self.engine.gc_stash()

    def close(self) -> None:
        """Let go of the project (another process takes ownership if this one had it)."""
        self.engine.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
