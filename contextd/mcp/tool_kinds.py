"""How an MCP tool is declared: a method of a tool class marked ``@tool(KIND)``, where KIND
is one of the annotations below (what a client may assume of a call). The server registers
the marked methods of each tool class, in the order they are written (:func:`tools_of`)."""

from __future__ import annotations

from typing import Any, Callable

from mcp_types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Writes that add or change and may be repeated to the same effect.
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                        open_world_hint=False)
# Writes that add a record each time (a report of usage, a search session).
APPEND = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                         open_world_hint=False)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                         open_world_hint=False)
# Writes that drop data and end the same when repeated (a re-index, deleting by id).
RESET = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                        open_world_hint=False)

# The ``[mcp] compatibility`` profile with the older tool names some agents call
# (docs/MCP.md).
SEED002 = "seed002"


def tool(kind: ToolAnnotations, *, profile: str | None = None
         ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a tool class's method as an MCP tool named after it; its signature and docstring
    are the tool's schema and description. ``profile``: offered only under that
    ``[mcp] compatibility``."""
    def mark(method: Callable[..., Any]) -> Callable[..., Any]:
        method.mcp_tool = (kind, profile)  # type: ignore[attr-defined]
        return method

    return mark


def tools_of(owner: Any, compatibility: str) -> list[tuple[str, Callable[..., Any],
                                                          ToolAnnotations]]:
    """(name, bound method, annotations) of the marked methods of ``owner``'s class, in the
    order they are written, those of another compatibility profile left out."""
    found = []
    for name, member in vars(type(owner)).items():
        kind, profile = getattr(member, "mcp_tool", (None, None))
        if kind is not None and profile in (None, compatibility):
            found.append((name, getattr(owner, name), kind))
    return found
