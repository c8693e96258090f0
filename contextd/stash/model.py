"""The records of agent memory: what an agent hands over, what it gets back.

They are plain dataclasses that serialise one-to-one to JSON (:func:`contextd.records.to_dict`)
and rebuild from it (:func:`contextd.runtime.rpc.from_dict`), so the MCP tools, the CLI's ``--json``,
the Python API and the owner socket all carry the same fields. Times cross every boundary as
ISO 8601 strings in UTC.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from contextd.errors import UsageError


class SegmentType(str, enum.Enum):
    """What a segment holds."""

    MESSAGE = "message"
    CODE_BLOCK = "code_block"
    FILE_CONTENT = "file_content"
    ERROR_LOG = "error_log"
    DEBUG_OUTPUT = "debug_output"
    TASK_STATE = "task_state"
    DECISION = "decision"
    RESEARCH = "research"

    @classmethod
    def parse(cls, value: str) -> "SegmentType":
        """The type named ``value``; a UsageError listing the choices otherwise."""
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise UsageError(f"unknown segment type {value!r}; choose from: "
                             f"{', '.join(t.value for t in cls)}") from None


DEFAULT_SESSION = "default"
# A session filter meaning "every session" (sessions are isolated unless a query asks).
ALL_SESSIONS = "*"
# Bounds of a retrieval's top_k and max_hops.
MAX_TOP_K = 100
MAX_HOPS_LIMIT = 10


def parse_time(value: str | None, what: str) -> datetime | None:
    """An ISO 8601 time as a naive UTC datetime (a time without offset is taken as UTC);
    None for None or ''. A UsageError naming ``what`` when it does not parse."""
    if value is None or value == "":
        return None
    try:
        parsed = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{what}: {value!r} is not an ISO 8601 date or time, e.g. "
                         "2026-11-23 or 2026-11-23T14:05:00Z") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return parsed


def iso(value: datetime | None) -> str | None:
    """A naive UTC datetime as ISO 8601 with a Z."""
    return None if value is None else value.isoformat(timespec="seconds") + "Z"


@dataclass(frozen=True)
class SegmentInput:
    """One segment handed over by an agent. ``segment_id`` is normally left empty: the
    caller's side of the owner socket fills it in, so a call retried after an owner crash
    stores each segment once. ``timestamp`` is when the content came to be (ISO; default
    now)."""

    text: str
    type: str = SegmentType.MESSAGE.value
    topic: str | None = None
    source: str | None = None
    session_id: str = DEFAULT_SESSION
    references: tuple[str, ...] = ()
    timestamp: str | None = None
    segment_id: str = ""


@dataclass(frozen=True)
class StashRequest:
    """stash_context: segments plus their lifecycle (``expires_in_days`` None: the
    configured default; 0: never)."""

    segments: tuple[SegmentInput, ...]
    expires_in_days: float | None = None
    protected: bool = False


@dataclass(frozen=True)
class StashResult:
    """What stashing did: ids in input order, and the tokens the agent may now drop."""

    segment_ids: tuple[str, ...]
    tokens_freed: int
    secrets_redacted: int = 0


@dataclass(frozen=True)
class Segment:
    """A stored segment as callers see it."""

    segment_id: str
    session_id: str
    text: str
    type: str
    created_at: str
    stashed_at: str
    tokens: int
    topic: str | None = None
    source: str | None = None
    references: tuple[str, ...] = ()
    referenced_by: tuple[str, ...] = ()
    embedding_model: str | None = None
    expires_at: str | None = None
    protected: bool = False


@dataclass(frozen=True)
class RetrieveRequest:
    """retrieve_stashed_context. ``session_id`` restricts to one session (isolation);
    ``all_sessions`` searches every session. Unset numbers take the ``[stash]`` defaults."""

    query: str
    top_k: int | None = None
    min_similarity: float | None = None
    session_id: str = DEFAULT_SESSION
    all_sessions: bool = False
    types: tuple[str, ...] = ()
    topic: str | None = None
    since: str | None = None
    until: str | None = None
    max_tokens: int | None = None
    max_hops: int | None = None


@dataclass(frozen=True)
class ScoreParts:
    """The parts of a retrieval score: ``score = weights . (similarity, age, recency)``
    for a direct hit, times ``reference_decay ** hops`` for a segment reached through
    references (``hops`` 0 for direct hits)."""

    similarity: float
    age: float
    recency: float
    hops: int = 0


@dataclass(frozen=True)
class RetrievedSegment:
    """One retrieval result: a preview of the text (merge_stashed_context gives it all)."""

    segment_id: str
    text: str
    type: str
    session_id: str
    topic: str | None
    source: str | None
    created_at: str
    stashed_at: str
    tokens: int
    similarity: float
    score: float
    score_parts: ScoreParts
    reached_from: str | None = None
    duplicates: tuple[str, ...] = ()
    protected: bool = False


@dataclass(frozen=True)
class RetrieveResult:
    """retrieve_stashed_context's answer; ``total_found`` counts matches before top_k, the
    dedupe and the budget cut the list."""

    query: str
    segments: tuple[RetrievedSegment, ...]
    total_found: int
    total_tokens: int
    timings_ms: dict[str, float] = field(default_factory=dict)
    # Why the answer is empty (or thinner than it could be): the best similarity seen below
    # the cut-off, and segments of other sessions that would match.
    min_similarity: float | None = None
    best_similarity: float | None = None
    sessions: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class MergeResult:
    """merge_stashed_context: full segments to put back in the window."""

    segments: tuple[Segment, ...]
    tokens_added: int
    removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class SegmentList:
    """A page of stored segments (list tool, ``contextd stash show``)."""

    segments: tuple[Segment, ...]
    total: int


@dataclass(frozen=True)
class ChangeResult:
    """delete / protect: the ids changed."""

    segment_ids: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class GcResult:
    """What gc removed, by reason; protected segments are never among them."""

    expired: tuple[str, ...]
    aged_out: tuple[str, ...]
    remaining: int


def new_segment_id() -> str:
    """A fresh segment id (short, unique, safe in a shell)."""
    return f"seg-{uuid.uuid4().hex[:16]}"


def with_ids(request: StashRequest) -> StashRequest:
    """The request with a fresh id on every segment that has none, given in the calling
    process before the call leaves it (see :meth:`contextd.runtime.owner.SharedEngine.stash`). This
    module is light on purpose: a tool thread imports it while the engine's thread may be
    importing the providers."""
    return replace(request, segments=tuple(
        item if item.segment_id else replace(item, segment_id=new_segment_id())
        for item in request.segments))
