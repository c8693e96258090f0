"""The MCP tool reference (docs/MCP_TOOLS.md), generated from the tool registry.

Hand-kept tool tables drifted (docs/MCP.md once listed ``query_context`` four times with four
parameter lists). This module writes the reference from what ``tools/list`` answers, in that
order: each tool's description, its annotations, its parameters with types, defaults and
constraints (nested objects flattened to ``scope.paths`` rows), and its answer's fields.
``contextd docs mcp`` prints it; ``tests/test_docs.py`` fails when the committed file differs.
Tools are grouped by the group ``serve --tools`` turns on (:data:`GROUP_TITLES`), each group
where its first tool is listed.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver.tools import Tool

from contextd.mcp.app import declared_tools, registered_tools
from contextd.mcp.engine_handle import EngineHandle
from contextd.mcp.offer import CORE
from contextd.mcp.tool_kinds import GROUP_TITLES

HEADER = """\
# MCP tool reference

<!-- Generated from the tool registry by `contextd docs mcp > docs/MCP_TOOLS.md`; do not edit.
     A tool's text lives in its docstring and parameter schema (contextd/mcp/*_tools.py). -->

Every tool of `contextd serve`, by group. By default the server offers only the core tools:
every listed tool costs an agent context on every request. The other groups are turned on
with `contextd serve --tools GROUP,...` (or `all`) or `[mcp] tools = ["GROUP", ...]` in
context.toml; `[mcp] compatibility = "seed002"` offers them all. Parameters marked
*required* must be given; unknown parameters are refused (`additionalProperties: false`).
Nested objects are flattened: `scope.paths` is the `paths` field of the `scope` object, and
`segments[].text` the `text` field of each item of the `segments` list. How to register the
server, sessions, memory and the knowledge base in context: [MCP.md](MCP.md).
"""

# ToolAnnotations fields in the MCP spec's wording (camelCase, as clients see them).
ANNOTATION_KEYS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def tool_reference() -> str:
    """The whole reference as Markdown. Builds the tools without starting anything: the
    engine handle is never asked for its engine, so no database or model is opened."""
    handle = EngineHandle(root=None, config_path=None)
    tools = registered_tools(handle, tools=["all"])
    offered = {found.name: found.group for found in declared_tools(handle)}
    groups: dict[str, list[Tool]] = {}
    for tool in tools:
        groups.setdefault(offered[tool.name], []).append(tool)
    parts = [HEADER, _summary(groups)]
    for group, members in groups.items():
        parts.append(f"## {GROUP_TITLES[group]}\n")
        parts.extend(_tool_section(tool) for tool in members)
    return "\n".join(parts).rstrip() + "\n"


def _summary(groups: dict[str, list[Tool]]) -> str:
    """One row per tool: its group of ``--tools`` (core: always offered) and its
    description's first paragraph."""
    rows = ["| tool | group | what it does |", "| --- | --- | --- |"]
    for group, members in groups.items():
        switch = "core (always)" if group == CORE else f"`{group}`"
        for tool in members:
            first = (tool.description or "").strip().split("\n\n")[0]
            rows.append(f"| [`{tool.name}`](#{tool.name}) | {switch} | {_cell(first)} |")
    return "\n".join(rows) + "\n"


def _tool_section(tool: Tool) -> str:
    lines = [f"### `{tool.name}`", "", _prose((tool.description or "").strip()), ""]
    annotations = _annotations(tool)
    if annotations:
        lines += [f"Annotations: {annotations}.", ""]
    rows = list(_parameter_rows(tool.parameters))
    if rows:
        lines += ["| parameter | type | default | constraints | description |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| `{name}` | {kind} | {default} | {limits} | {_cell(text)} |"
                  for name, kind, default, limits, text in rows]
    else:
        lines.append("No parameters.")
    fields = _answer_fields(tool.output_schema)
    if fields:
        lines += ["", "Answer fields: " + ", ".join(f"`{name}`" for name in fields) + "."]
    return "\n".join(lines) + "\n"


def _annotations(tool: Tool) -> str:
    if tool.annotations is None:
        return ""
    given = tool.annotations.model_dump(by_alias=True, exclude_none=True)
    return ", ".join(f"`{key}` {json.dumps(given[key])}" for key in ANNOTATION_KEYS
                     if key in given)


def _parameter_rows(schema: dict[str, Any], prefix: str = "",
                    defs: dict[str, Any] | None = None) -> Any:
    """(name, type, default, constraints, description) per parameter, nested ones after
    their parent with dotted names."""
    defs = defs if defs is not None else schema.get("$defs", {})
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        full = f"{prefix}{name}"
        resolved = _resolve(prop, defs)
        if name in required:
            default = "*required*"
        elif "default" in prop:
            default = _value(prop["default"])
        else:
            default = ""
        text = prop.get("description") or resolved.get("description", "")
        yield full, _type(resolved, defs), default, _limits(resolved), text
        if resolved.get("type") == "object" and "properties" in resolved:
            yield from _parameter_rows(resolved, f"{full}.", defs)
        items = _resolve(resolved.get("items", {}), defs)
        if resolved.get("type") == "array" and "properties" in items:
            yield from _parameter_rows(items, f"{full}[].", defs)


def _resolve(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The schema behind a ``$ref``, and an optional's ``anyOf [X, null]`` as X (its
    default, null, says it may be left out)."""
    options = prop.get("anyOf")
    if options:
        kept = [option for option in options if option.get("type") != "null"]
        if len(kept) == 1:
            prop = {**{k: v for k, v in prop.items() if k != "anyOf"}, **kept[0]}
    ref = prop.get("$ref")
    if ref:
        target = defs[ref.rsplit("/", 1)[-1]]
        prop = {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
    return prop


def _type(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + ", ".join(f"`{value}`" for value in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    if "anyOf" in prop:
        return " or ".join(_type(_resolve(option, defs), defs) for option in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(_resolve(prop.get('items', {}), defs), defs)}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        values = _type(_resolve(prop["additionalProperties"], defs), defs)
        return f"object of {values}"
    return kind


def _limits(prop: dict[str, Any]) -> str:
    """Bounds, lengths and patterns, in the words a caller needs."""
    found = []
    for low, high, unit in (("minimum", "maximum", ""), ("exclusiveMinimum", "exclusiveMaximum",
                                                         " (exclusive)"),
                            ("minLength", "maxLength", " characters"),
                            ("minItems", "maxItems", " items")):
        if low in prop and high in prop:
            found.append(f"{_value(prop[low])}-{_value(prop[high])}{unit}")
        elif low in prop:
            found.append(f"≥ {_value(prop[low])}{unit}")
        elif high in prop:
            found.append(f"≤ {_value(prop[high])}{unit}")
    if "pattern" in prop:
        found.append(f"pattern `{prop['pattern']}`")
    return "; ".join(found)


def _answer_fields(schema: dict[str, Any] | None) -> list[str]:
    if not schema:
        return []
    return list(schema.get("properties", {}))


def _value(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _cell(text: str) -> str:
    """Text for one table cell: one line, pipes escaped."""
    return _prose(" ".join(text.split())).replace("|", "\\|")


def _prose(text: str) -> str:
    """Text outside code spans with ``<`` escaped, so ``YYYYMMDD_<name>.md`` is not taken
    for an HTML tag and dropped by the renderer."""
    parts = text.split("`")
    return "`".join(part if index % 2 else part.replace("<", "&lt;")
                    for index, part in enumerate(parts))
