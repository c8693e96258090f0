"""``contextd docs``: reference documents generated from the code, so they cannot drift."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("docs")
def docs_group() -> None:
    """Print reference documents generated from the code.

    \b
    Examples:
      contextd docs mcp > docs/MCP_TOOLS.md     # the MCP tool reference
      contextd docs mcp --check docs/MCP_TOOLS.md
    """


@click.command("mcp")
@click.option("--check", "check_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Compare with this file instead of printing; exit 1 when it differs.")
def mcp_reference(check_path: Path | None) -> None:
    """The MCP tool reference (names, descriptions, annotations, parameters with types,
    defaults and constraints, answer fields), from the server's tool registry."""
    from contextd.mcp.reference import tool_reference

    text = tool_reference()
    if check_path is None:
        click.echo(text, nl=False)
        return
    current = check_path.read_text(encoding="utf-8") if check_path.exists() else ""
    if current != text:
        click.echo(f"contextd: {check_path} is out of date; regenerate it with "
                   f"`contextd docs mcp > {check_path}`", err=True)
        raise SystemExit(1)
    click.echo(f"{check_path} is up to date", err=True)


docs_group.add_command(mcp_reference)
