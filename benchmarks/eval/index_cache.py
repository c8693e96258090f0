"""Where the evaluation keeps an index: one directory per corpus, variant and strategy, named
with a fingerprint of the code and settings that decide what an index holds.

The indexer only re-reads files whose content changed, so an index built before a change to
the chunkers (or the contextualizer, the embedder, the scrubber, …) would be reused as it
was, and a run would measure today's query path over yesterday's chunks. A new fingerprint
gets a fresh directory; the directories of other fingerprints for the same corpus are
removed.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import asdict
from pathlib import Path

import contextd
from contextd.config.sections import ContextConfig

# Parts of the package (relative to it) that shape an index's chunks, texts and vectors.
INDEXING_CODE = ("chunkers", "chunking.py", "contextualize.py", "contextualizers", "indexer",
                 "embedders", "embedding.py", "boundary.py", "generated.py", "scrub.py",
                 "secret_rules.py", "schema.sql", "migrations")
INDEXING_SETTINGS = ("indexing", "chunking", "embedding", "contextualizer", "security")
_CODE_SUFFIXES = (".py", ".scm", ".sql")
FINGERPRINT_CHARS = 12


def fingerprint(config: ContextConfig) -> str:
    """A digest of the indexing code's files and the indexing settings of ``config``."""
    package = Path(contextd.__file__).resolve().parent
    digest = hashlib.blake2b()
    for entry in INDEXING_CODE:
        path = package / entry
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file() and file.suffix in _CODE_SUFFIXES:
                digest.update(file.relative_to(package).as_posix().encode())
                digest.update(file.read_bytes())
    for section in INDEXING_SETTINGS:
        digest.update(repr(asdict(config)[section]).encode())
    return digest.hexdigest()[:FINGERPRINT_CHARS]


def index_dir(parent: Path, name: str, config: ContextConfig) -> Path:
    """``parent/name-<fingerprint>``, created; other fingerprints of ``name`` are removed."""
    target = parent / f"{name}-{fingerprint(config)}"
    for stale in parent.glob(f"{name}-*"):
        suffix = stale.name[len(name) + 1:]
        if stale != target and len(suffix) == FINGERPRINT_CHARS and suffix.isalnum():
            shutil.rmtree(stale, ignore_errors=True)
    target.mkdir(parents=True, exist_ok=True)
    return target
