"""``contextd search``: search sessions from the command line.

The same sessions as the MCP tools search_knowledge / get_search_results /
list_search_results: they live in the index, so a session made by an agent's MCP server can be
read here and the other way round.
"""

from __future__ import annotations

import json
import sys

import click

from contextd.cli.common import CliState, open_engine, pass_state, shown
from contextd.records import to_dict
from contextd.sessions.records import SearchRequest

# Lines of each result shown in the listing of a new session.
PREVIEW_LINES = 3


@click.command("search")
@click.argument("query", required=False)
@click.option("--file", "files", multiple=True, help="Only this file, relative to the root "
              "(repeatable).")
@click.option("--folder", "folders", multiple=True, help="Only under this folder: a name "
              "anywhere ('hooks'), from the root ('/src/hooks') or a glob (repeatable).")
@click.option("--context", "contexts", multiple=True, help="Also search this knowledge "
              "context (repeatable).")
@click.option("--min-similarity", type=click.FloatRange(0.0, 1.0),
              help="Keep results scoring at least this (0-1).")
@click.option("--list", "list_sessions", is_flag=True, help="List the sessions, newest "
              "first.")
@click.option("--show", "show", multiple=True, metavar="SESSION_ID",
              help="Print the full results of a session (repeatable).")
@click.option("--limit", type=click.IntRange(min=1), help="With --show: results per session "
              "(default: sessions.default_limit).")
@pass_state
def search_command(state: CliState, query: str | None, files: tuple[str, ...],
                   folders: tuple[str, ...], contexts: tuple[str, ...],
                   min_similarity: float | None, list_sessions: bool, show: tuple[str, ...],
                   limit: int | None) -> None:
    """Search QUERY and keep the results as a session; or list sessions, or show them.

    \b
    Examples:
      contextd search "how are invoices totalled" --folder billing
      contextd search --list
      contextd search --show search_1a2b3c4d --show search_5e6f7a8b --limit 10
      contextd --json search "retry policy"
    """
    modes = sum((query is not None, list_sessions, bool(show)))
    if modes != 1:
        raise click.UsageError("give a QUERY, --list or --show SESSION_ID (one of them)")
    if limit is not None and not show:
        raise click.UsageError("--limit goes with --show")
    engine = open_engine(state)
    try:
        if list_sessions:
            answer, human = engine.list_search_results(), _print_list
        elif show:
            answer, human = engine.get_search_results(list(show), limit), _print_results
        else:
            from contextd.cli.query_cmds import _progress

            engine.ensure_indexed(progress=_progress(state))
            answer = engine.search_knowledge(SearchRequest(
                query=query, min_similarity=min_similarity, files=files, folders=folders,
                contexts=contexts))
            human = _print_session
    finally:
        engine.close()
    if state.as_json:
        sys.stdout.write(json.dumps(to_dict(answer), indent=2, ensure_ascii=False) + "\n")
    else:
        human(answer)


def _print_session(answer) -> None:
    info = answer.session
    for note in answer.notes:
        click.echo(f"contextd: {note}", err=True)
    for hit in answer.preview:
        click.echo(f"{hit.rank:>2}. {hit.score:.3f}  {shown(hit.location())}  {hit.label}")
        for line in hit.text.splitlines()[:PREVIEW_LINES]:
            click.echo(f"      {line}")
    click.echo(f"session {info.session_id}: {info.result_count} results "
               f"(contextd search --show {info.session_id})")


def _print_results(answer) -> None:
    for info in answer.sessions:
        click.echo(f"# {info.session_id}  {info.query!r}  ({info.result_count} results)")
        for hit in (h for h in answer.results if h.session_id == info.session_id):
            click.echo(f"\n## {hit.rank}. {hit.location()}  {hit.label}  ({hit.score:.3f})")
            click.echo(hit.file_uri)
            click.echo(hit.text.rstrip())
        click.echo("")
    for note in answer.notes:
        click.echo(f"contextd: {note}", err=True)


def _print_list(answer) -> None:
    for info in answer.sessions:
        click.echo(f"{info.session_id}  {info.created_at}  {info.result_count:>3} results  "
                   f"{info.query}")
    click.echo(f"{len(answer.sessions)} session(s); the last {answer.max_sessions} are kept",
               err=True)
