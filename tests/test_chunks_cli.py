"""``contextd chunks PATH [--json]``: human and JSON output, the global --json flag, errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from contextd.cli import cli
from contextd.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures" / "chunkers"


def invoke(*args: str):
    return CliRunner().invoke(cli, ["--root", str(FIXTURES), *args])


def test_human_output_lists_lines_kind_tokens_and_label() -> None:
    result = invoke("chunks", str(FIXTURES / "sample.py"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith("sample.py: python, 21 chunks")
    assert lines[1].split() == ["1-4", "DOCSTRING", lines[1].split()[2], "tok", "sample"]
    assert any(line.split()[-1] == "Pipeline.step_0" and "CODE_FUNCTION" in line
               for line in lines)


def test_json_output_has_language_warnings_and_chunk_records() -> None:
    result = invoke("chunks", str(FIXTURES / "sample.md"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["language"] == "markdown" and data["warnings"] == []
    first = data["chunks"][0]
    assert first["kind"] == "MARKDOWN_SECTION" and first["label"] == "contextd"
    assert set(first) >= {"text", "kind", "label", "language", "start_line", "end_line",
                          "start_byte", "end_byte", "tokens", "defines", "references",
                          "context", "parent"}


def test_global_json_flag_and_warnings(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9 au lait\n")
    result = CliRunner().invoke(cli, ["--root", str(tmp_path), "--json", "chunks", str(bad)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["language"] == "text"
    assert any("invalid UTF-8" in w for w in data["warnings"])


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--root", str(tmp_path), "chunks",
                                      str(tmp_path / "nope.py")])
    assert isinstance(result.exception, UsageError) and "no such file" in str(result.exception)


def test_binary_file_is_refused_with_the_reason(tmp_path: Path) -> None:
    blob = tmp_path / "image.txt"  # an allowed extension: the content is what refuses it
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)) * 8)
    result = CliRunner().invoke(cli, ["--root", str(tmp_path), "chunks", str(blob)])
    assert result.exit_code != 0 and result.output == ""
    assert "binary" in str(result.exception) and "NUL byte" in str(result.exception)


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "tasks.py").write_text("def run_in_background(job):\n    return job()\n")
    (root / "pkg" / "logo.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg">' + '<path d="M0 0 L10 10 Z"/>' * 400
        + "</svg>\n")
    return root


def test_paths_are_relative_to_the_root_when_run_from_another_folder(tmp_path, monkeypatch):
    """Issue 27: ``contextd --root ~/starlette check-file starlette/background.py`` from
    another folder said outside_boundary; chunks and refresh failed the same way."""
    root = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    check = CliRunner().invoke(cli, ["--root", str(root), "check-file", "pkg/tasks.py"])
    assert check.exit_code == 0 and "pkg/tasks.py: indexable" in check.output, check.output
    chunks = CliRunner().invoke(cli, ["--root", str(root), "--json", "chunks", "pkg/tasks.py"])
    assert chunks.exit_code == 0, chunks.output
    assert json.loads(chunks.stdout)["chunks"][0]["label"] == "run_in_background"
    refresh = CliRunner().invoke(cli, ["--root", str(root), "--json", "refresh",
                                       "pkg/tasks.py"])
    assert refresh.exit_code == 0, refresh.output
    assert json.loads(refresh.stdout)["files_indexed"] == 1
    monkeypatch.chdir(root / "pkg")  # inside the project: relative to where one stands
    inside = CliRunner().invoke(cli, ["--root", str(root), "check-file", "tasks.py"])
    assert inside.exit_code == 0 and "pkg/tasks.py: indexable" in inside.output


def test_a_file_the_index_leaves_out_is_not_chunked(tmp_path):
    """Issue 27: chunks of an SVG that check-file calls not indexable printed 76 chunks."""
    root = _project(tmp_path)
    svg = str(root / "pkg" / "logo.svg")
    check = CliRunner().invoke(cli, ["--root", str(root), "check-file", svg])
    assert check.exit_code == 1 and "not indexable" in check.output, check.output
    result = CliRunner().invoke(cli, ["--root", str(root), "chunks", svg])
    assert isinstance(result.exception, UsageError) and result.output == ""
    assert "is not indexed" in str(result.exception)
