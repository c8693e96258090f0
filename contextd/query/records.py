"""The records of one query: QueryRequest in, QueryResponse (with Hits) out.

They are what the CLI's ``query --json`` prints, what the MCP tool returns and what the owner
process forwards over its socket, so each serialises with :func:`contextd.records.to_dict` and
comes back with ``from_dict`` unchanged (``from_dict(json.loads(json.dumps(to_dict(r)))) == r``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contextd.query.understanding import FileHit
from contextd.records import ContextScope, ContextSnippet, to_dict
from contextd.boundary.roles import file_role


def scope_from_dict(data: dict[str, Any] | None) -> ContextScope:
    """A ContextScope from its JSON form (lists become tuples; missing keys: no restriction)."""
    data = data or {}
    documents = data.get("documents")
    return ContextScope(**{key: tuple(data.get(key) or ()) for key in
                           ("paths", "languages", "kinds", "exclude_patterns", "files",
                            "folders", "roles")},
                        documents=tuple(documents) if documents is not None else None,
                        include_project=bool(data.get("include_project", True)),
                        memory=data.get("memory") or None,
                        memory_min_similarity=data.get("memory_min_similarity"))


# ``QueryRequest.contexts`` naming this searches every knowledge context.
ALL_CONTEXTS = "*"


@dataclass(frozen=True)
class QueryRequest:
    """A query. ``None`` means "the configured default": ``k`` (query.default_k),
    ``max_tokens`` (budget.default_max_tokens minus budget.reserve_for_prompt), ``min_score``
    (applied to the calibrated hit scores, which mean the same across queries), ``providers`` (the hybrid provider plus enabled
    providers it does not combine). ``wait_for_model``: wait for the embedding model to load
    instead of answering without semantic results meanwhile (a one-shot CLI wants this; a
    long-lived server does not). ``by_file``: also rank the files the hits lie in
    (``QueryResponse.files``, at most ``k``), for a caller that wants to know which files a
    change touches rather than read snippets.

    Knowledge base (a contract: search sessions and knowledge_search call exactly this):
    ``contexts`` names knowledge contexts to search (case-insensitive; ``("*",)`` =
    :data:`ALL_CONTEXTS`, every context). None or empty: the project index only, as before
    contexts existed. ``include_project``: whether the project's own chunks are searched
    too; it matters only when ``contexts`` names some (False: documents only). Knowledge and
    project chunks go through the same providers, fusion, MMR and budget, ranked together.
    A knowledge hit's ``file_path`` is its document's ``kb://`` path and its ``metadata``
    carries ``contexts`` (names holding it, sorted), ``document`` (the absolute path it was
    read from), ``page`` (1-based page of its first line, PDFs; else None) and ``format``.
    An unknown context name raises :class:`~contextd.errors.KnowledgeError`."""

    query: str
    k: int | None = None
    scope: ContextScope = field(default_factory=ContextScope)
    max_tokens: int | None = None
    min_score: float | None = None
    providers: tuple[str, ...] | None = None
    task_id: str = ""
    wait_for_model: bool = False
    by_file: bool = False
    contexts: tuple[str, ...] | None = None
    include_project: bool = True
    mmr_lambda: float | None = None  # None: query.mmr_lambda of the configuration
    # [projects.NAME] to search, each on its own, fused under one budget ("*": all); None:
    # the whole index. Hits then carry metadata["projects"] (contextd.query.projects).
    projects: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "QueryRequest":
        providers = data.get("providers")
        return cls(query=data["query"], k=data.get("k"), scope=scope_from_dict(data.get("scope")),
                   max_tokens=data.get("max_tokens"), min_score=data.get("min_score"),
                   providers=tuple(providers) if providers is not None else None,
                   task_id=data.get("task_id", ""),
                   wait_for_model=bool(data.get("wait_for_model", False)),
                   by_file=bool(data.get("by_file", False)),
                   contexts=tuple(contexts) if (contexts := data.get("contexts")) is not None
                   else None,
                   include_project=bool(data.get("include_project", True)),
                   projects=tuple(projects) if (projects := data.get("projects")) is not None
                   else None)


@dataclass(frozen=True)
class Hit:
    """One result: where it is (``file_path`` relative to the project root, 1-based inclusive
    lines), what it is, its score in [0, 1], which providers found it, and its text.

    ``score`` means the same across queries: the fused ranking scaled by how strongly the
    query's best match is backed by the providers' raw evidence (:mod:`contextd.query.calibration`).
    ``role`` is the file's part in the project (source, test, doc, config).
    ``metadata["matched_lines"]`` numbers the lines of the snippet that hold most of the query,
    for a listing that shows why it was found rather than its first lines."""

    chunk_id: str
    file_path: str
    start_line: int
    end_line: int
    label: str
    kind: str
    language: str
    score: float
    providers: tuple[str, ...]
    snippet: str
    tokens: int
    metadata: dict[str, Any] = field(default_factory=dict)
    role: str = ""

    @classmethod
    def from_snippet(cls, snippet: ContextSnippet) -> "Hit":
        return cls(chunk_id=snippet.chunk_id, file_path=snippet.file_path,
                   start_line=snippet.start_line, end_line=snippet.end_line, label=snippet.label,
                   kind=snippet.kind, language=snippet.language, score=round(snippet.score, 6),
                   providers=tuple(snippet.providers), snippet=snippet.text,
                   tokens=snippet.tokens, metadata=dict(snippet.metadata),
                   role=file_role(snippet.file_path, snippet.language).value)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Hit":
        return cls(**{**data, "providers": tuple(data.get("providers", ())),
                      "metadata": dict(data.get("metadata") or {})})


@dataclass(frozen=True)
class FileResult:
    """One file of a ``by_file`` answer: its aggregated score (best chunk plus a decaying
    share of the others, each weighed by its relevance, see :func:`contextd.query.understanding.aggregate_files`) and the
    1-based inclusive line ranges of the candidate chunks found in it, best first."""

    file_path: str
    score: float
    ranges: tuple[tuple[int, int], ...]

    @classmethod
    def from_file_hit(cls, hit: FileHit) -> "FileResult":
        return cls(file_path=hit.file_path, score=round(hit.score, 6),
                   ranges=tuple((s.start_line, s.end_line) for s in hit.snippets))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FileResult":
        return cls(file_path=data["file_path"], score=data["score"],
                   ranges=tuple((start, end) for start, end in data.get("ranges", ())))


# The timing of the catch-up before a query (the catalog's, then the providers' in parallel:
# their indexes loaded in a cold process, or changes taken in), present when one ran.
LOAD_TIMING = "load"


@dataclass(frozen=True)
class QueryResponse:
    """Hits best first, their total tokens, hits per provider, timings and notes; ``files``
    ranked best first when the request asked ``by_file``. ``total`` counts the matches found
    (de-duplicated, above min_score) before k and the token budget cut them to ``hits``.
    ``timings_ms`` holds each provider's query, :data:`LOAD_TIMING` and ``total``;
    ``searched_by`` the providers whose search ran and answered."""

    query: str
    total: int
    hits: tuple[Hit, ...]
    total_tokens: int
    providers: dict[str, int] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    files: tuple[FileResult, ...] = ()
    searched_by: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "QueryResponse":
        return cls(query=data["query"], total=data["total"],
                   hits=tuple(Hit.from_dict(h) for h in data.get("hits", ())),
                   total_tokens=data["total_tokens"], providers=dict(data.get("providers", {})),
                   timings_ms=dict(data.get("timings_ms", {})),
                   notes=tuple(data.get("notes", ())),
                   files=tuple(FileResult.from_dict(f) for f in data.get("files", ())),
                   searched_by=tuple(data.get("searched_by", ())))
