"""contextd's ``[mcp_servers.contextd]`` table in Codex's config.toml, edited as text and
checked by structure.

No TOML writer is needed: the table is appended, replaced or removed as a block of lines, so
comments and the layout of the rest of the file stay as they were, and each result is parsed
again (tomli) and must equal the old document with only that table changed; otherwise the file
is refused with one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import tomli

from contextd.errors import ContextdError

_HEADER = re.compile(r'^\[\s*mcp_servers\s*\.\s*(?:"contextd"|contextd)\s*(?:\..*)?\]\s*(?:#.*)?$')
_ANY_TABLE = re.compile(r"^\s*\[")


def _parse(text: str | None, path: Path) -> dict:
    try:
        return tomli.loads(text or "")
    except tomli.TOMLDecodeError as exc:
        raise ContextdError(f"{path} is not valid TOML ({exc}); contextd leaves it as it is") from None


def _block(name: str, entry: dict) -> str:
    # JSON strings and arrays of strings are valid TOML basic strings and arrays.
    lines = [f"[mcp_servers.{name}]"]
    lines += [f"{key} = {json.dumps(value, ensure_ascii=False)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


def _without_block(text: str) -> tuple[str, bool]:
    """The text without the lines of [mcp_servers.contextd] and its sub-tables, and whether
    there were any."""
    kept: list[str] = []
    inside = found = False
    for line in text.splitlines(keepends=True):
        if _ANY_TABLE.match(line):
            inside = bool(_HEADER.match(line.strip()))
            found = found or inside
        if not inside:
            kept.append(line)
    result = "".join(kept)
    if found and result.endswith("\n\n"):  # the blank line with_entry put before the table
        result = result[:-1]
    return result, found


def _checked(new: str, old_data: dict, name: str, entry: dict | None, path: Path) -> str:
    expected = {**old_data, "mcp_servers": dict(old_data.get("mcp_servers", {}))}
    if entry is None:
        del expected["mcp_servers"][name]
    else:
        expected["mcp_servers"][name] = entry
    if _without_empty_servers(_parse(new, path)) != _without_empty_servers(expected):
        raise ContextdError(f"{path}: mcp_servers.{name} is written in a form contextd cannot "
                          "edit line by line (inline or dotted keys); edit it by hand")
    return new


def _without_empty_servers(data: dict) -> dict:
    return {key: value for key, value in data.items() if key != "mcp_servers" or value}


def with_entry(text: str | None, name: str, entry: dict, path: Path) -> str | None:
    data = _parse(text, path)
    if data.get("mcp_servers", {}).get(name) == entry:
        return text
    rest, _ = _without_block(text or "")
    if rest and not rest.endswith("\n"):
        rest += "\n"
    new = rest + ("\n" if rest.strip() else "") + _block(name, entry)
    return _checked(new, data, name, entry, path)


def without_entry(text: str | None, name: str, path: Path) -> str | None:
    data = _parse(text, path)
    if name not in data.get("mcp_servers", {}):
        return text
    new, _ = _without_block(text or "")
    return _checked(new, data, name, None, path)
