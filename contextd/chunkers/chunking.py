"""Which chunker handles a file, and chunking a file's bytes under the model's window.

Everything that chunks goes through :func:`chunk_file`: it decodes the bytes (BOM stripped,
invalid UTF-8 replaced and reported, CRLF and lone CR normalised to LF so lines count the way
editors show them), caps the language's ``max_tokens`` at the embedding window minus room for
a context prefix, runs the chunker, and then enforces the two invariants for any chunker,
third-party ones included: every non-blank line lands in a chunk (uncovered stretches become
extra chunks) and no chunk's estimated tokens pass the cap (oversize chunks are cut).
Offsets in the chunks are into the UTF-8 encoding of the decoded, normalised text, which
:func:`decode_text` returns.
"""

from __future__ import annotations

import codecs
import dataclasses
import functools
import logging
import os
from dataclasses import dataclass

from contextd.chunkers.core import Source, UnparsableFile, split_span
from contextd.config.sections import ContextConfig, LanguageChunking
from contextd.plugins.manager import Registration, collect, plugin_version
from contextd.records import Chunk, ChunkKind

log = logging.getLogger(__name__)

# Tokens kept free in the model's window for the prefix a contextualizer may add to a chunk.
CONTEXT_PREFIX_TOKENS = 32
FALLBACK_LANGUAGE = "text"
# Bumped by a code change that moves chunk boundaries, so existing indexes are re-chunked
# (see chunking_signature). 3: a definition header is never a chunk alone, heading-only
# Markdown sections join their content (issue 14). 4: the grammars come from one wheel per
# language instead of tree-sitter-language-pack; Kotlin's (tree-sitter-kotlin 1.1) is another
# grammar, so its units and cut points move, and a few Python cut points move (issue 29).
CHUNKING_VERSION = 4


@dataclass(frozen=True)
class ChunkedFile:
    """The chunks of one file, its language and what went wrong while decoding or chunking."""

    language: str
    chunks: list[Chunk]
    warnings: tuple[str, ...] = ()
    # Why the chunker could not cut the file (it was then cut into line windows): the indexer
    # records it in bootstrap_errors while the file's windows stay searchable.
    parse_error: str | None = None


@functools.lru_cache(maxsize=1)
def _registered() -> dict[str, Registration]:
    """Every registered chunker by name, with the plugin that registered it."""
    return collect("register_chunkers", key=lambda args: args[0].name)


@functools.lru_cache(maxsize=1)
def _registry() -> tuple[dict[str, object], dict[str, object], dict[str, object]]:
    """(by name, by exact file name, by extension); the first claim of a file name or an
    extension wins, in plugin order (third parties before built-ins)."""
    by_name = {name: reg.value for name, reg in _registered().items()}
    by_filename: dict[str, object] = {}
    by_extension: dict[str, object] = {}
    for chunker in by_name.values():
        for filename in getattr(chunker, "filenames", ()) or ():
            by_filename.setdefault(filename, chunker)
        for extension in chunker.extensions:
            by_extension.setdefault(extension.lower(), chunker)
    return by_name, by_filename, by_extension


def claimed_extensions() -> frozenset[str]:
    """The extensions third-party chunkers claim: what the boundary indexes besides the
    default allowed_extensions, so that installing a chunker plugin for a format is enough
    to index it. The built-ins' formats are the default list's to decide (their text
    chunker reads .log files, which a project's index should not take by default)."""
    return frozenset(extension for extension, chunker in _registry()[2].items()
                     if not type(chunker).__module__.startswith("contextd."))


def chunker_for(path: str) -> object | None:
    """The chunker registered for ``path``: by exact file name, then by lower-cased extension
    (the longest matching one, so ``.d.ts``-style names work); None when nobody claims it."""
    _, by_filename, by_extension = _registry()
    name = os.path.basename(path)
    if name in by_filename:
        return by_filename[name]
    lowered = name.lower()
    dot = lowered.find(".", 1)
    while dot != -1:
        chunker = by_extension.get(lowered[dot:])
        if chunker is not None:
            return chunker
        dot = lowered.find(".", dot + 1)
    return None


def language_for(path: str) -> str | None:
    """The language id chunks of ``path`` get, or None when no chunker claims the file."""
    chunker = chunker_for(path)
    return chunker.language if chunker is not None else None


def decode_text(data: bytes) -> tuple[str, tuple[str, ...]]:
    """Text of a file as chunkers see it, and warnings about the decoding."""
    warnings = []
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", "replace")
        warnings.append(f"invalid UTF-8 at byte {exc.start}; undecodable bytes replaced "
                        f"with U+FFFD")
    if "\r" in text:
        crlf = text.count("\r\n")
        lone = text.count("\r") - crlf
        if crlf and (lone or text.count("\n") > crlf):
            warnings.append("mixed line endings normalised to LF")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, tuple(warnings)


def effective_settings(config: ContextConfig, language: str) -> LanguageChunking:
    """A language's chunking settings with max_tokens capped at the model's window."""
    return _capped(config.chunking_for(language),
                   max(16, config.embedding.max_seq_length - CONTEXT_PREFIX_TOKENS))


@functools.lru_cache(maxsize=64)
def _capped(settings: LanguageChunking, window: int) -> LanguageChunking:
    """``settings`` with max_tokens at most ``window``: cached, since rebuilding the frozen
    settings for every file chunked showed in the chunking stage's profile (issue 37)."""
    if settings.max_tokens > window:
        settings = dataclasses.replace(settings, max_tokens=window)
    return settings


def third_party_chunkers() -> tuple[str, ...]:
    """The registered chunkers that are not contextd's own, each as
    ``name=plugin:module.Class@version``: installing, upgrading or removing a plugin that adds
    or replaces a chunker changes the chunks of files it claims, though no file changed. The
    version is the chunker's own ``version`` attribute, else its plugin distribution's."""
    found = []
    for name, reg in sorted(_registered().items()):
        kind = type(reg.value)
        if kind.__module__.startswith("contextd."):
            continue
        version = getattr(reg.value, "version", None) or plugin_version(reg.plugin)
        found.append(f"{name}={reg.plugin}:{kind.__module__}.{kind.__qualname__}@{version}")
    return tuple(found)


def chunking_signature(config: ContextConfig) -> str:
    """A string that changes exactly when the chunks of an unchanged file would: the chunking
    code's version, the per-language settings, the model window that caps them and the
    third-party chunkers registered (the built-ins are CHUNKING_VERSION's to cover, so an index
    without plugins keeps its signature across releases that leave the chunking alone)."""
    settings = sorted(config.chunking.items())
    signature = f"v{CHUNKING_VERSION}:{config.embedding.max_seq_length}:{settings!r}"
    plugins = third_party_chunkers()
    return f"{signature}:{','.join(plugins)}" if plugins else signature


def chunk_file(path: str, data: bytes, config: ContextConfig) -> ChunkedFile:
    """Chunk one file's bytes (see the module docstring); deterministic for equal input."""
    text, warnings = decode_text(data)
    chunker = chunker_for(path) or _registry()[0].get(FALLBACK_LANGUAGE)
    language = chunker.language
    settings = effective_settings(config, language)
    parse_error = None
    try:
        chunks = list(chunker.chunk(text, path, settings))
    except UnparsableFile as exc:
        parse_error = f"cannot parse as {language}: {exc}"
    except Exception as exc:  # a broken chunker must not stop indexing: fall back, say why
        log.warning("chunker %s failed on %s: %s", chunker.name, path, exc)
        parse_error = f"chunker {chunker.name} failed ({type(exc).__name__}: {exc})"
    if parse_error is not None:
        warnings += (f"{parse_error}; fell back to line windows",)
        chunks = []
    chunks = _enforce(text, path, language, chunks, settings.max_tokens)
    return ChunkedFile(language, chunks, warnings, parse_error)


def _enforce(text: str, path: str, language: str, chunks: list[Chunk], cap: int
             ) -> list[Chunk]:
    """Cut chunks over the cap and add chunks for non-blank lines no chunk covers."""
    covered = sorted((c.start_line, c.end_line) for c in chunks)
    if all(c.tokens <= cap for c in chunks) and not _has_gap(text, covered):
        return chunks
    src = Source(text, path, language)
    out: list[Chunk] = []
    for chunk in chunks:
        if chunk.tokens <= cap:
            out.append(chunk)
            continue
        for start, end in split_span(src, chunk.start_byte, chunk.end_byte, cap):
            piece = src.chunk(start, end, chunk.kind, chunk.label, context=chunk.context,
                              parent=chunk.parent)
            out.append(dataclasses.replace(piece, defines=tuple(
                d for d in chunk.defines if piece.start_line <= d.line <= piece.end_line),
                references=chunk.references))
    covered = sorted((c.start_line, c.end_line) for c in out)
    missing = _uncovered(src, covered)
    for first, last in missing:
        for start, end in split_span(src, src.line_start(first), src.line_end(last), cap):
            out.append(src.chunk(start, end, ChunkKind.CODE_BLOCK if src.language != "text"
                                 else ChunkKind.PARAGRAPH,
                                 f"lines {src.line_of(start)}-{src.line_of(end - 1)}"))
    if missing:
        out.sort(key=lambda c: (c.start_byte, c.end_byte))
    return out


def _has_gap(text: str, covered: list[tuple[int, int]]) -> bool:
    """Cheap pre-check for ``_uncovered``: does any line outside the ranges hold text?"""
    upto = 0
    lines = None
    for first, last in [*covered, (None, None)]:
        if first is None:
            lines = lines or text.split("\n")
            first = len(lines) + 1
        if first > upto + 1:
            lines = lines or text.split("\n")
            if any(line.strip() for line in lines[upto:first - 1]):
                return True
        upto = max(upto, last or 0)
    return False


def _uncovered(src: Source, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Runs of lines holding non-blank text outside every ``(first, last)`` range."""
    runs: list[tuple[int, int]] = []
    upto = 0
    for first, last in [*covered, (src.line_count + 1, src.line_count + 1)]:
        if first > upto + 1:
            gap_start, gap_end = src.line_start(upto + 1), src.line_end(first - 1)
            if src.data[gap_start:gap_end].strip():
                runs.append((upto + 1, first - 1))
        upto = max(upto, last)
    return runs
