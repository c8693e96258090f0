"""Guards of the version numbers in the index signature (contextd.indexer.core.index_signature).

An existing index is re-chunked and re-scrubbed after an upgrade only when CHUNKING_VERSION or
SCRUB_VERSION moves; a change to chunk boundaries or to what is redacted that forgets the bump
leaves old chunks (and any credential the old rules let through) in every existing index. These
tests record what each version produces on fixed samples and fail when it changes under the
same number: bump the version, then record the new digest printed by the failure.
"""

from __future__ import annotations

import hashlib

from contextd.chunkers.chunking import CHUNKING_VERSION, chunk_file
from contextd.config.sections import ContextConfig
from contextd.scrub.scrubber import SCRUB_VERSION, scrub_secrets
from golden import GOLDEN_REPO
from secrets_corpus import generate

# Version 4 (other grammar wheels) moved Kotlin units and a few Python cut points in long
# functions, none of them in the golden repository, whose digest is unchanged.
CHUNK_DIGESTS = {3: "460fbb342b4eda07", 4: "460fbb342b4eda07"}
# Version 1's digest was taken on the corpus before issue 28 added its forms to it.
SCRUB_DIGESTS = {1: "9326beb49b780c5c", 2: "b176823328ca044a", 3: "62a1f8d9641ff99b"}


def chunk_boundaries_digest() -> str:
    """Every chunk's place and shape in the golden repository's files."""
    config, rows = ContextConfig(), []
    for path in sorted(p for p in GOLDEN_REPO.rglob("*") if p.is_file()):
        rel = path.relative_to(GOLDEN_REPO).as_posix()
        rows += [(rel, c.start_line, c.end_line, str(c.kind), c.label)
                 for c in chunk_file(rel, path.read_bytes(), config).chunks]
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def redaction_digest() -> str:
    """The seeded credential corpus (secrets and look-alikes) as the scrubber leaves it."""
    files = generate().files
    scrubbed = [(path, scrub_secrets(files[path], path).text) for path in sorted(files)]
    return hashlib.sha256(repr(scrubbed).encode()).hexdigest()[:16]


def test_chunk_boundaries_belong_to_the_chunking_version():
    digest = chunk_boundaries_digest()
    assert CHUNK_DIGESTS.get(CHUNKING_VERSION) == digest, (
        f"chunk boundaries changed ({digest}) under CHUNKING_VERSION {CHUNKING_VERSION}: bump "
        "it so existing indexes are re-chunked, and record the digest in CHUNK_DIGESTS")


def test_redaction_belongs_to_the_scrub_version():
    digest = redaction_digest()
    assert SCRUB_DIGESTS.get(SCRUB_VERSION) == digest, (
        f"redaction changed ({digest}) under SCRUB_VERSION {SCRUB_VERSION}: bump it so "
        "existing indexes are re-scrubbed, and record the digest in SCRUB_DIGESTS")
