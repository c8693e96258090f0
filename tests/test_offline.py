"""Nothing downloads at run time: grammars and the model work with the network unreachable.

Runs the real code in a subprocess inside a fresh network namespace (``unshare -n``), where
any attempt to reach a host fails at once. Skipped where unprivileged namespaces are refused.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

UNSHARE = shutil.which("unshare")


def _run_offline(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([UNSHARE, "-n", sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module", autouse=True)
def network_namespace():
    if UNSHARE is None or subprocess.run([UNSHARE, "-n", "true"]).returncode != 0:
        pytest.skip("cannot create a network namespace here")


def test_every_grammar_and_chunker_works_offline():
    result = _run_offline("""
        import urllib.request
        try:
            urllib.request.urlopen("https://pypi.org", timeout=2)
            raise SystemExit("network reachable: the test proves nothing")
        except OSError:
            pass
        from contextd.chunkers.grammars import GRAMMARS, get_parser
        for lang in GRAMMARS:
            get_parser(lang).parse(b"x")
        from contextd.chunkers.chunking import chunk_file
        from contextd.config.sections import ContextConfig
        chunked = chunk_file("a.py", b"def f():\\n    return 1\\n", ContextConfig())
        print(len(chunked.chunks))
    """)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) >= 1


def test_embedding_model_loads_offline():
    result = _run_offline("""
        from contextd.config.sections import ContextConfig
        from contextd.embedders.registry import get_embedder
        vector = get_embedder(ContextConfig().embedding).embed_query("parse a config file")
        print(vector.shape[0])
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "384"
