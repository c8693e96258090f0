"""A third-party chunker, installed from a temp directory through the ``contextd``
entry-point group, is found and used by ``contextd chunks`` with no change here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

PLUGIN = textwrap.dedent('''
    """A toy chunker for .lines files: one chunk per line."""
    from contextd import hookimpl
    from contextd.records import Chunk, ChunkKind


    class LinesChunker:
        name = "lines"
        language = "lines"
        extensions = (".lines",)
        filenames = ()

        def chunk(self, text, path, settings):
            chunks, offset = [], 0
            for number, line in enumerate(text.split("\\n"), 1):
                size = len(line.encode("utf-8"))
                if line.strip():
                    chunks.append(Chunk(text=line, kind=ChunkKind.PARAGRAPH,
                                        label=f"line {number}", language="lines",
                                        start_line=number, end_line=number,
                                        start_byte=offset, end_byte=offset + size,
                                        tokens=len(line.split())))
                offset += size + 1
            return chunks


    @hookimpl
    def register_chunkers(register):
        register(LinesChunker())
''')


def install_plugin(site: Path) -> None:
    (site / "contextd_lines_plugin.py").write_text(PLUGIN)
    dist = site / "contextd_lines_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: contextd-lines-plugin\n"
                                   "Version: 0.1\n")
    (dist / "entry_points.txt").write_text("[contextd]\nlines = contextd_lines_plugin\n")


def run_chunks(site: Path, target: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env.pop("CONTEXTD_LOAD_PLUGINS", None)
    proc = subprocess.run([sys.executable, "-m", "contextd", "--root", str(target.parent),
                           "chunks", str(target), "--json"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_third_party_chunker_is_used_for_its_extension(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site)
    target = tmp_path / "project" / "notes.lines"
    target.parent.mkdir()
    target.write_text("alpha beta\n\ngamma\n")
    result = run_chunks(site, target)
    assert result["language"] == "lines"
    assert [(c["label"], c["text"], c["start_line"]) for c in result["chunks"]] == [
        ("line 1", "alpha beta", 1), ("line 3", "gamma", 3)]


def test_without_the_plugin_the_file_falls_back_to_text(tmp_path: Path) -> None:
    target = tmp_path / "notes.lines"
    target.write_text("alpha beta\n\ngamma\n")
    empty_site = tmp_path / "empty"
    empty_site.mkdir()
    # No chunker claims .lines now, so the default extensions leave it out; once the
    # project allows it, the text chunker cuts it.
    (tmp_path / "context.toml").write_text(
        '[indexing]\nallowed_extensions = [".lines", ".txt"]\n')
    result = run_chunks(empty_site, target)
    assert result["language"] == "text"
    assert [c["kind"] for c in result["chunks"]] == ["PARAGRAPH"]
