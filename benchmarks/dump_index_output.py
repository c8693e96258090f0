"""What the lexical index path makes of a project, line by line, to prove a speed-up changed
nothing (issue 37): run it before and after a change and ``diff`` the two dumps.

For every file the boundary accepts, in the indexer's order: the scrubbed text's hash and
the scrub's redactions, the decode warnings and parse error, then one line per chunk (ordinal,
lines, bytes, kind, label, tokens, parent, hashes of its text, context, index text and BM25
tokens, the prefix's quality (an LLM prefix's only: a structural one is rated when a report
asks) and tokens, its references) and one line per symbol it defines.
Hashes keep the dump small; any changed byte changes a hash.

    .venv/bin/python benchmarks/dump_index_output.py /work/corpora/r/typeorm > /tmp/before.txt
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from contextd.boundary.walk import Boundary
from contextd.chunkers.chunking import chunk_file
from contextd.config.project import Project
from contextd.contextualizers.stage import index_texts
from contextd.indexer.worker import scrubber_for
from contextd.providers.fulltext import code_tokens


def digest(text: str) -> str:
    """A short hash of ``text``: enough to tell any change apart in a diff."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def dump(root: Path, out) -> int:
    """Write the dump of the project at ``root`` to ``out``; returns the chunks written."""
    project = Project.open(root)
    config = project.config
    scrubber = scrubber_for(config)
    written = 0
    for entry in Boundary(project).scan().accepted:
        data = Path(entry.abs_path).read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            out.write(f"F\t{entry.path}\tundecodable\n")
            continue
        scrubbed = scrubber.scrub(text, entry.path)
        result = chunk_file(entry.path, scrubbed.text.encode("utf-8"), config)
        texts = index_texts(scrubbed.text, entry.path, result.chunks, config)
        out.write(f"F\t{entry.path}\t{digest(scrubbed.text)}\t{scrubbed.redactions}\t"
                  f"{result.language}\t{result.warnings!r}\t{result.parse_error!r}\n")
        for n, (chunk, item) in enumerate(zip(result.chunks, texts)):
            out.write(f"C\t{entry.path}\t{n}\t{chunk.start_line}-{chunk.end_line}\t"
                      f"{chunk.start_byte}-{chunk.end_byte}\t{chunk.kind}\t{chunk.label!r}\t"
                      f"{chunk.tokens}\t{chunk.parent!r}\t{digest(chunk.text)}\t"
                      f"{digest(chunk.context)}\t{digest(item.text)}\t"
                      f"{digest(' '.join(code_tokens(item.text)))}\t{item.contextualized}\t"
                      f"{item.prefix_quality!r}\t{item.prefix_tokens}\t"
                      f"{digest(' '.join(chunk.references))}\n")
            for symbol in chunk.defines:
                out.write(f"S\t{entry.path}\t{n}\t{symbol.name}\t{symbol.kind}\t"
                          f"{symbol.line}\n")
            written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("project", type=Path, help="the project to dump (read only)")
    args = parser.parse_args()
    chunks = dump(args.project.resolve(), sys.stdout)
    print(f"{chunks} chunks", file=sys.stderr)


if __name__ == "__main__":
    main()
