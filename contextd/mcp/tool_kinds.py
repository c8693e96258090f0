"""The MCP tool annotations the tool modules share: what a client may assume of a call."""

from __future__ import annotations

from mcp_types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Writes that add or change and may be repeated to the same effect.
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                        open_world_hint=False)
# Writes that add a record each time (a report of usage).
APPEND = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                         open_world_hint=False)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                         open_world_hint=False)
# Rebuilds: they drop indexed data before writing it again; a repeat ends the same.
REBUILD = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                          open_world_hint=False)
