"""Secret scrubbing (spec 004 §11.1): redact credentials before any text reaches the index.

The indexer scrubs a file's decoded text *before* chunking, so every derived row (chunk text,
index text, labels, symbols, links, contextual prefixes) is built from redacted text; the
file's content hash stays that of the original bytes, so change detection is unaffected.

Values are replaced by ``[REDACTED]`` with the surrounding structure kept
(``password = "[REDACTED]"``, ``postgres://user:[REDACTED]@host``), and a multi-line private
key keeps its line count so line numbers of later chunks stay true.

Speed matters (every indexed byte passes through here): the detectors are compiled once per
configuration, and they run only on the lines where a C-level substring search finds a
keyword or a token marker, which is a small fraction of any code base.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Callable, Sequence

REDACTED = "[REDACTED]"

# Lower-case words that put a line under the line detectors, and case-sensitive markers of
# provider tokens. Finding them is a C-level substring search; the regexes then run on those
# lines only, so a file without them costs two scans of its text.
_KEYWORDS = ("password", "passwd", "pwd", "passphrase", "secret", "token", "api_key", "api-key",
             "apikey", "access_key", "access-key", "private_key", "private-key", "credential",
             "://")
_TOKEN_MARKERS = ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "ghp_",
                  "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox")

# Names of settings that hold a secret: the keyword ends the identifier (``DB_PASSWORD``,
# ``githubToken``, ``client_secret``) so ``max_tokens`` or ``password_hash`` stay untouched.
_KEY_NAME = (r"[\w.-]*?(?:password|passwd|pwd|passphrase|secret|secret[_-]?key|token"
             r"|api[_-]?key|apikey|access[_-]?key|private[_-]?key|client[_-]?secret"
             r"|credentials?)")

# ``name = "value"``, ``name: 'value'``, ``"name": "value"``, ``name => "value"``,
# ``name: str = "value"`` (a type annotation between name and value).
_QUOTED_ASSIGNMENT = re.compile(
    rf"""(?ix)\b(?P<key>{_KEY_NAME})\b["']?(?:\s*:\s*[a-z_][\w.\[\]<>|]*)?\s*(?::=|=>|[:=])\s*
         (?P<q>["'`])(?P<value>(?:(?!(?P=q))[^\\\n]|\\.){{1,}})(?P=q)""")

# ``NAME=value`` / ``name: value`` without quotes: only in configuration-like files, where an
# unquoted value is a literal; in code it is an expression (``token = get_token()``).
_BARE_ASSIGNMENT = re.compile(
    rf"""(?imx)^(?P<lead>[ \t]*(?:export[ \t]+)?)(?P<key>{_KEY_NAME})[ \t]*[:=][ \t]*
         (?P<value>[^\s"'`#;,{{}}\[\]|&>][^\s"'`#;,]*)[ \t]*(?:[#;].*)?$""")

# Connection strings with a password: scheme://user:password@host.
_URL_PASSWORD = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@'\"]+:(?P<value>[^\s@'\"/]+)@")

# Private key blocks (PEM, OpenSSH, PGP).
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----(?P<value>.*?)"
    r"-----END (?P=kind)-----", re.DOTALL)

# Provider token formats that need no key name around them.
_TOKEN_FORMATS = re.compile(
    r"\b(?P<value>(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,})\b")

_PLACEHOLDER_VALUES = frozenset({REDACTED.lower(), "none", "null", "true", "false", "nil",
                                 "undefined"})

# Files whose unquoted ``key = value`` lines are literals, not code.
CONFIG_SUFFIXES = frozenset({".env", ".ini", ".cfg", ".conf", ".properties", ".yaml", ".yml",
                             ".toml", ".sh", ".bash", ".zsh", ".envrc", ".tfvars", ".txt"})


@dataclass(frozen=True)
class ScrubResult:
    """Redacted text and how many values were redacted."""

    text: str
    redactions: int


def is_config_like(path: str) -> bool:
    """Whether unquoted ``key = value`` lines of ``path`` hold literal values."""
    name = PurePosixPath(path).name.lower()
    return name.startswith(".env") or PurePosixPath(name).suffix in CONFIG_SUFFIXES


def _redact_group(pattern: re.Pattern, group: str, text: str, keep_lines: bool = False
                  ) -> tuple[str, int]:
    """Replace ``group`` of every match of ``pattern`` with [REDACTED]; with ``keep_lines``
    the replacement keeps the value's newlines so later line numbers stay true."""
    count = 0

    def replace(match: re.Match) -> str:
        nonlocal count
        value = match.group(group)
        if value.strip().lower() in _PLACEHOLDER_VALUES:
            return match.group(0)
        count += 1
        start, end = match.span(group)
        base = match.start()
        filler = REDACTED
        if keep_lines:
            filler = "\n" + REDACTED + "\n" * max(value.count("\n") - 1, 1)
        return match.group(0)[:start - base] + filler + match.group(0)[end - base:]

    return pattern.sub(replace, text), count


def _compile_custom(pattern: str) -> Callable[[str], tuple[str, int]]:
    """A configured pattern: its capture groups are the secret when it has any; otherwise
    the quoted values after the first ``=`` or ``:`` of the match (structure kept), else the
    whole match."""
    compiled = re.compile(pattern)
    quoted = re.compile(r"""(["'])(?:(?!\1).)+\1""")

    def redact_match(match: re.Match) -> str:
        whole = match.group(0)
        if compiled.groups:
            pieces, last = [], 0
            for index in range(1, compiled.groups + 1):
                start, end = match.span(index)
                if start < 0 or start < last:
                    continue
                pieces += [whole[last:start - match.start()], REDACTED]
                last = end - match.start()
            return "".join(pieces) + whole[last:]
        sep = re.search(r"[:=]", whole)
        if sep is None:
            return REDACTED
        head, tail = whole[:sep.end()], whole[sep.end():]
        if REDACTED in tail:
            return whole
        replaced = quoted.sub(lambda q: q.group(1) + REDACTED + q.group(1), tail)
        return head + (replaced if replaced != tail else " " + REDACTED)

    def apply(text: str) -> tuple[str, int]:
        count = 0

        def replace(match: re.Match) -> str:
            nonlocal count
            new = redact_match(match)
            count += new != match.group(0)
            return new

        return compiled.sub(replace, text), count

    return apply


class Scrubber:
    """Redacts secrets from text; build one per configuration with :func:`get_scrubber`."""

    def __init__(self, enabled: bool = True, patterns: Sequence[str] = ()):
        self.enabled = enabled
        self._custom = [_compile_custom(p) for p in patterns]

    def scrub(self, text: str, path: str = "") -> ScrubResult:
        """Redact ``text`` (the content of ``path``, whose type decides whether unquoted
        ``key = value`` lines count); returns the new text and the number of redactions."""
        if not self.enabled:
            return ScrubResult(text, 0)
        total = 0
        if "PRIVATE KEY" in text:
            text, total = _redact_group(_PRIVATE_KEY, "value", text, keep_lines=True)
        spans = _candidate_lines(text)
        if spans:
            line_steps = [_URL_PASSWORD, _TOKEN_FORMATS, _QUOTED_ASSIGNMENT]
            if is_config_like(path):
                line_steps.append(_BARE_ASSIGNMENT)
            pieces, last = [], 0
            for start, end in spans:
                line = text[start:end]
                for pattern in line_steps:
                    line, count = _redact_group(pattern, "value", line)
                    total += count
                pieces += [text[last:start], line]
                last = end
            text = "".join(pieces) + text[last:]
        for apply in self._custom:
            text, count = apply(text)
            total += count
        return ScrubResult(text, total)


def _candidate_lines(text: str) -> list[tuple[int, int]]:
    """Sorted (start, end) of the lines holding a keyword or a token marker."""
    spans: set[tuple[int, int]] = set()
    lower = text.lower()
    for haystack, words in ((lower, _KEYWORDS), (text, _TOKEN_MARKERS)):
        for word in words:
            found = haystack.find(word)
            while found >= 0:
                start = text.rfind("\n", 0, found) + 1
                end = text.find("\n", found)
                end = len(text) if end < 0 else end
                spans.add((start, end))
                found = haystack.find(word, end)
    return sorted(spans)


@lru_cache(maxsize=8)
def get_scrubber(enabled: bool, patterns: tuple[str, ...]) -> Scrubber:
    """The scrubber of a configuration (``security.scrub_secrets``,
    ``security.secret_patterns``), compiled once per process."""
    return Scrubber(enabled, patterns)
