"""Secrets in stashed segments are redacted as they are in the project's files.

The scrubber (:mod:`contextd.scrub.scrubber`) reads a text by its file type: an unquoted
``password = hunter2`` is a literal value in a configuration file or in prose, but in code it
may be a variable, so there only random-looking values go. A segment has no file type, and
read as code (its source empty) it kept ``password = hunter2supersecret`` that the same line
in ``config.yml`` loses. So a segment is read by what it is: code as code (or as the file its
``source`` names), logs and output as configuration (environment dumps, ``KEY=value``),
and messages, decisions, research and task state as prose, where settings are written inline,
several to a sentence ("password = hunter2 and api_key=sk-…"): each clause is scrubbed as its
own line, as the scrubber's line rules expect.
"""

from __future__ import annotations

import re

from contextd.scrub.scrubber import ScrubResult, Scrubber
from contextd.stash.model import SegmentType

# The file name whose type each kind of segment is read as (None: its source, else code).
READ_AS = {
    SegmentType.CODE_BLOCK: None, SegmentType.FILE_CONTENT: None,
    SegmentType.ERROR_LOG: "segment.txt", SegmentType.DEBUG_OUTPUT: "segment.txt",
    SegmentType.MESSAGE: "segment.md", SegmentType.DECISION: "segment.md",
    SegmentType.RESEARCH: "segment.md", SegmentType.TASK_STATE: "segment.md"}
# Where one inline setting of a sentence ends and the next begins.
_CLAUSE_BREAK = re.compile(r"(?<=\S)(?:\s+(?:and|or|but|then)\s+|[,;]\s+)(?=\S)")


def scrub_segment(scrubber: Scrubber, text: str, kind: SegmentType, source: str) -> ScrubResult:
    """``text`` of a segment of ``kind`` with its secrets redacted."""
    read_as = READ_AS.get(kind)
    if read_as is None:
        return scrubber.scrub(text, source)
    if read_as != "segment.md":
        return scrubber.scrub(text, read_as)
    pieces = _CLAUSE_BREAK.split(text)
    breaks = _CLAUSE_BREAK.findall(text)
    scrubbed = scrubber.scrub("\n".join(pieces), read_as)
    if scrubbed.text.count("\n") != len(pieces) - 1:  # a redaction spanned lines: whole text
        return scrubber.scrub(text, read_as)
    clauses = scrubbed.text.split("\n")
    joined = clauses[0] + "".join(b + c for b, c in zip(breaks, clauses[1:]))
    return ScrubResult(joined, scrubbed.redactions)
