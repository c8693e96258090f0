"""The structural contextualizer: a short prefix built from what the file already says.

A chunk cut out of its file loses where it lives: a method no longer says which class it
belongs to, a Markdown paragraph which section, a YAML block which key. The prefix puts that
back, from the document itself and no model: the repository-relative path, the enclosing class
and its docstring's first line, the Markdown heading path or the YAML key path, and the module
docstring's first sentence. Parts are added in that order of usefulness while they fit the
token budget, so the prefix is trimmed and the chunk never is.

The analysis works from the document text and the chunk's line range, so it does not depend on
how a chunker fills ``Chunk.parent``/``Chunk.context``; those are used when present.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from dataclasses import dataclass, field
from typing import Callable

from contextd.records import Chunk
from contextd.text.tokens import WORD_CHAR_WEIGHT, WORD_WEIGHT, estimate_tokens

# Tokens the embedding model adds around every input ([CLS], [SEP]).
MODEL_SPECIAL_TOKENS = 2
# A summary line cut shorter than this many words says too little to be worth its tokens.
MIN_TRIMMED_WORDS = 3

_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s")
_UNDERLINE_RE = re.compile(r"[=~\-^*#+`']{3,}")
_MD_HEADING_RE = re.compile(r" {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_MD_FENCE_RE = re.compile(r" {0,3}(`{3,}|~{3,})")
_YAML_KEY_RE = re.compile(r"""(\s*)(?:-\s+)?(["']?)([^\s#:"'][^:#]*?)\2\s*:(?:\s|$)""")
_CLASS_RE = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:abstract\s+)?(?:public\s+|private\s+|internal\s+)?"
    r"(?:data\s+|sealed\s+|open\s+)?(?:class|interface|struct|trait|enum|object)\s+([A-Za-z_$][\w$]*)",
    re.M)
# _CLASS_RE without its ``^``, matched only at the line starts a keyword hit allows (see
# _class_matches); the keyword followed by a blank is what every match holds.
_CLASS_AT_RE = re.compile(_CLASS_RE.pattern[1:])
_CLASS_KEYWORD_RE = re.compile(r"(?:class|interface|struct|trait|enum|object)\s")
_CLASS_MODIFIERS = frozenset({"export", "default", "abstract", "public", "private", "internal",
                              "data", "sealed", "open"})
_PY_CLASS_RE = re.compile(r"^([ \t]*)class[ \t]+([A-Za-z_]\w*)", re.M)
_PY_STRING_RE = re.compile(r"""[ \t]*[rRuU]?(\"\"\"|\'\'\'|"|')(.*?)\1""", re.S)
_TRIPLE_QUOTES = ('"""', "'''")
# Comments, triple-quoted strings and one-line strings, in the order Python reads them.
_PY_LITERAL_RE = re.compile(r'#[^\n]*|"""(?:\\.|[^\\])*?"""|' + r"'''(?:\\.|[^\\])*?'''|"
                            + r'"(?:\\.|[^"\\\n])*"|' + r"'(?:\\.|[^'\\\n])*'", re.S)
# A class header longer than this many lines is not looked at as one.
MAX_HEADER_LINES = 20
_BLOCK_COMMENT_RE = re.compile(r"/\*+(.*?)\*/", re.S)
_LINE_COMMENT_PREFIXES = ("///", "//!", "//", "#")

MARKDOWN_LANGUAGES = frozenset({"markdown"})
YAML_LANGUAGES = frozenset({"yaml"})
PYTHON_LANGUAGES = frozenset({"python"})


def first_sentence(text: str) -> str:
    """The first sentence of a docstring or comment, whitespace folded. Title paragraphs (an
    RST heading such as ``requests.sessions`` over ``~~~~``) are skipped for the first
    paragraph that reads as prose."""
    paragraphs = [" ".join(line for line in para.split() if not _UNDERLINE_RE.fullmatch(line))
                  for para in text.strip().split("\n\n")]
    paragraphs = [p for p in paragraphs if p]
    prose = next((p for p in paragraphs if len(p.split()) >= MIN_TRIMMED_WORDS),
                 paragraphs[0] if paragraphs else "")
    return _SENTENCE_END_RE.split(prose, 1)[0]


def _comment_text(block: str) -> str:
    """The words of a comment block, its markers (``/**``, ``*``, ``//``, ``#``) removed."""
    lines = []
    for line in block.splitlines():
        stripped = line.strip().lstrip("*").strip()
        for marker in _LINE_COMMENT_PREFIXES:
            if stripped.startswith(marker):
                stripped = stripped[len(marker):].strip()
                break
        if stripped.startswith("@"):  # JSDoc/KDoc tags: not a summary
            break
        lines.append(stripped)
    return "\n".join(lines)


def _leading_comment(lines: list[str], start: int) -> str:
    """The comment block starting at line index ``start`` (blank lines skipped), as text."""
    i = start
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines):
        return ""
    if lines[i].lstrip().startswith("/*"):
        match = _BLOCK_COMMENT_RE.match("\n".join(lines[i:]).lstrip())
        return _comment_text(match.group(1)) if match else ""
    block = []
    while i < len(lines) and lines[i].lstrip().startswith(_LINE_COMMENT_PREFIXES):
        if not lines[i].lstrip().startswith("#!"):
            block.append(lines[i])
        i += 1
    return _comment_text("\n".join(block))


def _comment_before(lines: list[str], index: int) -> str:
    """The comment block ending just above line index ``index`` (decorators skipped)."""
    end = index
    while end > 0 and lines[end - 1].lstrip().startswith("@"):
        end -= 1
    if end == 0 or not lines[end - 1].strip():
        return ""
    if lines[end - 1].rstrip().endswith("*/"):
        begin = end - 1
        while begin > 0 and "/*" not in lines[begin]:
            begin -= 1
        return _leading_comment(lines, begin)
    begin = end
    while begin > 0 and lines[begin - 1].lstrip().startswith(_LINE_COMMENT_PREFIXES):
        begin -= 1
    return _leading_comment(lines[:end], begin) if begin < end else ""


@dataclass(frozen=True)
class ClassInfo:
    """A class-like definition: its name, 1-based line range and docstring summary."""

    name: str
    start_line: int
    end_line: int
    summary: str


@dataclass
class DocumentOutline:
    """What the structural prefix needs to know about one document, computed once.

    Every lookup is a bisection or a short walk up a chain of enclosing classes, so the
    prefixes of a file cost time linear in its length: a lookup that rescanned the file (or
    every class) per chunk was quadratic and took most of a YAML-heavy project's indexing."""

    summary: str = ""
    classes: list[ClassInfo] = field(default_factory=list)
    headings: list[tuple[int, int, str]] = field(default_factory=list)  # (line, level, title)
    lines: list[str] = field(default_factory=list)
    # YAML: per key line, in order, (line, the (indent, key) pairs in force just after it).
    key_paths: list[tuple[int, tuple[tuple[int, str], ...]]] = field(default_factory=list)
    _class_starts: list[int] = field(init=False, repr=False)
    _class_parents: list[int] = field(init=False, repr=False)
    _heading_lines: list[int] = field(init=False, repr=False)
    _heading_paths: list[str] = field(init=False, repr=False)
    _key_lines: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.classes.sort(key=lambda c: c.start_line)
        self._class_starts = [c.start_line for c in self.classes]
        self._class_parents = _enclosing_indexes(self.classes)
        self._heading_lines = [h[0] for h in self.headings]
        self._heading_paths = _heading_paths(self.headings)
        self._key_lines = [line for line, _ in self.key_paths]

    def enclosing_class(self, chunk: Chunk) -> ClassInfo | None:
        """The innermost class containing the chunk that is not the chunk itself: a class
        opening on the chunk's own first line that spans past it and carries its name as the
        chunk's parent, else the innermost class opened before the chunk and still open at its
        first line (classes nest, so it is on the chain of enclosing classes of the last class
        opened before the chunk)."""
        at = bisect.bisect_right(self._class_starts, chunk.start_line) - 1
        if at >= 0 and self._class_starts[at] == chunk.start_line:
            same = self.classes[at]
            if chunk.end_line < same.end_line and chunk.parent == same.name:
                return same
            at -= 1
        while at >= 0:
            candidate = self.classes[at]
            if candidate.end_line >= chunk.start_line:
                return candidate
            at = self._class_parents[at]
        return None

    def heading_path(self, line: int) -> str:
        """The Markdown headings in force at ``line`` ("Install > From source")."""
        at = bisect.bisect_right(self._heading_lines, line) - 1
        return self._heading_paths[at] if at >= 0 else ""

    def key_path(self, line: int) -> str:
        """The YAML keys enclosing ``line`` by indentation ("services > web"): the path in
        force after the last key line above it, less its keys not indented less than the
        line itself (a blank line keeps them all)."""
        at = bisect.bisect_left(self._key_lines, line) - 1
        if at < 0:
            return ""
        path = self.key_paths[at][1]
        own = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if not own.strip():
            return " > ".join(key for _, key in path)
        indent = len(own) - len(own.lstrip())
        return " > ".join(key for depth, key in path if depth < indent)


def _enclosing_indexes(classes: list[ClassInfo]) -> list[int]:
    """For each class (sorted by first line), the index of the innermost earlier class that
    is still open at its first line, or -1: one pass with a stack of open classes."""
    parents: list[int] = []
    open_: list[int] = []
    for info in classes:
        while open_ and classes[open_[-1]].end_line < info.start_line:
            open_.pop()
        parents.append(open_[-1] if open_ else -1)
        open_.append(len(parents) - 1)
    return parents


def _heading_paths(headings: list[tuple[int, int, str]]) -> list[str]:
    """The heading path in force at each heading ("Install > From source"), in one pass."""
    stack: list[tuple[int, str]] = []
    paths = []
    for _, level, title in headings:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        paths.append(" > ".join(t for _, t in stack))
    return paths


def yaml_key_paths(lines: list[str]) -> list[tuple[int, tuple[tuple[int, str], ...]]]:
    """Per YAML key line (1-based, in order), the keys in force just after it as
    ``(indent, key)`` pairs, outermost first: a key pops every key indented as deep or
    deeper. One pass over the file, where searching backwards from each chunk was quadratic
    in the file's length (66 s of a 91 s index of a YAML-heavy project, issue 37)."""
    out = []
    stack: tuple[tuple[int, str], ...] = ()
    for n, text in enumerate(lines, start=1):
        match = _YAML_KEY_RE.match(text)
        if not match or not text.strip() or text.lstrip().startswith("#"):
            continue
        indent = len(match.group(1))
        kept = len(stack)
        while kept and stack[kept - 1][0] >= indent:
            kept -= 1
        stack = stack[:kept] + ((indent, match.group(3).strip()),)
        out.append((n, stack))
    return out


def outline_python(document: str) -> DocumentOutline:
    """Module docstring and classes (with their docstrings' first sentences) of a Python file.

    Read from the text with regular expressions and indentation, not ``ast``: parsing every
    file a second time (the chunker has already parsed it with tree-sitter) cost more than the
    whole chunker. A test checks the result against ``ast`` over the standard library."""
    lines = document.split("\n")
    offsets = _line_offsets(lines)
    in_string = _lines_inside_strings(document, offsets)
    classes = []
    for match in _PY_CLASS_RE.finditer(document):
        start = bisect.bisect_right(offsets, match.start()) - 1
        if start in in_string:
            continue
        indent = len(match.group(1).expandtabs())
        header = _header_end(lines, start)
        if not lines[header].split("#", 1)[0].rstrip().endswith(":"):  # class A: pass
            classes.append(ClassInfo(match.group(2), start + 1, header + 1, ""))
            continue
        end, first_statement = header, None
        for n in range(header + 1, len(lines)):
            if n in in_string:
                end = n
                continue
            stripped = lines[n].lstrip()
            if not stripped or stripped.startswith("#"):
                continue
            if len(lines[n].expandtabs()) - len(stripped.expandtabs()) <= indent:
                break
            first_statement = n if first_statement is None else first_statement
            end = n
        doc = _docstring_at(document, offsets, first_statement)
        classes.append(ClassInfo(match.group(2), start + 1, end + 1, first_sentence(doc)))
    first = next((n for n, line in enumerate(lines) if line.strip()
                  and not line.lstrip().startswith("#")), None)
    return DocumentOutline(first_sentence(_docstring_at(document, offsets, first)), classes)


def _line_offsets(lines: list[str]) -> list[int]:
    """Offset of each line's start in the text ``lines`` were split from (one newline each),
    and one past the end: summed in C, where a loop over the lines cost most of an outline."""
    return list(itertools.accumulate(map((1).__add__, map(len, lines)), initial=0))


def _lines_inside_strings(document: str, offsets: list[int]) -> set[int]:
    """Indexes of the lines that begin inside a triple-quoted string (their indentation
    says nothing about the code's structure). Comments and one-line strings are matched
    too, so that quotes inside them open nothing."""
    inside: set[int] = set()
    for match in _PY_LITERAL_RE.finditer(document):
        if match.group().startswith(_TRIPLE_QUOTES):
            first = bisect.bisect_right(offsets, match.start())
            last = bisect.bisect_right(offsets, match.end() - 1) - 1
            inside.update(range(first, last + 1))
    return inside


def _header_end(lines: list[str], start: int) -> int:
    """The last line of a class header that may span lines (bases in brackets)."""
    depth = 0
    for n in range(start, min(start + MAX_HEADER_LINES, len(lines))):
        code = lines[n].split("#", 1)[0]
        depth += sum(map(code.count, "([{")) - sum(map(code.count, ")]}"))
        if depth <= 0:
            return n
    return start


def _docstring_at(document: str, offsets: list[int], line: int | None) -> str:
    """The string literal that opens line index ``line``, if any: a docstring when that line
    is the first statement of a module or class."""
    if line is None:
        return ""
    match = _PY_STRING_RE.match(document, offsets[line])
    return match.group(2) if match else ""


def outline_generic(document: str) -> DocumentOutline:
    """Leading comment block as the summary; classes found by keyword with the doc comment
    above them, their extent taken up to the next top-level class (a cheap, language-blind
    approximation; chunk.parent confirms it where the chunker knows better)."""
    lines = document.splitlines()
    line_starts = _line_offsets(lines)
    found = []
    for match in _class_matches(document):
        index = bisect.bisect_right(line_starts, match.start()) - 1
        found.append((index, match.group(1), len(match.group(0)) - len(match.group(0).lstrip())))
    ends = [len(lines)] * len(found)
    open_: list[int] = []  # classes whose end is not known yet, indentation increasing
    for n, (index, _, indent) in enumerate(found):
        while open_ and found[open_[-1]][2] >= indent:
            ends[open_.pop()] = index
        open_.append(n)
    classes = [ClassInfo(name, index + 1, end, first_sentence(_comment_before(lines, index)))
               for (index, name, _), end in zip(found, ends)]
    return DocumentOutline(first_sentence(_leading_comment(lines, 0)), classes)


def _class_matches(document: str) -> list[re.Match]:
    """``_CLASS_RE.finditer(document)``, found from its keywords instead of trying the
    pattern at every character: that scan was half the contextualizer's time on a TypeScript
    project (issue 37). A match starts at a line start from which only blanks and modifiers
    (``export``, ``abstract`` ...) lead to a keyword, so for each line holding a keyword the
    pattern is tried at those line starts only, earliest first, as finditer would. Each line
    is looked at once and no walk up crosses a keyword's line, so the work stays linear."""
    out: list[re.Match] = []
    pos = 0  # where finditer would go on from: the last match's end
    line_end = -1
    for hit in _CLASS_KEYWORD_RE.finditer(document):
        if hit.start() <= line_end:
            continue  # the line was tried: another keyword on it leads to the same attempt
        line = document.rfind("\n", 0, hit.start()) + 1
        line_end = document.find("\n", hit.start())
        line_end = len(document) if line_end < 0 else line_end
        if line < pos:
            continue  # the line holds the last match's end: no line start left on it
        for start in _class_starts(document, line, pos):
            match = _CLASS_AT_RE.match(document, start)
            if match is not None:
                out.append(match)
                pos = match.end()
                break
    return out


def _class_starts(document: str, line: int, pos: int) -> list[int]:
    """The line starts (none before ``pos``), earliest first, from which ``_CLASS_AT_RE``
    may reach the line starting at ``line``: through the lines above it holding only blanks
    and modifier words. A run of blank lines leads where the line below it does, so only
    the run's first line is tried for both (the match starts there)."""
    starts = [line]
    while line > pos:
        above = document.rfind("\n", 0, line - 1) + 1
        if above < pos:
            break
        words = document[above:line - 1].split()
        if not _CLASS_MODIFIERS.issuperset(words):
            break
        if words:
            starts.append(above)
        else:
            starts[-1] = above
        line = above
    starts.reverse()
    return starts


def outline_markdown(document: str) -> DocumentOutline:
    """ATX headings outside code fences; the first heading is the document's summary."""
    headings = []
    fence = ""
    for n, text in enumerate(document.splitlines(), start=1):
        fence_match = _MD_FENCE_RE.match(text)
        if fence_match:
            marker = fence_match.group(1)
            if not fence:
                fence = marker
            elif marker.startswith(fence):
                fence = ""
            continue
        match = None if fence else _MD_HEADING_RE.match(text)
        if match:
            headings.append((n, len(match.group(1)), match.group(2).strip()))
    return DocumentOutline(headings=headings)


def outline(document: str, language: str) -> DocumentOutline:
    """The outline of a document for its language."""
    if language in PYTHON_LANGUAGES:
        return outline_python(document)
    if language in MARKDOWN_LANGUAGES:
        return outline_markdown(document)
    if language in YAML_LANGUAGES:
        lines = document.splitlines()
        return DocumentOutline(lines=lines, key_paths=yaml_key_paths(lines))
    return outline_generic(document)


def prefix_lines(chunk: Chunk, path: str, doc: DocumentOutline) -> list[str]:
    """The candidate prefix lines of a chunk, most useful first."""
    lines = [f"File: {path}"]
    if chunk.language in MARKDOWN_LANGUAGES:
        section = doc.heading_path(chunk.start_line) or chunk.parent
        if section:
            lines.append(f"Section: {section}")
    elif chunk.language in YAML_LANGUAGES:
        keys = doc.key_path(chunk.start_line) or chunk.parent
        if keys:
            lines.append(f"Keys: {keys}")
    else:
        owner = doc.enclosing_class(chunk)
        if owner is not None:
            lines.append(f"Class: {owner.name}" + (f" - {owner.summary}" if owner.summary else ""))
        elif chunk.parent:
            lines.append(f"In: {chunk.parent}")
    if doc.summary:
        lines.append(f"Module: {doc.summary}")
    return lines


def line_tokens(line: str) -> int:
    """Estimated tokens of one prefix line."""
    return estimate_tokens(line + "\n")


def cut_line(line: str, budget: int) -> str:
    """``line`` cut by words to fit ``budget`` estimated tokens and marked cut (" ..."), or
    "" when too few of its words would survive."""
    words = line.split()
    keep = _words_that_fit(words, budget)
    return " ".join(words[:keep]) + " ..." if keep > MIN_TRIMMED_WORDS else ""


def fit_lines(lines: list[str], budget: int, line_cost: Callable[[str], int] = line_tokens,
              cut: Callable[[str, int], str] = cut_line) -> str:
    """Join ``lines`` while they fit ``budget`` estimated tokens; a line that does not fit is
    cut by words (when enough of it survives) and ends the prefix. ``line_cost`` and ``cut``
    may be caches: the chunks of one file share most of their prefix lines, and cutting the
    same long module summary anew for each chunk was most of the contextualizer's time on a
    Go project (a license header's first sentence; issue 37)."""
    kept: list[str] = []
    spent = 0
    for line in lines:
        cost = line_cost(line)
        if spent + cost <= budget:
            kept.append(line)
            spent += cost
            continue
        trimmed = cut(line, budget - spent)
        if trimmed:
            kept.append(trimmed)
        break
    return "\n".join(kept)


def _words_that_fit(words: list[str], budget: int) -> int:
    """The most leading ``words`` that, joined and marked cut (" ..."), fit ``budget``
    estimated tokens; MIN_TRIMMED_WORDS when no more do. Bisected: the estimate only grows
    with each word added (its counts add up over space-separated words), and dropping one
    word at a time re-estimated the whole line each time, quadratic in a long module
    summary's words (most of the contextualizer's time on prometheus, issue 37)."""
    # Every word costs at least a word and a word character in the estimate, so no more than
    # this many can fit: the work stays within the budget however long the line is.
    most = int(budget / (WORD_WEIGHT + WORD_CHAR_WEIGHT)) + 1
    low, high = MIN_TRIMMED_WORDS, min(len(words), most)  # low: kept, or too few to keep
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_tokens(" ".join(words[:middle]) + " ...\n") <= budget:
            low = middle
        else:
            high = middle - 1
    return low


class StructuralContextualizer:
    """Prefixes built from the file's own structure (the default; no LLM, deterministic)."""

    name = "structural"

    def __init__(self, config):
        self.max_prefix_tokens = config.contextualizer.max_prefix_tokens
        self.window = config.embedding.max_seq_length - MODEL_SPECIAL_TOKENS

    def prefixes(self, document: str, path: str, chunks: list[Chunk]) -> list[str]:
        """One prefix per chunk, each within ``max_prefix_tokens`` and within what the model
        window leaves beside the chunk."""
        if not chunks:
            return []
        outlines: dict[str, DocumentOutline] = {}
        line_cost = functools.lru_cache(maxsize=None)(line_tokens)
        cut = functools.lru_cache(maxsize=None)(cut_line)
        out = []
        for chunk in chunks:
            doc = outlines.get(chunk.language)
            if doc is None:
                doc = outlines[chunk.language] = outline(document, chunk.language)
            budget = min(self.max_prefix_tokens, self.window - chunk.tokens)
            out.append(fit_lines(prefix_lines(chunk, path, doc), budget, line_cost, cut)
                       if budget > 0 else "")
        return out
