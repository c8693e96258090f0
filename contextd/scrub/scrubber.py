"""Secret scrubbing: redact credentials before any text reaches the index.

The indexer scrubs a file's decoded text *before* chunking, so every derived row (chunk text,
index text, labels, symbols, links, contextual prefixes) is built from redacted text; the
file's content hash stays that of the original bytes, so change detection is unaffected.

Values are replaced by ``[REDACTED]`` with the surrounding structure kept
(``password = "[REDACTED]"``, ``postgres://user:[REDACTED]@host``), and a multi-line private
key keeps its line count so line numbers of later chunks stay true.

Speed matters (every indexed byte passes through here): the detectors are compiled once per
configuration, and they run only on the lines that hold a keyword or a token marker
(:mod:`contextd.scrub.candidates` finds them in one pass), a small fraction of any code base.
"""

from __future__ import annotations

import re
import re._constants as _sre
import re._parser as _sre_parse
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Callable, Sequence

from contextd.config.sections import SecurityConfig
from contextd.scrub.candidates import candidate_lines
from contextd.scrub.rules import (DIGEST_PREFIX, MIN_CODE_SECRET_CHARS,
                                   PASSWORD_HASH, RANDOM_TOKEN, STRONG_NAME,
                                   TOKEN_FORMATS, WEAK_NAME, has_context_word,
                                   is_placeholder, is_strong_name, looks_random)

REDACTED = "[REDACTED]"
# Bumped by a change to what is redacted (rules here or in contextd.scrub.rules), so that
# existing indexes are re-scrubbed: a credential an older version let through must not stay
# in the index until its file happens to change (see scrubbing_signature).
SCRUB_VERSION = 3  # 2: Azure connection-string keys, URL passwords with no user, curl -u,
# auth tuples (issue 28); PEM bodies hold no code; punctuation-only and permission values.
# 3 (issue 40): secrets on command lines, in query strings, XML and .NET settings, webhooks,
# Vault tokens, notebook PEM keys; password hashes, versions, expressions kept

# ``name = "value"``, ``name: 'value'``, ``"name": "value"``, ``name => "value"``,
# ``name: str = "value"`` (a type annotation between name and value), ``f(name="value")``.
# The name ends the identifier (``DB_PASSWORD``, ``githubToken``, ``client_secret``), so
# ``max_tokens`` or ``password_hash`` stay untouched.
_KEY_NAME = rf"[\w.-]*?(?:{STRONG_NAME}|{WEAK_NAME})"
_QUOTED_ASSIGNMENT = re.compile(
    rf"""(?ix)\b(?P<key>{_KEY_NAME})\b["']?(?:\s*:\s*[a-z_][\w.\[\]<>|]*)?\s*(?::=|=>|[:=])\s*
         (?:[bru]{{1,2}}(?=["']))?(?P<q>["'`])(?P<value>(?:(?!(?P=q))[^\\\n]|\\.){{1,}})(?P=q)""")



def spellings(pattern: str) -> list[str]:
    """Every string ``pattern`` matches, for a pattern of literals, sets of literals, groups,
    alternatives and bounded repeats only (a secret's names); anything else is refused."""

    def sequence(items) -> list[str]:
        out = [""]
        for op, arg in items:
            out = [head + tail for head in out for tail in element(op, arg)]
        return out

    def element(op, arg) -> list[str]:
        if op is _sre.LITERAL:
            return [chr(arg)]
        if op is _sre.IN and all(kind is _sre.LITERAL for kind, _ in arg):
            return [chr(code) for _, code in arg]
        if op is _sre.BRANCH:
            return [text for branch in arg[1] for text in sequence(branch)]
        if op is _sre.SUBPATTERN:
            return sequence(arg[-1])
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT) and arg[1] is not _sre.MAXREPEAT:
            texts, found = [""], []
            for count in range(arg[1] + 1):
                if count >= arg[0]:
                    found += texts
                texts = [head + tail for head in texts for tail in sequence(arg[2])]
            return found
        raise ValueError(f"{pattern!r}: {op} is not a finite set of strings")

    return sequence(_sre_parse.parse(pattern))


# What both assignment rules need, checked first: a secret's name, then (past a quote and
# blanks) the ``:`` or ``=`` that every assignment form starts with. The rules themselves
# try a lazy name prefix at every word of the line, and a search for the name at every
# position still cost a quarter of the scrubbing (issue 37); so the line is searched
# backwards, the name's spellings reversed, and only a ``:`` or ``=`` starts a match. (The
# name ends a word by itself: a quote, a blank, ``:`` and ``=`` are no word characters.)
# A line it misses matches neither rule.
_ASSIGNED_NAME_REVERSED = re.compile(r"""(?i)[:=]\s*["']?(?:{})""".format("|".join(
    re.escape(name[::-1]) for name in spellings(f"{STRONG_NAME}|{WEAK_NAME}"))))


def _assigns_a_name(line: str) -> bool:
    """Whether ``line`` assigns to a secret's name (see _ASSIGNED_NAME_REVERSED)."""
    return _ASSIGNED_NAME_REVERSED.search(line[::-1]) is not None

# ``f("name", "value")``: a setting passed as a call's first two arguments (``props.put``,
# ``os.Setenv``); a tuple or list of names is no such pair.
_QUOTED_PAIR = re.compile(
    rf"""(?ix)\(\s*(?P<q1>["'])(?P<key>{_KEY_NAME})(?P=q1)\s*,\s*
         (?P<q>["'`])(?P<value>(?:(?!(?P=q))[^\\\n]|\\.){{1,}})(?P=q)""")

# ``NAME=value`` / ``name: value`` / ``export NAME=value`` / ``ENV NAME=value`` unquoted.
_BARE_ASSIGNMENT = re.compile(
    rf"""(?imx)^(?P<lead>[ \t]*(?:[-*>|][ \t]*)*(?:(?:export|ENV|ARG|set)[ \t]+)?)
         (?P<key>{_KEY_NAME})[ \t]*[:=][ \t]*
         (?P<value>[^\s"'`#;,{{}}\[\]|&>][^\s"'`#;,]*)[ \t]*(?:[#;|].*)?$""")

# Connection strings with a password: scheme://user:password@host, the user may be empty
# (``redis://:password@host``).
_URL_PASSWORD = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@'\"]*:(?P<value>[^\s@'\"/]+)@")

# ``key=value;`` connection strings (Azure storage and service bus, ADO.NET):
# ``…;AccountKey=…;``, ``SharedAccessKey=…``, ``Password=…``.
_CONNECTION_STRING_KEY = re.compile(
    r"""(?i)(?:^|(?<=[;"'\s]))(?:AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd)
        \s*=\s*(?P<value>[^;"'\s]+)""", re.VERBOSE)

# ``curl -u user:password``, ``--user user:password`` (also wget, httpie's -a is rare).
_CLI_USER = re.compile(r"""(?:^|(?<=\s))(?:-u(?:[ \t]+|=)?|--user(?:[ \t]+|=))["']?"""
                       r"""(?P<user>[^\s:'"]*)"""
                       r""":(?P<value>[^\s'"]+)""")

# ``auth=("user", "password")`` (requests, httpx), ``session.auth = (…)``,
# ``SESSION_AUTH = (…)``, ``HTTPBasicAuth("user", "password")``.
_AUTH_TUPLE = re.compile(
    r"""(?i)(?:(?<![a-z0-9])auth\s*=\s*|BasicAuth\s*)\(\s*(?P<q1>["'])[^"'\n]*(?P=q1)\s*,\s*
        (?P<q>["'])(?P<value>(?:(?!(?P=q))[^\\\n]|\\.)+)(?P=q)""", re.VERBOSE)

# Issue 40: a flag or a key that names a password or token, then its value, inside a
# command line or a configuration form the assignments above do not reach.
# ``PGPASSWORD=… psql``, ``MYSQL_PWD=… mysqldump``, an Ansible inventory's
# ``web1 ansible_password=…``: a setting and its unquoted value before more words.
_INLINE_SETTING = re.compile(
    rf"""(?i)(?:^|(?<=[\s;&|(]))(?P<key>[a-z_][\w.-]*?(?:{STRONG_NAME}))=
         (?P<value>[^\s"'`;&|()<>]+)(?=[ \t])""", re.VERBOSE)
# ``--password X``, ``--http-password=X``, ``--token X``, ``--api-key=X``.
_SECRET_FLAG = re.compile(
    r"""(?i)(?:^|(?<=[\s"'`]))--?(?P<key>[a-z][\w-]*?(?:password|passwd|pass|pwd|passphrase
        |token|secret|api-?key|access-key|secret-key))(?:=|[ \t]+)["']?(?P<value>[^\s"'`;&|()<>]+)""",
    re.VERBOSE)
# ``docker login -u bot -p X``, ``helm registry login … -p X``.
_LOGIN_P = re.compile(r"""\blogin\b[^\n]*?[ \t]-p[ \t]+["']?(?P<value>[^\s"'`;&|()<>]+)""")
# ``mysql -uroot -pPW``, ``mysqldump -p'PW' db``: the password stuck to ``-p``.
_MYSQL_P = re.compile(r"""\b(?:mysql\w*|mariadb\w*)\b[^\n]*?[ \t]-p["']?(?P<value>[^\s"'`;&|()<>]+)""")
# A URL's query string: ``jdbc:mysql://db/app?user=app&password=…``, ``?access_token=…``.
_QUERY_SECRET = re.compile(
    r"""(?i)[?&](?P<key>[\w.-]*?(?:password|passwd|pwd|secret|token|api[_-]?key|apikey
        |access[_-]?key|sig))=(?P<value>[^&#\s"'`;<>\\]+)""", re.VERBOSE)
# ``<password>…</password>`` (Maven settings.xml, Spring XML), ``<apiToken>…</apiToken>``.
_XML_SECRET = re.compile(
    r"""(?i)<(?P<tag>[\w.:-]*?(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey
        |private[_-]?key))>(?P<value>[^<\s][^<\n]*?)</(?P=tag)>""", re.VERBOSE)
# .NET's ``<add key="DbPassword" value="…" />``: the secret's name is the key's value.
_ADD_KEY_VALUE = re.compile(
    r"""(?i)<add\s+key\s*=\s*(?P<q1>["'])(?P<key>[^"'<>]*)(?P=q1)\s+value\s*=\s*
        (?P<q>["'])(?P<value>[^"'<>]+)(?P=q)""", re.VERBOSE)
# HashiCorp Vault's legacy service tokens (``s.`` and 24 characters), on a line that says
# vault (the newer ``hvs.`` ones are a token format).
_VAULT_LEGACY = re.compile(r"(?<![\w.])s\.(?P<value>[A-Za-z0-9]{24})(?![\w.])")

# HTTP authorization values: ``Authorization: Bearer …``, ``-H "Authorization: token …"``.
_AUTH_HEADER = re.compile(r"(?i)\b(?:bearer|basic|token)[ \t]+(?P<value>[A-Za-z0-9._~+/-]{8,}=*)")

# Private key blocks (PEM, OpenSSH, PGP).
# The body holds base64 lines, PEM headers (``Proc-Type: 4,ENCRYPTED``) and, inside a
# string literal, escaped newlines; in a notebook's JSON each line is a string of its own
# (``\n",`` then the next line's ``"``). Never code, so the markers of a PEM parser (a BEGIN
# constant here, the END one lines below) do not make the code between them a key.
_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
    r"(?P<value>(?:[A-Za-z0-9+/=\s:,.\\-]|\\n\"\s*,\s*\")*?)-----END (?P=kind)-----")
# What stays of a key's body: line breaks (real, escaped, or a notebook's string ends), so
# the text keeps its line count and its JSON or string literal stays well-formed.
_KEY_BODY_BREAK = re.compile(r'(\\[nr]"\s*,\s*"|\\[nr]|\s+)')

# Provider token formats that need no name around them.
_TOKEN_FORMATS = re.compile(
    r"(?<![A-Za-z0-9])(?P<value>" + "|".join(f"(?:{regex})" for _, _, regex in TOKEN_FORMATS)
    + r")(?![A-Za-z0-9])")

# Files whose unquoted ``key = value`` lines are literals, not code.
CONFIG_SUFFIXES = frozenset({".env", ".ini", ".cfg", ".conf", ".properties", ".yaml", ".yml",
                             ".toml", ".sh", ".bash", ".zsh", ".envrc", ".tfvars", ".txt",
                             ".example", ".sample", ".template", ".npmrc", ".pypirc"})
# Prose files, where ``password: hunter2`` in a code block or a list is a literal too but
# ``Password: required`` is a sentence.
DOC_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".rst", ".adoc"})


@dataclass(frozen=True)
class ScrubResult:
    """Redacted text and how many values were redacted."""

    text: str
    redactions: int


def is_config_like(path: str) -> bool:
    """Whether unquoted ``key = value`` lines of ``path`` hold literal values."""
    name = PurePosixPath(path).name.lower()
    return name.startswith(".env") or PurePosixPath(name).suffix in CONFIG_SUFFIXES


def _file_kind(path: str) -> str:
    """How unquoted values of ``path`` are read: "config", "doc" (prose) or "code"."""
    if is_config_like(path):
        return "config"
    return "doc" if PurePosixPath(path).suffix.lower() in DOC_SUFFIXES else "code"


def _credential_like(value: str) -> bool:
    """An authorization header value: random, or letters and digits mixed (not a word)."""
    if is_placeholder(value):
        return False
    return looks_random(value) or (any(c.isdigit() for c in value)
                                   and any(c.isalpha() for c in value))


# An unquoted value that is code, not a literal: a call or an attribute read
# (``contextvar_token = _context.set(value)`` in a Markdown code block).
_EXPRESSION = re.compile(r"[A-Za-z_][\w.]*\(.*")


def _named_value_is_secret(key: str, value: str, kind: str, quoted: bool) -> bool:
    """Whether ``value``, assigned to ``key`` in a file of ``kind``, is a secret."""
    value = value.strip()
    if is_placeholder(value) or (kind == "code" and len(value) < MIN_CODE_SECRET_CHARS):
        return False
    if not quoted and _EXPRESSION.fullmatch(value):
        return False
    if not is_strong_name(key) or (not quoted and kind == "code"):
        return looks_random(value)
    if not quoted and kind == "doc":  # "Password: required" is a sentence
        return not re.fullmatch(r"[A-Za-z][a-z]*", value)
    return True


class _Redactor:
    """Replaces values in one text, counting what it replaced."""

    def __init__(self) -> None:
        self.count = 0

    def sub(self, pattern: re.Pattern, text: str, is_secret: Callable[[re.Match], bool],
            group: str = "value", keep_breaks: bool = False) -> str:
        """Replace ``group`` of every match of ``pattern`` for which ``is_secret`` holds;
        with ``keep_breaks`` each piece of the value between line breaks is replaced and
        the breaks kept (:data:`_KEY_BODY_BREAK`)."""

        def replace(match: re.Match) -> str:
            if not is_secret(match):
                return match.group(0)
            self.count += 1
            value = match.group(group)
            start, end = match.span(group)
            base = match.start()
            filler = REDACTED
            if keep_breaks:
                filler = "".join(piece if i % 2 else REDACTED if piece else ""
                                 for i, piece in enumerate(_KEY_BODY_BREAK.split(value)))
            return match.group(0)[:start - base] + filler + match.group(0)[end - base:]

        return pattern.sub(replace, text)

    def line(self, line: str, kind: str, has_marker: bool) -> str:
        """Every line rule, in order: the most specific formats first, so the later, looser
        rules see ``[REDACTED]`` instead of a value they might only half cover. Each rule
        runs only where a substring test says it can match (most candidate lines hold just
        the word "key" or "token")."""
        lower = line.lower()
        if "://" in line:
            line = self.sub(_URL_PASSWORD, line, lambda m: _url_password(m.group("value")))
        if ";" in line and "=" in line:
            line = self.sub(_CONNECTION_STRING_KEY, line,
                            lambda m: not is_placeholder(m.group("value")))
        if "-u" in line or "--user" in line:
            line = self.sub(_CLI_USER, line, _cli_password)
        def loose(match: re.Match) -> bool:
            return _loose_value_is_secret(match.group("value"), kind)

        # Each rule's cheap test reads the line as the rules before it left it.
        for needed, pattern in ((lambda text: "=" in text, _INLINE_SETTING),
                                (lambda text: "=" in text and ("?" in text or "&" in text),
                                 _QUERY_SECRET),
                                (lambda text: "-" in text, _SECRET_FLAG),
                                (lambda text: "-p" in text and "login" in text, _LOGIN_P),
                                (lambda text: "-p" in text and ("mysql" in lower
                                                                or "mariadb" in lower),
                                 _MYSQL_P)):
            if needed(line):
                line = self.sub(pattern, line, loose)
        if "</" in line:
            line = self.sub(_XML_SECRET, line, lambda m: _named_value_is_secret(
                m.group("tag"), m.group("value"), "config", quoted=True))
        if "<add" in lower:
            line = self.sub(_ADD_KEY_VALUE, line, lambda m: _named_value_is_secret(
                m.group("key"), m.group("value"), "config", quoted=True))
        if "vault" in lower:
            line = self.sub(_VAULT_LEGACY, line, lambda m: _credential_like(m.group("value")))
        if "auth" in lower and "(" in line:
            line = self.sub(_AUTH_TUPLE, line, lambda m: not is_placeholder(m.group("value")))
        if has_marker:  # a documented webhook's ``XXXXXXXX…`` is a stand-in
            line = self.sub(_TOKEN_FORMATS, line, lambda m: "XXXXXXXX" not in m.group(0))
        if "bearer" in lower or "basic" in lower or "token" in lower:
            line = self.sub(_AUTH_HEADER, line, lambda m: _credential_like(m.group("value")))
        if ("=" in line or ":" in line) and _assigns_a_name(line):
            if "'" in line or '"' in line or "`" in line:
                line = self.sub(_QUOTED_ASSIGNMENT, line, lambda m: _named_value_is_secret(
                    m.group("key"), m.group("value"), kind, quoted=True))
            line = self.sub(_BARE_ASSIGNMENT, line, lambda m: _named_value_is_secret(
                m.group("key"), m.group("value"), kind, quoted=False))
        if "," in line:
            line = self.sub(_QUOTED_PAIR, line, lambda m: _named_value_is_secret(
                m.group("key"), m.group("value"), kind, quoted=True))
        if has_context_word(line):
            line = self.sub(RANDOM_TOKEN, line, _random_unnamed, group=0)
        return line


# A flag's value in a usage text names what goes there (``--token TOKEN``).
_METAVAR = re.compile(r"[A-Z][A-Z_]*")


def _loose_value_is_secret(value: str, kind: str) -> bool:
    """The unquoted value of a flag or an inline setting named as a secret (``--password
    X``, ``PGPASSWORD=X psql``): a secret unless a stand-in, a reference (``$PW``,
    ``%PW%``, ``@file``), a usage text's metavariable or one plain word (prose: "pass the
    --token option"); in code it must look like a credential."""
    value = value.strip("'\"")
    if not value or value[0] in "$%@<{" or is_placeholder(value) or _METAVAR.fullmatch(value):
        return False
    if kind == "code":
        return _credential_like(value)
    return not re.fullmatch(r"[a-z]+", value)


def _url_password(value: str) -> bool:
    """A URL's password, unless a stand-in: a one-letter one (``http://u:p@host`` in a
    test), a placeholder, or a piece of a URL pattern (``git://[path[:]][ref@]``)."""
    return len(value) > 1 and "[" not in value and not is_placeholder(value)


def _cli_password(match: re.Match) -> bool:
    """``-u user:password``, not ``-u 1000:1000`` (docker's uid:gid) or a variable."""
    value = match.group("value")
    return not value.isdigit() and not match.group("user").isdigit() \
        and not is_placeholder(value)


def _random_unnamed(match: re.Match) -> bool:
    """A random-looking value on a line that talks about keys or tokens, unless it is a
    digest named by its algorithm (``sha512-…``, ``sha256:…``), a password hash, a
    generated constraint name (``PK_be5f…``), a public key, a pinned commit
    (``action@517a…``) or an HTTP digest challenge's nonce."""
    before = match.string[max(0, match.start() - 24):match.start()]
    token = match.group(0)
    if _NOT_A_VALUE_AFTER.match(match.string, match.end()) or _ID_BEFORE.search(before):
        return False
    if _NOT_SECRET_TOKEN.match(token) or _NOT_SECRET_BEFORE.search(before):
        return False
    if "$" in match.string and any(h.start() < match.start() and h.end() >= match.end()
                                   for h in PASSWORD_HASH.finditer(match.string)):
        return False
    return DIGEST_PREFIX.search(before) is None and looks_random(token)


# A token that names its own kind: a digest (``sha512-…`` in a lockfile) or a constraint
# name an ORM generated (``PK_``, ``FK_``, ``UQ_``, ``IDX_``, ``REL_``, ``DF_``, ``CHK_``).
_NOT_SECRET_TOKEN = re.compile(r"(?i)(?:sha\d{0,3}|md5|blake\d\w*)[-:]|(?:PK|FK|UQ|IDX|REL|DF|CHK)_")
# Before a token: a public key's name, a pinned commit's ``@``, a digest challenge's field.
_NOT_SECRET_BEFORE = re.compile(
    r"""(?i)(?:public[_-]?key\w*["']?\s*[:=]\s*["']?|[\w./-]@"""
    r"""|\b(?:c?nonce|nextnonce|opaque|response|rspauth)\s*=\s*["']?)$""")


# After a token: it is assigned, called, indexed or has an attribute read, so it is a name;
# or it is cut short on purpose (``eyJhbGciOi...`` in documentation).
_NOT_A_VALUE_AFTER = re.compile(r"\s*(?:=(?!=)|\(|\[|\.[A-Za-z_])|\.\.\.|…")
# Before a token: it is an id (``--job-id 687f…``, ``JobInfo(id='687f…'``), not a secret.
_ID_BEFORE = re.compile(r"""(?i)\bid[\s:="'-]*$|-id\s+$""")


def _compile_custom(pattern: str) -> Callable[[str], tuple[str, int]]:
    r"""A configured pattern: its capture groups are the secret when it has any; otherwise
    the value right after the first ``=`` or ``:`` of the match (a quoted literal: only its
    content, quotes kept), else the whole match. A greedy pattern such as the default
    ``password\s*=\s*["'].*["']`` reaches the last quote of the line; the literals after
    the value are other arguments (``connect(password="", database="prod")``), left as
    they are and searched again for the pattern."""
    compiled = re.compile(pattern)
    first_literal = re.compile(r"""\s*(["'])((?:(?!\1)[^\\\n]|\\.)*)\1""")

    def redact_match(match: re.Match) -> str:
        whole = match.group(0)
        if compiled.groups:
            pieces, last = [], 0
            for index in range(1, compiled.groups + 1):
                start, end = match.span(index)
                if start < 0 or start < last or is_placeholder(match.group(index)):
                    continue
                pieces += [whole[last:start - match.start()], REDACTED]
                last = end - match.start()
            return "".join(pieces) + whole[last:]
        sep = re.search(r"[:=]", whole)
        if sep is None:
            return REDACTED
        head, tail = whole[:sep.end()], whole[sep.end():]
        literal = first_literal.match(tail)
        if literal is not None:
            after = compiled.sub(redact_match, tail[literal.end():])
            value = literal.group(2)
            if value == REDACTED or is_placeholder(value):
                return head + tail[:literal.end()] + after
            return head + tail[:literal.start(2)] + REDACTED + tail[literal.end(2):literal.end()] \
                + after
        if REDACTED in tail:
            return whole
        rest = tail.strip().strip("'\"")
        return whole if not rest or is_placeholder(rest) else head + " " + REDACTED

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
        """Redact ``text`` (the content of ``path``, whose type decides how unquoted
        ``key = value`` lines are read); returns the new text and the number of redactions."""
        if not self.enabled:
            return ScrubResult(text, 0)
        redactor = _Redactor()
        if "PRIVATE KEY" in text:
            text = redactor.sub(_PRIVATE_KEY, text, lambda m: True, keep_breaks=True)
        spans = candidate_lines(text)
        if spans:
            kind = _file_kind(path)
            pieces, last = [], 0
            for (start, end), has_marker in spans:
                pieces += [text[last:start], redactor.line(text[start:end], kind, has_marker)]
                last = end
            text = "".join(pieces) + text[last:]
        total = redactor.count
        for apply in self._custom:
            text, count = apply(text)
            total += count
        return ScrubResult(text, total)


def scrubbing_signature(security: SecurityConfig) -> str:
    """A string that changes exactly when the redaction of an unchanged file would: the
    rules' version and the ``[security]`` settings that choose them."""
    return f"s{SCRUB_VERSION}:{security.scrub_secrets}:{sorted(security.secret_patterns)!r}"


@lru_cache(maxsize=8)
def get_scrubber(enabled: bool, patterns: tuple[str, ...]) -> Scrubber:
    """The scrubber of a configuration (``security.scrub_secrets``,
    ``security.secret_patterns``), compiled once per process."""
    return Scrubber(enabled, patterns)


def scrub_secrets(text: str, path: str = "", security: SecurityConfig | None = None
                  ) -> ScrubResult:
    """The one call for every text that reaches the index or an agent (project files,
    knowledge documents, stashed segments, error messages): redact ``text`` under the
    ``[security]`` settings ``security`` (a :class:`contextd.config.sections.SecurityConfig`; None
    for the defaults). ``path`` names the text's file type ("notes.md", ".env.example"):
    unquoted ``key = value`` lines count as values in configuration and prose files only."""
    security = security or SecurityConfig()
    return get_scrubber(security.scrub_secrets, tuple(security.secret_patterns)).scrub(text, path)
