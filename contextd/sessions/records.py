"""The records of search sessions: what search_knowledge, get_search_results and
list_search_results take and answer, in every surface (MCP tools, CLI ``--json``, the owner
socket). Plain frozen dataclasses, so :func:`contextd.records.to_dict` and
:func:`contextd.runtime.rpc.from_dict` carry them across processes unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SearchRequest:
    """One search_knowledge call. ``files`` and ``folders`` are the search's scope (see
    :mod:`contextd.sessions.scope`); ``contexts`` names knowledge contexts to search beside
    the project index; ``min_similarity`` None means ``sessions.min_similarity``."""

    query: str
    min_similarity: float | None = None
    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    contexts: tuple[str, ...] = ()


@dataclass(frozen=True)
class SessionHit:
    """One kept result: where it is (root-relative ``file_path``, 1-based inclusive lines;
    ``pages`` for documents), a ``file://`` URI of the file, what it is and its full text."""

    rank: int
    chunk_id: str
    file_path: str
    file_uri: str
    start_line: int
    end_line: int
    label: str
    kind: str
    language: str
    score: float
    text: str
    tokens: int
    pages: tuple[int, ...] = ()
    document: str = ""
    contexts: tuple[str, ...] = ()
    session_id: str = ""

    def location(self) -> str:
        """``path:start-end`` (``path p.3-4`` for a document with pages)."""
        if self.pages:
            first, last = self.pages[0], self.pages[-1]
            return f"{self.file_path} p.{first}" + (f"-{last}" if last != first else "")
        last = f"-{self.end_line}" if self.end_line != self.start_line else ""
        return f"{self.file_path}:{self.start_line}{last}"


@dataclass(frozen=True)
class SessionInfo:
    """A session without its results; times are ISO 8601 UTC (``expires_at`` empty when
    sessions do not expire)."""

    session_id: str
    query: str
    created_at: str
    expires_at: str
    result_count: int
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchSession:
    """The answer of search_knowledge: the new session and a preview of its best results
    (their text shortened)."""

    session: SessionInfo
    preview: tuple[SessionHit, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchResults:
    """The answer of get_search_results: the sessions asked for, and up to ``limit`` full
    results of each, in the order the sessions were given. ``omitted`` counts results left out
    to keep one answer within what agents accept."""

    sessions: tuple[SessionInfo, ...]
    results: tuple[SessionHit, ...]
    omitted: int = 0
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SessionList:
    """The answer of list_search_results: live sessions, newest first."""

    sessions: tuple[SessionInfo, ...]
    max_sessions: int
    expire_after_hours: float


@dataclass(frozen=True)
class ReportRequest:
    """One create_rag_report call (see the tool for the fields' meaning)."""

    variables: dict[str, Any]
    template: str | None = None
    output_dir: str | None = None
    file_name: str | None = None
    ascii_filename: str | None = None
    overwrite: bool = False


@dataclass(frozen=True)
class ReportResult:
    """A written report: its path, URI, template, citation count, warnings and first lines."""

    path: str
    file_uri: str
    template: str
    citations: int
    size_bytes: int
    warnings: tuple[str, ...]
    preview: str
