"""How an answer names a provider whose results it lacks (failed, timed out, still loading).

Its own module, free of the providers' imports: a thin CLI client reads these notes from an
owner's answer (to say what its answer rests on) without loading numpy and the providers.
"""

from __future__ import annotations

from typing import Sequence

LEFT_OUT_NOTE = "provider {} left out: {}"
_LEFT_OUT_HEAD, _LEFT_OUT_TAIL = LEFT_OUT_NOTE.split("{}")[:2]


def left_out_providers(notes: Sequence[str]) -> list[str]:
    """The ids of the providers an answer's notes say were left out."""
    return [note[len(_LEFT_OUT_HEAD):note.index(_LEFT_OUT_TAIL)] for note in notes
            if note.startswith(_LEFT_OUT_HEAD) and _LEFT_OUT_TAIL in note]
