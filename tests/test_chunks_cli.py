"""``contextd chunks PATH [--json]``: human and JSON output, the global --json flag, errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from contextd.cli import cli

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
    assert result.exit_code == 2


def test_binary_file_is_refused_with_the_reason(tmp_path: Path) -> None:
    blob = tmp_path / "image.dat"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)) * 8)
    result = CliRunner().invoke(cli, ["--root", str(tmp_path), "chunks", str(blob)])
    assert result.exit_code != 0 and result.output == ""
    assert "binary" in str(result.exception) and "NUL byte" in str(result.exception)
