"""Typed records shared by chunkers, the store, providers, the CLI and the MCP tools.

They are plain frozen dataclasses that serialise one-to-one to JSON (``to_dict``), so the CLI's
``--json``, the MCP tools' structured content and the Python API all carry the same fields.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any


class ChunkKind(str, enum.Enum):
    """What a chunk holds (CONFIG_BLOCK: the keys of a TOML/JSON file)."""

    PARAGRAPH = "PARAGRAPH"
    CODE_FUNCTION = "CODE_FUNCTION"
    CODE_CLASS = "CODE_CLASS"
    CODE_BLOCK = "CODE_BLOCK"
    YAML_BLOCK = "YAML_BLOCK"
    CONFIG_BLOCK = "CONFIG_BLOCK"
    SQL_STATEMENT = "SQL_STATEMENT"
    MARKDOWN_SECTION = "MARKDOWN_SECTION"
    DOCSTRING = "DOCSTRING"
    COMMENT = "COMMENT"


class ProviderType(str, enum.Enum):
    """What kind of evidence a provider searches (vectors, symbols, text, history, imports, or
    several fused)."""

    SEMANTIC = "SEMANTIC"
    SYMBOL = "SYMBOL"
    FULL_TEXT = "FULL_TEXT"
    GIT_HISTORY = "GIT_HISTORY"
    DEPENDENCY = "DEPENDENCY"
    HYBRID = "HYBRID"


def to_dict(record: Any) -> Any:
    """Serialise a record (or list/dict of records) to JSON-ready values; enums become strings."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: to_dict(getattr(record, f.name)) for f in dataclasses.fields(record)}
    if isinstance(record, enum.Enum):
        return record.value
    if isinstance(record, dict):
        return {str(k): to_dict(v) for k, v in record.items()}
    if isinstance(record, (list, tuple)):
        return [to_dict(v) for v in record]
    return record


@dataclass(frozen=True)
class SymbolDef:
    """A symbol a chunk defines: ``name`` is qualified (``Class.method``), ``kind`` is
    function/method/class/interface/type/enum/struct/trait/variable/module, ``line`` 1-based."""

    name: str
    kind: str
    line: int


@dataclass(frozen=True)
class Chunk:
    """One unit of meaning cut from a file by a chunker.

    ``text`` is exactly the file's text from ``start_byte`` to ``end_byte`` (after decoding);
    lines are 1-based and inclusive. ``context`` is text the chunk needs to be understood but
    that lies elsewhere in the file (e.g. the class signature of a method); the contextualizer
    may prefix it before embedding. ``references`` are names used by the chunk (calls,
    imports, base classes) for the symbol provider and the links table.
    """

    text: str
    kind: ChunkKind
    label: str
    language: str
    start_line: int
    end_line: int
    start_byte: int
    end_byte: int
    tokens: int
    defines: tuple[SymbolDef, ...] = ()
    references: tuple[str, ...] = ()
    context: str = ""
    parent: str = ""


@dataclass(frozen=True)
class ContextScope:
    """Where to search: path globs relative to the root, languages, chunk kinds,
    exclusion globs, and file roles (source, test, doc, config: :mod:`contextd.boundary.roles`).
    Empty means no restriction.

    ``memory`` adds the agent's stashed segments (:mod:`contextd.stash`) to the project's
    context: a session id for that session's memory, ``"*"`` for every session's; None (the
    default) leaves memory out. ``memory_min_similarity`` replaces ``[stash] min_similarity``
    for that memory (lower it to cast wider, e.g. for a terse question about a raw log).

    ``files``: exact paths (root-relative; a knowledge document also by its absolute path).
    ``folders``: a bare name (``hooks``) is any folder of that name, a leading
    slash (``/src/hooks``) is relative to the project root, a pattern with glob characters
    (``src/*/hooks``) is used as it is; several folders are OR-ed, files and folders AND-ed.

    ``documents`` and ``include_project`` are set by the query path from
    :class:`~contextd.query.records.QueryRequest` ``contexts``: the knowledge documents (their
    ``kb://`` paths) inside the scope (None: every stored document, as a provider called
    directly sees them), and whether the project's own files are."""

    paths: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    exclude_patterns: tuple[str, ...] = ()
    memory: str | None = None
    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    documents: tuple[str, ...] | None = None
    include_project: bool = True
    roles: tuple[str, ...] = ()
    memory_min_similarity: float | None = None


@dataclass(frozen=True)
class TokenBudget:
    """How many tokens the rendered context may take."""

    max_tokens: int = 1500
    reserve_for_prompt: int = 500
    diversity_weight: float = 0.5


@dataclass(frozen=True)
class ContextSnippet:
    """A ranked piece of context returned by a provider and, after fusion, by ContextModule.

    ``file_path`` is relative to the project root (POSIX separators); ``score`` is in [0, 1];
    ``providers`` names every provider that returned this chunk; ``metadata`` holds
    provider-specific details (e.g. the commit of a git-history hit).
    """

    chunk_id: str
    score: float
    file_path: str
    label: str
    kind: str
    text: str
    language: str
    start_line: int
    end_line: int
    tokens: int
    providers: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskContext:
    """The result of ContextModule.get_task_context."""

    task_id: str
    query: str
    snippets: tuple[ContextSnippet, ...] = ()
    total_tokens: int = 0
    providers: dict[str, int] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # The providers whose search ran and answered (``providers`` counts only those whose
    # hits made the cut), so a reader need not guess it from the timing keys.
    searched_by: tuple[str, ...] = ()

    @classmethod
    def empty(cls, task_id: str = "", query: str = "", note: str = "") -> "TaskContext":
        """The context returned when the system is disabled or failed with fallback enabled."""
        return cls(task_id=task_id, query=query, notes=(note,) if note else ())
