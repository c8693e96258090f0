"""How an MCP tool is declared: a method of a tool class marked ``@tool(KIND)``, where KIND
is one of the annotations below (what a client may assume of a call). The server registers
the marked methods of each tool class, in the order they are written (:func:`tools_of`)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from mcp_types import ToolAnnotations

from contextd.config.sections import MCP_TOOL_GROUPS
from contextd.mcp.offer import CORE

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

# The heading of each group in docs/MCP_TOOLS.md (contextd.mcp.reference).
GROUP_TITLES = {
    CORE: "Core tools (always offered)",
    "admin": "`admin`: index jobs, configuration, the web Index Manager",
    "memory": "`memory`: agent memory",
    "knowledge": "`knowledge`: knowledge contexts",
    "contextual": "`contextual`: contextual retrieval and token usage",
    "reports": "`reports`: research sessions and reports",
    "related": "`related`: code like a given location",
}


class DeclaredTool(NamedTuple):
    name: str
    function: Callable[..., Any]
    annotations: ToolAnnotations
    group: str


def tool(kind: ToolAnnotations, *, profile: str | None = None, group: str | None = None
         ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a tool class's method as an MCP tool named after it; its signature and docstring
    are the tool's schema and description. ``profile``: offered only under that
    ``[mcp] compatibility``. ``group``: the tool group it belongs to, when not its class's
    ``GROUP``."""
    def mark(method: Callable[..., Any]) -> Callable[..., Any]:
        method.mcp_tool = (kind, profile, group)  # type: ignore[attr-defined]
        return method

    return mark


def tools_of(owner: Any, compatibility: str) -> list[DeclaredTool]:
    """The marked methods of ``owner``'s class, bound, in the order they are written, those
    of another compatibility profile left out."""
    found = []
    for name, member in vars(type(owner)).items():
        kind, profile, group = getattr(member, "mcp_tool", (None, None, None))
        if kind is not None and profile in (None, compatibility):
            group = group or type(owner).GROUP
            if group not in (CORE, *MCP_TOOL_GROUPS):
                raise ValueError(f"{name}: {group!r} is not a tool group")
            found.append(DeclaredTool(name, getattr(owner, name), kind, group))
    return found
