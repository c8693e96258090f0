"""semble 0.7.0 answering change requests, BM25-only, as a peer row of ``bench_scale.py``.

Run with the Python of a separate virtualenv that holds semble (its dependencies, model2vec
and vicinity, must not enter contextd's)::

    python3 -m venv /work/venvs/semble && /work/venvs/semble/bin/pip install semble==0.7.0

Reads ``{"tree": PATH, "queries": [TEXT, ...], "top_k": N}`` as JSON on stdin and writes
``[[{"file_path", "start_line", "end_line", "text"}, ...] per query]`` as JSON on stdout.

semble's own model cannot be downloaded here, and with ``alpha=0.0`` its search ranks by
BM25 plus its boosts and path penalties alone (the semantic scores are multiplied by 0).
It still builds and queries a vector index, so it is handed a placeholder static model: two
tokens, 8-dimensional vectors, saved to a temporary folder and loaded from there. Nothing in
the ranking reads it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

PLACEHOLDER_DIM = 8


def placeholder_model(folder: Path) -> str:
    """A static model2vec model whose vectors nothing reads (semble BM25-only)."""
    import numpy as np
    from model2vec import StaticModel
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tokenizer = Tokenizer(WordLevel({"[UNK]": 0, "[PAD]": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    vectors = np.eye(2, PLACEHOLDER_DIM, dtype=np.float32)
    StaticModel(vectors, tokenizer, normalize=True).save_pretrained(str(folder))
    return str(folder)


def main() -> int:
    from semble import SembleIndex

    request = json.load(sys.stdin)
    with tempfile.TemporaryDirectory() as folder:
        index = SembleIndex.from_path(request["tree"], model_path=placeholder_model(Path(folder)))
        answers = [[{"file_path": r.chunk.file_path, "start_line": r.chunk.start_line,
                     "end_line": r.chunk.end_line, "text": r.chunk.content}
                    for r in index.search(text, top_k=request["top_k"], alpha=0.0)]
                   for text in request["queries"]]
    json.dump(answers, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
