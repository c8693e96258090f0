"""What kind of answer a query wants, from its wording alone.

- ``IMPLEMENTATION``: a change request ("Fix …", "Add …", "Support …", a bug report saying
  what should happen) or a question about where or how something is done ("where are
  redirects followed", "how are timeouts configured"), or a description of what code does,
  worded as its docstring would be ("Prepares the given HTTP headers", "This function
  launches the viewer"). The answer is source code, so the ranking puts source files above
  documentation, tests and changelogs that talk about it.
- ``USAGE``: how to use something ("how do I …", "how to …", "example of …"): documentation
  and examples are fair answers; no file role is preferred.
- ``TESTS``: the query is about tests ("test for …"): tests are the answer.
- ``NEUTRAL``: anything else (keywords, a name): no file role is preferred.

Decided from the query's words, never from lists per repository; the factors applied per
file role are named in ``[ranking]``.
"""

from __future__ import annotations

import enum
import re


class QueryIntent(str, enum.Enum):
    """What kind of answer a query wants (see the module docstring)."""

    IMPLEMENTATION = "implementation"
    USAGE = "usage"
    TESTS = "tests"
    NEUTRAL = "neutral"


_USAGE_RE = re.compile(
    r"^\W*(?:how\s+(?:do|can|should|would|could)\s+(?:i|we|you|one)\b|how\s+to\b"
    r"|(?:is|are)\s+there\s+(?:a|an|any)\s+(?:way|option)|what(?:'s|\s+is)\s+the\s+(?:best\s+)?"
    r"way\s+to\b)|\b(?:example|examples|tutorial|usage)\s+(?:of|for)\b", re.I)
_QUESTION_RE = re.compile(
    r"^\W*(?:where\b|which\s+(?:file|files|module|modules|function|functions|class|classes|"
    r"code|method|methods)\b|how\s+(?:is|are|does|do|did|was|were)\b|what\s+(?:code|function|"
    r"method|class|module)\b)", re.I)
_IMPLEMENTED_RE = re.compile(r"\b(?:implemented|implementation|defined|handled|computed)\b",
                             re.I)
# An imperative first word as commit messages and issue titles start ("Fix …", "Add …").
_CHANGE_VERBS = frozenset("""
fix fixes fixed add adds added allow allows support supports implement implements make remove
removes removed drop drops handle handles avoid prevent ensure raise raises return returns
rename refactor replace use update change changes improve improves expose deprecate move
correct show display respect honor honour accept reject skip preserve keep pass forward
validate check enable disable introduce restore revert optimize optimise speed reduce
exclude include ignore surface retrieve put apply align normalize normalise disallow convert
simplify extract split merge migrate register wrap limit sort filter set clean cleanup unify
""".split())
_BUG_RE = re.compile(
    r"\b(?:should(?:n't|\s+not)?|must|bug|broken|crash(?:es|ed)?|fails?|failing|regression|"
    r"incorrect(?:ly)?|wrong(?:ly)?|instead\s+of|doesn't|does\s+not|is\s+ignored|are\s+ignored|"
    r"not\s+(?:work|respected|honou?red|applied))\b", re.I)
_TRACKER_PREFIX_RE = re.compile(r"^\s*(?:fix(?:es|ed)?|feat(?:ure)?|bug|perf|refactor)"
                                r"(?:\([^)]*\))?!?\s*:", re.I)
# A description of what code does, as a docstring opens: "This function …", or a verb in the
# third person followed by what it acts on ("Prepares the …", "Closes all …"). A leading
# plural noun ("Options for …", "Headers are …") is not followed by a determiner.
_DESCRIPTION_RE = re.compile(
    r"^\W*(?:this\s+(?:function|method|class|module|decorator|property|helper|hook)\b"
    r"|[a-z]{3,}(?<![su])s\s+(?:a|an|the|this|that|these|those|all|any|each|every|its|their|"
    r"given|one|some|whether|if)\b)", re.I)
_FIRST_WORD_RE = re.compile(r"[A-Za-z']+")
# The area a commit message names before its verb, as many projects write the title
# ("tsdb: fix …", "cmd/promtool: add …", "web/ui: …", "v3 API: wire …"): one to three words
# or paths and a colon. Without it the area was read as the first word: 10 of prometheus's
# 39 sampled change requests counted as one, 29 do with it.
_AREA_PREFIX_RE = re.compile(r"^\W*(?:[\w./@-]+(?:\s+[\w./@-]+){0,2}(?:\([^)]*\))?!?:\s+)+")


# A Conventional Commits type: the kind of change, not the part of the project ("fix:",
# "chore:"); its scope in brackets is the part ("fix(clearorders):").
_CHANGE_TYPES = frozenset("""
fix fixes fixed feat feature bug bugfix chore docs doc test tests refactor perf build ci style
revert release deps security wip hotfix breaking
""".split())
_SCOPE_RE = re.compile(r"\(([^)]*)\)!?:\s*$")
_AREA_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def title_area(query: str) -> tuple[str, ...]:
    """The words of the area a change request's title names before its colon, lower-cased:
    ``cmd/promtool: add …`` -> cmd, promtool; ``fix(clearorders): …`` -> clearorders;
    ``PromQL: …`` -> promql. A Conventional Commits type alone (``fix:``, ``chore:``) names
    no area. Projects lay their code out by these areas, so the area says where the change
    is as plainly as a path would (:func:`contextd.query.understanding.boost_factor`)."""
    match = _AREA_PREFIX_RE.match(query)
    if not match:
        return ()
    prefix = match.group(0).strip()
    scope = _SCOPE_RE.search(prefix)
    head = prefix[:scope.start()] if scope else prefix.rstrip("!:").strip()
    text = scope.group(1) if scope else ("" if head.lower() in _CHANGE_TYPES else head)
    words = (w.lower() for w in _AREA_WORD_RE.findall(text))
    return tuple(dict.fromkeys(w for w in words if w not in _CHANGE_TYPES and len(w) >= 2))


def classify(query: str, about_tests: bool) -> QueryIntent:
    """The intent of a query (see the module docstring); ``about_tests``: it names tests."""
    if about_tests:
        return QueryIntent.TESTS
    if _USAGE_RE.search(query):
        return QueryIntent.USAGE
    if _QUESTION_RE.search(query) or _IMPLEMENTED_RE.search(query):
        return QueryIntent.IMPLEMENTATION
    firsts = (_FIRST_WORD_RE.search(text) for text in
              (query, _AREA_PREFIX_RE.sub("", query, count=1)))
    if _TRACKER_PREFIX_RE.match(query) or any(first and first.group(0).lower() in _CHANGE_VERBS
                                              for first in firsts):
        return QueryIntent.IMPLEMENTATION
    if _BUG_RE.search(query) or _DESCRIPTION_RE.search(query):
        return QueryIntent.IMPLEMENTATION
    return QueryIntent.NEUTRAL
