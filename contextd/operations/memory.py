"""Operations of agent memory (:mod:`contextd.stash`)."""

from __future__ import annotations

from typing import Any, Sequence

from contextd.operations.declare import operation
from contextd.stash.model import (
    ChangeResult, GcResult, MergeResult, RetrieveRequest, RetrieveResult, SegmentList,
    StashRequest, StashResult, with_ids,
)


def _ids_given_here(params: dict[str, Any]) -> dict[str, Any]:
    """Segment ids are given before the call leaves this process, so a call retried on a new
    owner (the old one died after committing) finds its segments instead of storing them
    twice."""
    return {**params, "request": with_ids(params["request"])}


@operation(mcp=("stash_context",), cli=("stash",), prepare=_ids_given_here)
def stash(engine, request: StashRequest) -> StashResult:
    """Stash segments."""
    return engine.module.stash.stash(request)


@operation(mcp=("retrieve_stashed_context",), cli=("stash",))
def retrieve_stashed(engine, request: RetrieveRequest) -> RetrieveResult:
    """Rank stashed segments for a request."""
    return engine.module.stash.retrieve(request)


@operation(mcp=("merge_stashed_context",), api=("Memory.merge",))
def merge_stashed(engine, segment_ids: Sequence[str], remove: bool = False) -> MergeResult:
    """Full segments to merge back (and optionally forget)."""
    return engine.module.stash.merge(segment_ids, remove=remove)


@operation(cli=("stash",), api=("Memory.get",))
def get_stashed(engine, segment_ids: Sequence[str]) -> SegmentList:
    """Segments by id."""
    return engine.module.stash.get(segment_ids)


@operation(mcp=("list_stashed_context",), cli=("stash",), api=("Memory.list",))
def list_stashed(engine, session_id: str = "", all_sessions: bool = False,
                 types: Sequence[str] = (), topic: str | None = None, limit: int = 50,
                 offset: int = 0, include_expired: bool = False) -> SegmentList:
    """A page of stored segments, newest first (expired ones only when asked)."""
    return engine.module.stash.list(session_id=session_id, all_sessions=all_sessions,
                                    types=types, topic=topic, limit=limit,
                                    offset=offset, include_expired=include_expired)


@operation(mcp=("delete_stashed_context",), cli=("stash",), api=("Memory.delete",))
def delete_stashed(engine, segment_ids: Sequence[str]) -> ChangeResult:
    """Forget segments."""
    return engine.module.stash.delete(segment_ids)


@operation(mcp=("protect_stashed_context",), cli=("stash",), api=("Memory.protect",))
def protect_stashed(engine, segment_ids: Sequence[str], protected: bool = True
                    ) -> ChangeResult:
    """Protect segments from expiry and gc (or lift it)."""
    return engine.module.stash.protect(segment_ids, protected=protected)


@operation(cli=("stash",), api=("Memory.gc",))
def gc_stash(engine) -> GcResult:
    """Collect expired and aged-out unprotected segments."""
    return engine.module.stash.gc()
