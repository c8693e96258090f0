"""contextd's server entry in an agent's JSON configuration, edited by structure.

The file is parsed and written back whole, other keys and servers untouched. A file that is
not plain JSON (comments, trailing commas: VS Code, Zed and opencode accept them) is refused
with one line instead of being rewritten without its comments."""

from __future__ import annotations

import json
import re
from pathlib import Path

from contextd.errors import ContextdError


def _load(text: str | None, path: Path) -> dict:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ContextdError(
            f"{path} is not plain JSON ({exc}); contextd will not rewrite it and lose its "
            "comments") from None
    if not isinstance(data, dict):
        raise ContextdError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def _servers(data: dict, keys: tuple[str, ...], path: Path, create: bool) -> dict | None:
    node = data
    for key in keys:
        child = node.get(key)
        if child is None and create:
            child = node[key] = {}
        if child is None:
            return None
        if not isinstance(child, dict):
            raise ContextdError(f"{path}: {'.'.join(keys)} is not a JSON object")
        node = child
    return node


def _dump(data: dict, like: str | None) -> str:
    """JSON indented as the file it replaces was (two spaces for a new file)."""
    found = re.search(r"\n([ \t]+)\S", like or "")
    indent = found.group(1) if found else "  "
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def with_entry(text: str | None, keys: tuple[str, ...], name: str, entry: dict,
               path: Path) -> str | None:
    """The file with ``entry`` under ``keys`` / ``name`` (the same text when it is there)."""
    try:
        data = _load(text, path)
    except ContextdError as exc:
        where = " > ".join(f'"{key}"' for key in keys)
        raise ContextdError(f"{exc}: add it by hand under {where}: "
                            f'"{name}": {json.dumps(entry, ensure_ascii=False)}') from None
    servers = _servers(data, keys, path, create=True)
    assert servers is not None
    if servers.get(name) == entry:
        return text
    servers[name] = entry
    return _dump(data, text)


def without_entry(text: str | None, keys: tuple[str, ...], name: str,
                  path: Path) -> str | None:
    """The file without the entry ``name`` (the same text when it is not there)."""
    data = _load(text, path)
    servers = _servers(data, keys, path, create=False)
    if servers is None or name not in servers:
        return text
    del servers[name]
    return _dump(data, text)
