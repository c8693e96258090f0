"""The documentation cannot drift from the code: the MCP tool reference is what the registry
produces, and README.md and docs/ hold each tool's row once."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from contextd.mcp.app import build_app
from contextd.mcp.engine_handle import EngineHandle
from contextd.mcp.reference import tool_reference

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "docs" / "MCP_TOOLS.md"
HAND_WRITTEN = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def listed_tools():
    """What a client gets from tools/list with every group turned on."""
    return anyio.run(build_app(EngineHandle(None, None), tools=["all"]).list_tools)


def test_committed_reference_is_what_the_registry_produces():
    assert REFERENCE.read_text(encoding="utf-8") == tool_reference(), (
        "docs/MCP_TOOLS.md is out of date: run `contextd docs mcp > docs/MCP_TOOLS.md`")


def test_reference_documents_every_listed_tool_and_parameter():
    text = tool_reference()
    for tool in listed_tools():
        assert "\n        " not in tool.description, f"{tool.name}: docstring indentation sent"
        section = text.split(f"### `{tool.name}`\n", 1)[1].split("\n### ", 1)[0]
        assert text.count(f"### `{tool.name}`\n") == 1
        for name in tool.input_schema.get("properties", {}):
            assert f"| `{name}` |" in section, (tool.name, name)
        for name in tool.input_schema.get("required", []):
            assert re.search(rf"\| `{name}` \| [^|]+ \| \*required\* \|", section), name
        if tool.annotations and tool.annotations.destructive_hint:
            assert "`destructiveHint` true" in section


def test_nested_parameters_show_type_default_and_bounds():
    section = tool_reference().split("### `query_context`\n", 1)[1].split("\n### ", 1)[0]
    assert "| `k` | integer | `null` | ≥ `1` | Most hits to return (default: [query] default_k" in section
    assert "| `filters.maxTokens` | integer | `null` | ≥ `50` |" in section
    assert "| `scope.roles` | list of one of `source`, `test`, `doc`, `config` |" in section


@pytest.mark.slow
def test_check_option_fails_on_a_stale_file(tmp_path):
    stale = tmp_path / "MCP_TOOLS.md"
    stale.write_text(tool_reference().replace("query_context", "query_ctx", 1))
    command = [sys.executable, "-m", "contextd", "docs", "mcp", "--check", str(stale)]
    failed = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert failed.returncode == 1 and "out of date" in failed.stderr
    stale.write_text(tool_reference())
    assert subprocess.run(command, capture_output=True, text=True, cwd=tmp_path,
                          timeout=120).returncode == 0


def test_hand_written_docs_list_each_tool_once():
    """A tool table row (first cell naming tools) appears once across README.md and docs/:
    the reference holds the parameters, the prose tables only point at tools."""
    names = {tool.name for tool in listed_tools()}
    rows: dict[str, list[str]] = {}
    for path in HAND_WRITTEN:
        if path == REFERENCE:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("| "):
                first = line.split("|")[1]
                for name in set(re.findall(r"`([a-z_]+)`", first)) & names:
                    rows.setdefault(name, []).append(f"{path.name}: {line[:60]}")
    repeated = {name: where for name, where in rows.items() if len(where) > 1}
    assert not repeated, repeated
    assert "MCP_TOOLS.md" in (REPO / "docs" / "MCP.md").read_text(encoding="utf-8")
