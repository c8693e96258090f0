"""One declaration per coding agent: where it reads its MCP servers and its instructions.

Paths are templates over ``{root}`` (the project), ``{home}`` and ``{config}`` (the user's
configuration folder: ``~/.config``, ``~/Library/Application Support`` on macOS, ``%APPDATA%``
on Windows). A scope an agent has no file for is absent from its mapping: contextd refuses
it rather than writing a file the agent never reads. Each declaration cites where its paths
and format come from.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from contextd.errors import UsageError

SCOPES = ("project", "user")
# The name of contextd's entry among the agent's servers.
SERVER_NAME = "contextd"


@dataclass(frozen=True)
class Agent:
    """Where one agent reads contextd's server entry and its instructions, and in what form."""

    name: str                       # the --agent value
    label: str
    config: dict[str, str]          # scope -> config file (path template)
    servers_key: tuple[str, ...]    # the keys down to the table that holds the servers
    entry_style: str                # how a server entry is written (ENTRY_STYLES)
    instructions: dict[str, str] = field(default_factory=dict)  # scope -> instructions file
    # What a created instructions file starts with (Cursor's rule front matter).
    instructions_header: str = ""
    source: str = ""

    @property
    def format(self) -> str:
        return "toml" if self.entry_style == "codex" else "json"

    def config_path(self, scope: str, root: Path, home: Path) -> Path:
        template = self.config.get(scope)
        if template is None:
            other = next(iter(self.config))
            raise UsageError(f"{self.label} reads no {scope}-scope MCP configuration; "
                             f"use --scope {other}")
        return _expand(template, root, home)

    def instructions_path(self, scope: str, root: Path, home: Path) -> Path | None:
        template = self.instructions.get(scope)
        return None if template is None else _expand(template, root, home)


def entry(style: str, command: list[str]) -> dict:
    """The server entry an agent of that style reads, starting ``command``."""
    if style == "opencode":
        return {"type": "local", "command": command, "enabled": True}
    body: dict = {"command": command[0], "args": command[1:]}
    if style == "vscode":
        return {"type": "stdio", **body}
    if style == "zed":
        return {"source": "custom", **body, "env": {}}
    return body


CURSOR_RULE_HEADER = (
    "---\ndescription: When to use contextd's tools (written by contextd install)\n"
    "alwaysApply: true\n---\n\n")

AGENTS: dict[str, Agent] = {agent.name: agent for agent in (
    # https://code.claude.com/docs/en/mcp : project scope .mcp.json, user scope ~/.claude.json,
    # both {"mcpServers": {name: {command, args}}}; memory files CLAUDE.md, ~/.claude/CLAUDE.md.
    Agent("claude-code", "Claude Code",
          {"project": "{root}/.mcp.json", "user": "{home}/.claude.json"},
          ("mcpServers",), "standard",
          {"project": "{root}/CLAUDE.md", "user": "{home}/.claude/CLAUDE.md"},
          source="https://code.claude.com/docs/en/mcp"),
    # https://cursor.com/docs/mcp : .cursor/mcp.json and ~/.cursor/mcp.json, "mcpServers";
    # project rules are .cursor/rules/*.mdc with front matter (user rules live in its settings UI).
    Agent("cursor", "Cursor",
          {"project": "{root}/.cursor/mcp.json", "user": "{home}/.cursor/mcp.json"},
          ("mcpServers",), "standard",
          {"project": "{root}/.cursor/rules/contextd.mdc"},
          instructions_header=CURSOR_RULE_HEADER, source="https://cursor.com/docs/mcp"),
    # https://developers.openai.com/codex/mcp/ : [mcp_servers.<name>] command, args in
    # ~/.codex/config.toml, or .codex/config.toml in a trusted project; instructions AGENTS.md.
    Agent("codex", "Codex CLI",
          {"project": "{root}/.codex/config.toml", "user": "{home}/.codex/config.toml"},
          ("mcp_servers",), "codex",
          {"project": "{root}/AGENTS.md", "user": "{home}/.codex/AGENTS.md"},
          source="https://developers.openai.com/codex/mcp/"),
    # https://code.visualstudio.com/docs/agents/reference/mcp-configuration : .vscode/mcp.json
    # and the profile's mcp.json, top-level "servers" ({type: stdio, command, args});
    # Copilot's repository instructions are .github/copilot-instructions.md.
    Agent("vscode", "VS Code (Copilot)",
          {"project": "{root}/.vscode/mcp.json", "user": "{config}/Code/User/mcp.json"},
          ("servers",), "vscode",
          {"project": "{root}/.github/copilot-instructions.md"},
          source="https://code.visualstudio.com/docs/agents/reference/mcp-configuration"),
    # https://geminicli.com/docs/tools/mcp-server/ : "mcpServers" in .gemini/settings.json or
    # ~/.gemini/settings.json; context files GEMINI.md and ~/.gemini/GEMINI.md.
    Agent("gemini", "Gemini CLI",
          {"project": "{root}/.gemini/settings.json", "user": "{home}/.gemini/settings.json"},
          ("mcpServers",), "standard",
          {"project": "{root}/GEMINI.md", "user": "{home}/.gemini/GEMINI.md"},
          source="https://geminicli.com/docs/tools/mcp-server/"),
    # https://www.alivemcp.com/seo/mcp-server-windsurf : only ~/.codeium/windsurf/mcp_config.json
    # ("mcpServers", command + args), no project file; global rules in memories/global_rules.md.
    Agent("windsurf", "Windsurf",
          {"user": "{home}/.codeium/windsurf/mcp_config.json"},
          ("mcpServers",), "standard",
          {"user": "{home}/.codeium/windsurf/memories/global_rules.md"},
          source="https://www.alivemcp.com/seo/mcp-server-windsurf"),
    # https://surrealdb.com/docs/agent-memory/integrations/mcp-server/coding-assistants/zed.md :
    # "context_servers" ({source: custom, command, args, env}) in ~/.config/zed/settings.json or
    # .zed/settings.json (JSON with comments); Zed's agent reads a project AGENTS.md.
    Agent("zed", "Zed",
          {"project": "{root}/.zed/settings.json", "user": "{home}/.config/zed/settings.json"},
          ("context_servers",), "zed",
          {"project": "{root}/AGENTS.md"},
          source="https://surrealdb.com/docs/agent-memory/integrations/mcp-server/coding-assistants/zed.md"),
    # https://opencode.ai/docs/mcp-servers : "mcp" in opencode.json or
    # ~/.config/opencode/opencode.json ({type: local, command: [...]}); rules AGENTS.md.
    Agent("opencode", "opencode",
          {"project": "{root}/opencode.json", "user": "{home}/.config/opencode/opencode.json"},
          ("mcp",), "opencode",
          {"project": "{root}/AGENTS.md", "user": "{home}/.config/opencode/AGENTS.md"},
          source="https://opencode.ai/docs/mcp-servers"),
)}


def _config_dir(home: Path) -> Path:
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    return home / ".config"


def _expand(template: str, root: Path, home: Path) -> Path:
    return Path(template.format(root=root, home=home, config=_config_dir(home)))
