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


# Indexes the project given on the command line without vectors and prints (path, label) of
# its stored chunks: a separate process, so that the plugins on its PYTHONPATH are the ones
# registered.
INDEX_AND_LIST = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from contextd.config.project import Project
    from contextd.indexer import Indexer
    from contextd.store import open_store

    project = Project.open(Path(sys.argv[1]))
    store = open_store(project)
    Indexer(project, store, embed=False).ensure_indexed()
    print(json.dumps([[r.file_path, r.label] for r in store.chunks_for_files()]))
    store.close()
''')
# The lines chunker registered under the built-in text chunker's name: it replaces it.
REPLACING_TEXT = PLUGIN.replace('name = "lines"', 'name = "text"').replace(
    'extensions = (".lines",)', 'extensions = (".txt",)')


def index_and_list(site: Path, root: Path) -> list[list[str]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env.pop("CONTEXTD_LOAD_PLUGINS", None)
    proc = subprocess.run([sys.executable, "-c", INDEX_AND_LIST, str(root)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_chunker_that_replaces_a_built_in_re_chunks_unchanged_files(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("alpha beta\ngamma delta\n")
    empty, site = tmp_path / "empty", tmp_path / "site"
    empty.mkdir()
    site.mkdir()
    install_plugin(site)
    (site / "contextd_lines_plugin.py").write_text(REPLACING_TEXT)

    built_in = index_and_list(empty, root)
    assert [label for path, label in built_in if path == "notes.txt"] != ["line 1", "line 2"]
    replaced = index_and_list(site, root)
    assert [label for path, label in replaced if path == "notes.txt"] == ["line 1", "line 2"]
    # Removing the plugin brings the built-in's chunks back, again with no file changed.
    assert index_and_list(empty, root) == built_in
