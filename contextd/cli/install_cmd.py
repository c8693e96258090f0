"""``contextd install`` / ``contextd uninstall``: contextd's MCP server and its instructions in
the configuration of coding agents (:mod:`contextd.agents`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from contextd.agents import plan as planning
from contextd.agents.catalog import AGENTS, SCOPES, Agent
from contextd.agents.launch import serve_command
from contextd.cli.common import CliState, emit, pass_state
from contextd.errors import UsageError


def _options(command):
    command = click.option("--dry-run", is_flag=True,
                           help="Print the changes (as diffs) and write nothing.")(command)
    command = click.option("--yes", "-y", is_flag=True, help="Do not ask before writing.")(command)
    command = click.option("--scope", type=click.Choice(SCOPES), default="project",
                           show_default=True,
                           help="project: this project's files; user: your home folder's.")(command)
    return click.option("--agent", "agent_names", multiple=True, type=click.Choice(list(AGENTS)),
                        help="An agent to set up (repeatable); asked for when omitted.")(command)


def _choose(agent_names: tuple[str, ...], yes: bool) -> list[Agent]:
    if agent_names:
        return [AGENTS[name] for name in dict.fromkeys(agent_names)]
    if yes or not sys.stdin.isatty():
        raise UsageError("name the agents with --agent (e.g. --agent claude-code --agent cursor)")
    for number, agent in enumerate(AGENTS.values(), 1):
        click.echo(f"  {number}. {agent.name:12} {agent.label}", err=True)
    answer = click.prompt("Agents (names or numbers, separated by commas)", err=True)
    chosen = []
    for word in (part.strip() for part in answer.split(",") if part.strip()):
        names = list(AGENTS)
        name = names[int(word) - 1] if word.isdigit() and 0 < int(word) <= len(names) else word
        if name not in AGENTS:
            raise UsageError(f"unknown agent {word!r}; one of: {', '.join(AGENTS)}")
        chosen.append(AGENTS[name])
    return chosen


def _run(state: CliState, agent_names: tuple[str, ...], scope: str, yes: bool, dry_run: bool,
         install: bool) -> None:
    agents = _choose(agent_names, yes)
    root = state.project().root.resolve()
    command = serve_command(root if scope == "project" else None)
    changes = planning.plan(agents, scope, root, Path.home(), command, install)
    pending = [c for c in changes if c.action not in ("unchanged", "absent")]
    if not state.as_json and (dry_run or (pending and not yes)):
        for change in pending:
            click.echo(change.diff(), nl=False)
    if not dry_run and pending and not yes:
        if not sys.stdin.isatty():
            raise UsageError("add --yes to write these changes (or --dry-run to only see them)")
        if not click.confirm("Write these changes?", err=True):
            raise click.exceptions.Exit(1)
    if not dry_run:
        planning.apply(changes, (root, Path.home()))

    def human(rows: list[planning.Change]) -> None:
        verb = "would be" if dry_run else "is"
        for change in rows:
            click.echo(f"{change.action:9} {change.path}  ({change.agent} {change.role})")
        if not pending:
            click.echo(f"nothing to do: contextd {verb} "
                       f"{'already set up' if install else 'not set up'} there")

    emit(state, {"scope": scope, "dry_run": dry_run, "command": command,
                 "changes": [{**change.to_dict(), **({"diff": change.diff()} if dry_run else {})}
                             for change in changes]},
         lambda result: human(changes))


@click.command("install")
@_options
@pass_state
def install_cmd(state: CliState, agent_names: tuple[str, ...], scope: str, yes: bool,
                dry_run: bool) -> None:
    """Add contextd's MCP server and a block of instructions (when to call its tools) to the
    configuration of coding agents.

    \b
    Agents: claude-code, cursor, codex, vscode, gemini, windsurf, zed, opencode.
    Each file is edited by structure, its previous content kept as <file>.contextd-backup;
    a second run changes nothing; `contextd uninstall` undoes it.

    \b
    Examples:
      contextd install                          # asks which agents
      contextd install --agent claude-code --agent codex --yes
      contextd install --agent cursor --scope user --dry-run
    """
    _run(state, agent_names, scope, yes, dry_run, install=True)


@click.command("uninstall")
@_options
@pass_state
def uninstall_cmd(state: CliState, agent_names: tuple[str, ...], scope: str, yes: bool,
                  dry_run: bool) -> None:
    """Take contextd's MCP server and instructions out of coding agents' configuration: a
    file install created is removed, a file it changed gets its previous content back (or,
    when edited since, loses only contextd's entry and block).

    \b
    Examples:
      contextd uninstall --agent claude-code --agent codex --yes
    """
    _run(state, agent_names, scope, yes, dry_run, install=False)
