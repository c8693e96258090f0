"""What every context provider is and gets: the base class, its context, and shared helpers.

A provider answers ``query(query, scope, budget)`` with ranked
:class:`~contextd.records.ContextSnippet` objects whose scores lie in [0, 1]. It receives a
:class:`ProviderContext` in ``initialize``: the project, its configuration, the store and a
lazily-loading embedder handle shared by every provider of one module, and the module's
:class:`~contextd.providers.catalog.ChunkCatalog`: chunk rows, paths, definitions and
references in memory, brought up to the store's generation before each query, so a write is
visible to the very next query (never stale) while a warm query costs no database round trip.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from contextd.config.sections import ContextConfig, ProviderConfig
from contextd.providers.catalog import ChunkCatalog, ChunkEntry
from contextd.providers.spool import spool_folder
from contextd.records import ContextScope, ContextSnippet, ProviderType, TokenBudget
from contextd.boundary.roles import checked_roles, file_role
from contextd.store.base import KNOWLEDGE_PREFIX, ChunkRow, IndexStore

log = logging.getLogger(__name__)

_GLOB_CHARS = frozenset("*?[")

# How many candidates a provider returns unless asked otherwise: enough for fusion and MMR to
# choose from, a few times the default k of 12.
DEFAULT_CANDIDATES = 50


@dataclass
class QueryCounters:
    """What the providers of one query add up while answering it: for its usage_metrics row,
    query embeddings looked up in the query-vector cache and how many were found there; for
    its notes, the chunk texts the vector index it searched held no vector for yet."""

    cache_lookups: int = 0
    cache_hits: int = 0
    texts_without_vectors: int = 0


@dataclass(frozen=True)
class ProviderQuery:
    """A query as providers receive it: the text plus how many results are wanted and the
    lowest score worth returning. Providers accept a plain string too (:meth:`of`).

    ``texts`` holds the text meant for each kind of provider (keyed by
    :class:`~contextd.records.ProviderType`), built by query understanding: an embedder wants
    prose, BM25 content words, the symbol index names. :meth:`for_kind` hands each provider
    its own, so neither the providers nor the hybrid that combines them need to know.
    """

    text: str
    limit: int = DEFAULT_CANDIDATES
    min_score: float = 0.0
    # The store generation this query reads at (read once per query by the module, so the
    # providers need not ask the database again); None: ask the store.
    generation: int | None = None
    texts: Mapping[str, str] = field(default_factory=dict)
    # Shared by every copy (``for_kind``) of this query, so a hybrid's sub-providers count too.
    counters: QueryCounters = field(default_factory=QueryCounters, compare=False)

    def for_kind(self, kind: Any) -> "ProviderQuery":
        """The query as a provider of type ``kind`` should see it: ``text`` replaced by the
        text meant for that kind when there is one (``texts`` is kept, so a hybrid can pass
        it on to the providers it combines)."""
        text = self.texts.get(kind)
        return dataclasses.replace(self, text=text) if text else self

    @classmethod
    def of(cls, query: "ProviderQuery | str") -> "ProviderQuery":
        """A ProviderQuery from a ProviderQuery or a plain string."""
        return query if isinstance(query, cls) else cls(text=str(query))


class EmbedderHandle:
    """The configured embedder, loaded at most once, in the background when asked to.

    Loading the ONNX model takes seconds (much longer on the very first run, which exports
    it); a lexical or symbol answer must never wait for that, so callers ask
    :meth:`get_nowait` and treat ``None`` as "semantic results pending".
    """

    def __init__(self, config: ContextConfig):
        self._config = config
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._embedder: Any = None
        self.error: BaseException | None = None

    def start(self) -> None:
        """Begin loading in a daemon thread (no-op when loading or loaded)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._load, name="contextd-embedder",
                                                daemon=True)
                self._thread.start()

    def _load(self) -> None:
        from contextd.embedders.registry import get_embedder

        try:
            embedder = get_embedder(self._config.embedding)
            embedder.embed_query("warm up")  # first inference allocates the session's buffers
            self._embedder = embedder
        except Exception as exc:  # reported by is_available()/notes, never raised into a query
            log.warning("embedding model unavailable: %s", exc)
            self.error = exc
        finally:
            self._ready.set()

    def get_nowait(self) -> Any:
        """The embedder if loaded, else None (and loading is started)."""
        if not self._ready.is_set():
            self.start()
            return None
        return self._embedder

    def wait(self, timeout: float | None = None) -> Any:
        """Start loading if needed and wait up to ``timeout`` seconds; the embedder or None."""
        self.start()
        self._ready.wait(timeout)
        return self._embedder

    @property
    def started(self) -> bool:
        """Whether anything asked for the model yet (a query answered without semantic
        search must not start loading it just for MMR)."""
        return self._thread is not None

    @property
    def loading(self) -> bool:
        """True while the model is being loaded."""
        return self._thread is not None and not self._ready.is_set()


@dataclass
class ProviderContext:
    """What a provider is initialised with.

    ``provider`` returns another initialised provider by id (the hybrid provider fuses them);
    ``catalog`` is shared by the providers of one module (a context made without one gets its
    own).
    """

    project: Any
    config: ContextConfig
    store: IndexStore
    embedder: EmbedderHandle
    provider: Callable[[str], "ContextProvider | None"] = lambda _id: None
    extras: dict[str, Any] = field(default_factory=dict)
    catalog: ChunkCatalog | None = None

    def __post_init__(self) -> None:
        if self.catalog is None:
            self.catalog = ChunkCatalog(self.store, spool_folder(self.project))



class ContextProvider:
    """Base class of the built-in providers; third parties may subclass it or duck-type it.

    Subclasses set the class attributes ``id``, ``name`` and ``type`` (readable without
    instantiating, see the ``register_providers`` hook) and implement :meth:`query`.
    """

    id: str = ""
    name: str = ""
    type: ProviderType = ProviderType.HYBRID

    def __init__(self) -> None:
        self.context: ProviderContext | None = None

    def initialize(self, context: ProviderContext) -> None:
        """Keep the context; heavy state is built lazily on the first query."""
        self.context = context

    @property
    def settings(self) -> ProviderConfig:
        """This provider's configuration section."""
        assert self.context is not None, "initialize() was not called"
        return self.context.config.provider(self.id)

    def is_available(self) -> bool:
        """Whether the provider can answer now."""
        return self.context is not None

    def pending_note(self) -> str | None:
        """Why the provider cannot answer yet, when it will be able to later (else None)."""
        return None

    def answers_from_memory(self, generation: int | None) -> bool:
        """Whether a query at store ``generation`` is answered from in-memory state with
        nothing to catch up on (a few milliseconds). Such a provider runs on the caller's
        thread: the hand-offs to and from a pool thread cost more than the answer on a loaded
        machine. Default False: plugins, slow providers and providers with a backlog run in
        the pool, under their timeout."""
        return False

    def share_indexed(self) -> float:
        """The share of the project's chunks this provider can find (default 1.0). Fusion
        scales the provider's weight by it: a semantic index holding the first 2% of the
        vectors ranks its best among those 2% first, which says little about the project."""
        return 1.0

    def query_share(self, query: ProviderQuery) -> float:
        """The share of ``query`` this provider recognises, in [0, 1] (default 1.0). Fusion
        scales the provider's weight by it, as by :meth:`share_indexed`: a narrow provider
        (the dependency provider, which knows the names of declared packages) that
        recognises one word of an eight-word question ranks what that one word finds, which
        says little about the question ("how are pydantic models ... converted to JSON").
        Must be cheap: it is asked once per query, beside the query itself."""
        return 1.0

    @property
    def memory_index(self) -> Any:
        """The in-memory structure this provider answers from (the chunk catalog, a BM25
        index: anything with ``sync(generation)``), which :meth:`catch_up` and
        :meth:`warm_up` bring up to date with the store; None: none of its own."""
        return None

    def catch_up(self, generation: int | None) -> None:
        """Bring in-memory state up to date with the store at ``generation`` (default: sync
        :attr:`memory_index`, if any). The runner calls it before the provider's
        ``timeout_ms`` starts: on a never-queried index this loads or builds a whole index,
        which is not the slowness the timeout guards against, and cutting it off left the
        first answer without its lexical results."""
        if self.memory_index is not None:
            self.memory_index.sync(generation)

    def query(self, query: ProviderQuery, scope: ContextScope, budget: TokenBudget
              ) -> list[ContextSnippet]:
        """Ranked snippets for ``query`` (a :class:`ProviderQuery` or a string) inside
        ``scope``, best first, at most ``query.limit``."""
        raise NotImplementedError

    def warm_up(self) -> None:
        """Build in-memory state ahead of the first query (default: :attr:`memory_index`
        brought up to the store's newest rows, if there is one)."""
        if self.memory_index is not None:
            self.memory_index.sync()

    def stats(self) -> dict[str, Any]:
        """Provider-specific figures for ``contextd stats``."""
        return {}

    def shutdown(self) -> None:
        """Release resources."""


# ----- scope filtering -------------------------------------------------------------------
def path_matches(path: str, pattern: str) -> bool:
    """Whether a root-relative POSIX path falls under ``pattern``.

    A pattern without glob characters is a file or a directory prefix (``src/auth`` and
    ``src/auth/`` both match ``src/auth/jwt.py``); otherwise it is an fnmatch glob, where
    ``*`` also crosses ``/`` and a trailing ``/**`` means "anything below".
    """
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern:
        return False
    if not _GLOB_CHARS.intersection(pattern):
        stem = pattern.rstrip("/")
        return path == stem or path.startswith(stem + "/")
    if fnmatch.fnmatchcase(path, pattern):
        return True
    # "*.py" should match "src/a.py" the way .gitignore patterns without a slash do.
    return "/" not in pattern and fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern)


def folder_matches(path: str, folder: str) -> bool:
    """Whether ``path`` lies in ``folder``, one of three forms: a pattern with glob
    characters as it is (``src/*/hooks``: the path or one of its parent folders matches), a
    leading slash relative to the project root (``/src/hooks``), else a folder name or
    trailing folder path anywhere (``hooks`` matches ``src/hooks/a.py`` and
    ``lib/hooks/b.py``)."""
    folder = folder.strip()
    if not folder.strip("/"):
        return False
    if _GLOB_CHARS.intersection(folder):
        pattern = folder.lstrip("/").rstrip("/")
        if pattern.endswith("/**"):
            pattern = pattern[:-3]
        parts = path.lstrip("/").split("/")
        return any(fnmatch.fnmatchcase("/".join(parts[:end]), pattern)
                   for end in range(1, len(parts)))
    if folder.startswith("/"):
        stem = folder.strip("/")
        return path.startswith(stem + "/")
    return f"/{path.lstrip('/')}".find(f"/{folder.strip('/')}/") >= 0


def _file_key(path: str) -> str:
    """An exact file of ``scope.files`` as stored paths spell it (``./a`` and ``a`` agree)."""
    path = path.strip()
    return path[2:] if path.startswith("./") else path


class ScopeFilter:
    """A compiled :class:`ContextScope`: ``accepts(path, language, kind)``.

    A knowledge document (``kb://`` path) is inside when ``scope.documents`` is None or
    holds it, a project file when ``scope.include_project``; paths, files, folders and
    exclusions then apply to the document's own path (root-relative, or absolute outside
    the root), unless the project is searched too: then they narrow the project's files
    and the contexts alone choose the documents. Results are memoised per path, because a query checks the same few thousand
    file paths for many chunks.
    """

    def __init__(self, scope: ContextScope):
        self.scope = scope
        self.languages = {lang.lower() for lang in scope.languages}
        self.kinds = {kind.upper() for kind in scope.kinds}
        # A leading slash means the project root, as in folders; an absolute document path
        # outside the root is kept as written too.
        self.files = {key for f in scope.files
                      for key in (_file_key(f), _file_key(f).lstrip("/"))}
        self.documents = None if scope.documents is None else frozenset(scope.documents)
        self.roles = checked_roles(scope.roles)
        self.unrestricted = not (scope.paths or scope.languages or scope.kinds
                                 or scope.exclude_patterns or scope.files or scope.folders
                                 or scope.roles
                                 or self.documents is not None or not scope.include_project)
        # Only these documents can match (and no project file): the semantic index then
        # scores their rows alone instead of every row.
        self.only_documents = self.documents if not scope.include_project else None
        self._paths: dict[str, bool] = {}

    def accepts_path(self, path: str) -> bool:
        """Whether a file path is inside the scope's sources, paths, files and folders and
        outside its exclusions."""
        ok = self._paths.get(path)
        if ok is None:
            ok = self._accepts_path(path)
            self._paths[path] = ok
        return ok

    def _accepts_path(self, path: str) -> bool:
        scope = self.scope
        if path.startswith(KNOWLEDGE_PREFIX):
            if self.documents is not None and path not in self.documents:
                return False
            if scope.include_project and self.documents is not None:
                # A project query with contexts (``query "refund flow" --context rfc
                # --folder /src/payments``): the contexts choose the documents, the paths,
                # files and folders narrow the project's own files.
                return True
            path = path[len(KNOWLEDGE_PREFIX):]
        elif not scope.include_project:
            return False
        if self.files and path not in self.files:
            return False
        if scope.folders and not any(folder_matches(path, f) for f in scope.folders):
            return False
        if scope.paths and not any(path_matches(path, p) for p in scope.paths):
            return False
        return not any(path_matches(path, p) for p in scope.exclude_patterns)

    def accepts(self, path: str, language: str | None, kind: str) -> bool:
        """Whether a chunk with these attributes is inside the scope."""
        if self.unrestricted:
            return True
        if self.languages and (language or "").lower() not in self.languages:
            return False
        if self.kinds and kind.upper() not in self.kinds:
            return False
        if self.roles and file_role(path, language or "").value not in self.roles:
            return False
        return self.accepts_path(path)

    def accepts_row(self, row: ChunkEntry | ChunkRow) -> bool:
        """Whether a stored chunk (the catalog's entry or the row with its text) is inside
        the scope."""
        return self.accepts(row.file_path, row.language, row.kind)


def snippet_from_row(row: ChunkRow, score: float, provider_id: str,
                     metadata: dict[str, Any] | None = None) -> ContextSnippet:
    """A provider's snippet for a stored chunk (score clamped to [0, 1])."""
    return ContextSnippet(
        chunk_id=row.chunk_id, score=min(1.0, max(0.0, float(score))), file_path=row.file_path,
        label=row.label or "", kind=row.kind, text=row.text, language=row.language or "",
        start_line=row.start_line, end_line=row.end_line, tokens=row.tokens,
        providers=(provider_id,), metadata=dict(metadata or {}))
