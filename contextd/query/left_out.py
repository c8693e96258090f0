"""How an answer says what it lacks: a provider's results (failed, timed out, still
loading), files not searchable yet.

Its own module, free of the providers' imports: a thin CLI client reads these notes from an
owner's answer (to say what its answer rests on) without loading numpy and the providers.
"""

from __future__ import annotations

from typing import Sequence

LEFT_OUT_NOTE = "provider {} left out: {}"
# Every note meaning "the index is incomplete, retry" starts so (the MCP text then leaves out
# its "Nothing matched" advice).
STILL_INDEXING = "still indexing: "
# Every note meaning "the vectors are incomplete" starts so.
SEMANTIC_PENDING = "semantic results are still being computed"
# The vector index an answer searched held no vector yet for some chunks: the store had none
# yet, or it had just written them and the index had not taken them in (the answer is then
# partial although nothing is being embedded any more).
VECTORS_MISSING_NOTE = (SEMANTIC_PENDING + ": {:,} chunk texts had no vector yet when this "
                        "answer searched; retry in a few seconds")
# Files indexed but not taken into the in-memory indexes yet (contextd.query.catch_up).
CATCHING_UP_NOTE = (STILL_INDEXING + "{:,} files just indexed are not searchable yet (they "
                    "are being taken in); retry in a few seconds")
_LEFT_OUT_HEAD, _LEFT_OUT_TAIL = LEFT_OUT_NOTE.split("{}")[:2]


def left_out_providers(notes: Sequence[str]) -> list[str]:
    """The ids of the providers an answer's notes say were left out."""
    return [note[len(_LEFT_OUT_HEAD):note.index(_LEFT_OUT_TAIL)] for note in notes
            if note.startswith(_LEFT_OUT_HEAD) and _LEFT_OUT_TAIL in note]
