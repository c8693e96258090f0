"""The agent-memory MCP tools (docs/MCP.md, "Agent memory"): contextd does not own the agent's
window, so the agent hands the text over when it stashes and takes it back when it merges.

stash_context → retrieve_stashed_context → merge_stashed_context, plus list, delete and
protect to keep memory tidy. Each is a thin layer over one Engine method (which runs in the
project's owner process), answering with the same records as the CLI's ``--json`` and the
Python API (:mod:`contextd.stash.model`). Field names are snake_case, as in those records.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from contextd.records import to_dict
from contextd.stash.model import (
    ALL_SESSIONS, DEFAULT_SESSION, MAX_HOPS_LIMIT, MAX_TOP_K, ChangeResult, MergeResult,
    RetrieveRequest, RetrieveResult, SegmentInput, SegmentList, SegmentType, StashRequest,
    StashResult,
)
from contextd.mcp.tool_kinds import APPEND, DELETE, READ, RESET, WRITE, tool

TypeName = Literal[tuple(t.value for t in SegmentType)]  # type: ignore[valid-type]
SESSION_HELP = (f"Your session id (default {DEFAULT_SESSION!r}); sessions are isolated, so use "
                "the same one to stash and to retrieve.")
IDS_HELP = "Segment ids returned by stash_context or retrieve_stashed_context."


class SegmentIn(BaseModel):
    """One segment to stash."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="The content, as it was in your context (secrets are "
                                  "redacted before storing).")
    type: TypeName = Field("message", description="What it is.")  # type: ignore[valid-type]
    topic: str | None = Field(None, description="A tag to filter on later, e.g. 'auth-bug'.")
    source: str | None = Field(None, description="Where it came from: a file path, a command, "
                                                 "a message id.")
    session_id: str = Field(DEFAULT_SESSION, description=SESSION_HELP)
    references: list[str] = Field(default_factory=list, description=(
        "Ids of stashed segments this one refers to (retrieval follows these chains)."))
    timestamp: str | None = Field(None, description="When the content came to be (ISO 8601; "
                                                     "default now).")


class RetrieveFilters(BaseModel):
    """Filters of retrieve_stashed_context."""

    model_config = ConfigDict(extra="forbid")

    types: list[TypeName] = Field(default_factory=list,  # type: ignore[valid-type]
                                  description="Only these segment types.")
    topic: str | None = Field(None, description="Only this topic.")
    since: str | None = Field(None, description="Only segments created at or after (ISO).")
    until: str | None = Field(None, description="Only segments created at or before (ISO).")


def _answer(record: Any, text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=to_dict(record))


def _retrieve_text(result: RetrieveResult) -> str:
    lines = [f"{len(result.segments)} stashed segment(s) for {result.query!r} "
             f"({result.total_tokens} tokens; merge_stashed_context gives the full text)"]
    lines += [f"Note: {note}" for note in result.notes]
    for item in result.segments:
        via = f" via {item.reached_from}" if item.reached_from else ""
        lines.append(f"- {item.segment_id} [{item.type}{', ' + item.topic if item.topic else ''}"
                     f"] score {item.score:.3f} (similarity {item.similarity:.3f}){via}\n"
                     f"  {item.text[:200]}")
    return "\n".join(lines)


class StashTools:
    """The tool functions; their signatures and docstrings are the tools' schemas."""

    GROUP = "memory"  # the tool group (`serve --tools memory`)

    def __init__(self, handle: Any):
        self.handle = handle

    @tool(APPEND)
    def stash_context(
        self,
        segments: Annotated[list[SegmentIn], Field(min_length=1, max_length=500, description=(
            "Segments to stash (text plus what they are)."))],
        expires_in_days: Annotated[float | None, Field(ge=0, description=(
            "Forget them after this many days (0 = never; default from [stash] "
            "default_ttl_days)."))] = None,
        protected: Annotated[bool, Field(description=(
            "Never expire or garbage-collect them."))] = False,
    ) -> Annotated[CallToolResult, StashResult]:
        """Stash context you may need again (a stack trace, a decision and its reason,
        research notes, a code block) so you can drop it from your window.

        Returns segment_ids (keep them, or find the segments later by meaning with
        retrieve_stashed_context) and tokens_freed. Nothing is stored if any segment is
        invalid (empty text, unknown reference, too large).
        """
        request = StashRequest(segments=tuple(
            SegmentInput(text=s.text, type=s.type, topic=s.topic, source=s.source,
                         session_id=s.session_id, references=tuple(s.references),
                         timestamp=s.timestamp) for s in segments),
            expires_in_days=expires_in_days, protected=protected)
        result = self.handle.get().stash(request)
        return _answer(result, f"Stashed {len(result.segment_ids)} segment(s): "
                               f"{', '.join(result.segment_ids)} ({result.tokens_freed} tokens "
                               "freed).")

    @tool(READ)
    def retrieve_stashed_context(
        self,
        query: Annotated[str, Field(min_length=1, max_length=4000, description=(
            "What you need now, in your own words (a paraphrase works)."))],
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description="Most hits.")] = 5,
        min_similarity: Annotated[float | None, Field(ge=-1.0, le=1.0, description=(
            "Cosine similarity cut-off (default [stash] min_similarity, calibrated on the "
            "embedding model; an empty answer says the best similarity it saw)."))] = None,
        session_id: Annotated[str, Field(min_length=1, description=SESSION_HELP)]
        = DEFAULT_SESSION,
        all_sessions: Annotated[bool, Field(description=(
            "Search every session's memory, not only session_id's."))] = False,
        filters: Annotated[RetrieveFilters | None, Field(description="Narrow the search.")]
        = None,
        max_tokens: Annotated[int | None, Field(ge=1, description=(
            "Token budget of the segments returned (default [stash] "
            "default_max_tokens)."))] = None,
        max_hops: Annotated[int | None, Field(ge=0, le=MAX_HOPS_LIMIT, description=(
            "Reference chains followed from each hit (default 2)."))] = None,
    ) -> Annotated[CallToolResult, RetrieveResult]:
        """Find stashed segments relevant to what you are doing now.

        Ranks by meaning (similarity), age of the content and how recently it was stashed
        (score and its parts are returned), collapses duplicates, adds segments the hits
        reference (reached_from says which), and keeps to a token budget. Returns previews;
        call merge_stashed_context with the segment_ids you want back in full.
        """
        filters = filters or RetrieveFilters()
        result = self.handle.get().retrieve_stashed(RetrieveRequest(
            query=query, top_k=top_k, min_similarity=min_similarity,
            session_id=ALL_SESSIONS if all_sessions else session_id,
            all_sessions=all_sessions, types=tuple(filters.types), topic=filters.topic,
            since=filters.since, until=filters.until, max_tokens=max_tokens,
            max_hops=max_hops))
        return _answer(result, _retrieve_text(result))

    @tool(DELETE)
    def merge_stashed_context(
        self,
        segment_ids: Annotated[list[str], Field(min_length=1, max_length=500,
                                                description=IDS_HELP)],
        remove: Annotated[bool, Field(description=(
            "Also forget them (you will not need them stashed again)."))] = False,
    ) -> Annotated[CallToolResult, MergeResult]:
        """Bring stashed segments back: their full text, to put back into your context.
        Returns the segments and tokens_added."""
        result = self.handle.get().merge_stashed(segment_ids, remove=remove)
        text = "\n\n".join(f"--- {s.segment_id} [{s.type}] ---\n{s.text}"
                           for s in result.segments)
        return _answer(result, f"{text}\n\n({result.tokens_added} tokens)")

    @tool(READ)
    def list_stashed_context(
        self,
        session_id: Annotated[str, Field(min_length=1, description=SESSION_HELP)]
        = DEFAULT_SESSION,
        all_sessions: Annotated[bool, Field(description="List every session's.")] = False,
        types: Annotated[list[TypeName] | None, Field(  # type: ignore[valid-type]
            description="Only these types.")] = None,
        topic: Annotated[str | None, Field(description="Only this topic.")] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="Page size.")] = 50,
        offset: Annotated[int, Field(ge=0, description="Skip this many.")] = 0,
        include_expired: Annotated[bool, Field(description=(
            "Also list expired segments not yet collected by gc."))] = False,
    ) -> Annotated[CallToolResult, SegmentList]:
        """List your stashed segments, newest first (full text, expiry, protection), to
        review or tidy your memory. Expired segments are left out (they are no longer
        retrieved) unless include_expired."""
        result = self.handle.get().list_stashed(session_id=session_id,
                                                all_sessions=all_sessions, types=types or (),
                                                topic=topic, limit=limit, offset=offset,
                                                include_expired=include_expired)
        lines = [f"{result.total} segment(s)"] + [
            f"- {s.segment_id} [{s.type}] {s.tokens} tokens, stashed {s.stashed_at}"
            f"{', protected' if s.protected else ''}: {s.text[:120]!r}"
            for s in result.segments]
        return _answer(result, "\n".join(lines))

    @tool(RESET)
    def delete_stashed_context(
        self,
        segment_ids: Annotated[list[str], Field(min_length=1, max_length=1000,
                                                description=IDS_HELP)],
    ) -> Annotated[CallToolResult, ChangeResult]:
        """Forget stashed segments for good, when they are wrong or no longer useful.
        All ids must exist: an unknown id is an error and deletes nothing."""
        result = self.handle.get().delete_stashed(segment_ids)
        return _answer(result, f"Deleted {result.count} segment(s).")

    @tool(WRITE)
    def protect_stashed_context(
        self,
        segment_ids: Annotated[list[str], Field(min_length=1, max_length=1000,
                                                description=IDS_HELP)],
        protected: Annotated[bool, Field(description=(
            "true: never expire or collect them; false: lift the protection."))] = True,
    ) -> Annotated[CallToolResult, ChangeResult]:
        """Protect stashed segments from expiry and garbage collection (or lift the
        protection with protected=false): for decisions and facts that stay true."""
        result = self.handle.get().protect_stashed(segment_ids, protected=protected)
        state = "Protected" if protected else "Unprotected"
        return _answer(result, f"{state} {result.count} segment(s).")
