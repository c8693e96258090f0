"""Agent memory: stash context segments, retrieve them by meaning and recency,
merge them back.

An agent's window fills with things it may need again: a traceback, a decision and its
reason, research notes, a code block. It *stashes* them here (scrubbed, embedded, stored in
the project's index), later *retrieves* the ones relevant to its current step (similarity,
age and stash recency combined; reference chains followed; duplicates collapsed; a token
budget kept) and *merges* them back. Sessions are isolated unless a query asks across them.

Python API (:class:`contextd.api.memory.Memory`; it goes through the project's owner process,
like the CLI and the MCP tools, so several agents in several processes share one memory)::

    from contextd import Memory
    with Memory.open("path/to/project") as memory:
        ids = memory.stash("Traceback ... KeyError: 'user_id'", type="error_log",
                           session_id="agent-7").segment_ids
        found = memory.retrieve("the missing user id crash", session_id="agent-7")
        full = memory.merge([s.segment_id for s in found.segments])

Modules: :mod:`.model` (records), :mod:`.ranking` (the maths), :mod:`.index` (vectors in
memory), :mod:`.service` (stash/retrieve/lifecycle in the owner), :mod:`.provider` (memory in
``query_context`` when the scope asks).
"""

from __future__ import annotations

from contextd.stash.model import (
    ALL_SESSIONS, DEFAULT_SESSION, ChangeResult, GcResult, MergeResult, RetrievedSegment,
    RetrieveRequest, RetrieveResult, ScoreParts, Segment, SegmentInput, SegmentList,
    SegmentType, StashRequest, StashResult,
)

__all__ = ["ALL_SESSIONS", "DEFAULT_SESSION", "ChangeResult", "GcResult",
           "MergeResult", "RetrieveRequest", "RetrieveResult", "RetrievedSegment", "ScoreParts",
           "Segment", "SegmentInput", "SegmentList", "SegmentType", "StashRequest",
           "StashResult"]
