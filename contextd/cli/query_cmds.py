"""``contextd query`` and ``contextd stats``.

A query brings the index up to date first (bootstrapping a directory never indexed, with
progress on stderr), so ``contextd query "..."`` works in any repository with no setup.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from contextd.cli.common import CliState, emit, open_engine, pass_state
from contextd.query_api import QueryRequest, QueryResponse
from contextd.records import ContextScope, to_dict
from contextd.render import context_from_response, render_context

# Lines of each snippet shown in the human-readable listing.
PREVIEW_LINES = 3


def _progress(state: CliState):
    from contextd.progress import terminal_progress

    bootstrap = state.project().config.bootstrap
    return terminal_progress(bootstrap.show_progress, bootstrap.progress_interval_seconds)


def _print_hits(response: QueryResponse) -> None:
    for number, hit in enumerate(response.hits, start=1):
        click.echo(f"{number:>2}. {hit.score:.3f}  {hit.file_path}:{hit.start_line}-"
                   f"{hit.end_line}  {hit.label}  [{', '.join(hit.providers)}]")
        for line in hit.snippet.splitlines()[:PREVIEW_LINES]:
            click.echo(f"      {line}")
    click.echo(f"{response.total} hits, {response.total_tokens} tokens, "
               f"{response.timings_ms.get('total', 0):.0f} ms")


def _print_files(response: QueryResponse) -> None:
    for number, found in enumerate(response.files, start=1):
        lines = ", ".join(f"{start}-{end}" for start, end in found.ranges)
        click.echo(f"{number:>2}. {found.score:.3f}  {found.file_path}  (lines {lines})")
    click.echo(f"{len(response.files)} files, {response.timings_ms.get('total', 0):.0f} ms")


@click.command("query")
@click.argument("text")
@click.option("--k", "k", type=click.IntRange(min=1), help="Results wanted (default: "
              "query.default_k).")
@click.option("--provider", "providers", multiple=True, help="Query only this provider "
              "(repeatable; default: the hybrid and the enabled providers it does not combine).")
@click.option("--budget", type=click.IntRange(min=1), help="Token budget of all snippets.")
@click.option("--path", "paths", multiple=True, help="Only under this path or glob "
              "(repeatable).")
@click.option("--exclude", "excludes", multiple=True, help="Leave out this path or glob "
              "(repeatable).")
@click.option("--lang", "languages", multiple=True, help="Only this language (repeatable).")
@click.option("--kind", "kinds", multiple=True, help="Only this chunk kind, e.g. "
              "CODE_FUNCTION (repeatable).")
@click.option("--min-score", type=click.FloatRange(0.0, 1.0), help="Lowest provider score "
              "kept.")
@click.option("--json", "as_json", is_flag=True, help="Print the response as JSON.")
@click.option("--render", "as_block", is_flag=True, help="Print a <project_context> block.")
@click.option("--files", "by_file", is_flag=True, help="List the files to look at, ranked by "
              "the chunks found in them, instead of the chunks.")
@pass_state
def query_command(state: CliState, text: str, k: int | None, providers: tuple[str, ...],
                  budget: int | None, paths: tuple[str, ...], excludes: tuple[str, ...],
                  languages: tuple[str, ...], kinds: tuple[str, ...],
                  min_score: float | None, as_json: bool, as_block: bool,
                  by_file: bool) -> None:
    """Search the project's context for TEXT.

    \b
    Examples:
      contextd query "where are JWT tokens validated"
      contextd query "retry backoff" --k 5 --lang python --json
      contextd query "RateLimiter" --provider symbol --render
      contextd query "Fix: expired tokens are not refreshed" --files
    """
    if as_json and as_block:
        raise click.UsageError("--json and --render exclude each other")
    if by_file and as_block:
        raise click.UsageError("--files and --render exclude each other")
    request = QueryRequest(
        query=text, k=k, max_tokens=budget, min_score=min_score,
        providers=tuple(providers) or None, wait_for_model=True, by_file=by_file,
        scope=ContextScope(paths=paths, languages=languages, kinds=kinds,
                           exclude_patterns=excludes))
    engine = open_engine(state)
    try:
        engine.ensure_indexed(progress=_progress(state))
        response = engine.query(request)
    finally:
        engine.close()
    for note in response.notes:
        click.echo(f"contextd: {note}", err=True)
    if as_block:
        click.echo(render_context(context_from_response(response)))
    elif as_json or state.as_json:
        sys.stdout.write(json.dumps(to_dict(response), indent=2, ensure_ascii=False) + "\n")
    else:
        (_print_files if by_file else _print_hits)(response)


def _print_stats(data: dict[str, Any]) -> None:
    storage = data.get("storage", {})
    click.echo(f"files: {storage.get('total_files')}  chunks: {storage.get('total_chunks')}  "
               f"database: {storage.get('db_size_mb')} MB  last indexed: "
               f"{storage.get('last_indexed')}")
    click.echo("providers:")
    for provider in data.get("providers", []):
        if not provider["enabled"]:
            state = "disabled"
        elif provider["available"]:
            state = "available"
        else:
            state = "loading" if provider.get("pending") else "unavailable"
        click.echo(f"  {provider['id']:<12} {state:<12} {provider['name']}")
    _print_embedding(data.get("embedding", {}))
    averages = data.get("performance", {}).get("avg_ms", {})
    if averages:
        click.echo("average latency (ms): " + ", ".join(f"{k} {v}" for k, v in averages.items()))
    languages = data.get("languages", {})
    if languages:
        click.echo("languages: " + ", ".join(f"{k} {v}" for k, v in languages.items()))


def _print_embedding(embedding: dict[str, Any]) -> None:
    if not embedding:
        return
    if embedding.get("error"):
        click.echo(f"embedding: {embedding['backend']} unavailable: {embedding['error']}")
        return
    click.echo(f"embedding: {embedding.get('identity')}  queries: "
               f"{embedding.get('query_backend')}")
    if "requests" in embedding:
        rate = embedding.get("texts_per_second")
        click.echo(f"  remote {embedding.get('endpoint')}: {embedding['texts']:,} texts in "
                   f"{embedding['requests']:,} requests"
                   f"{f' ({rate:,} texts/s)' if rate else ''}, {embedding['tokens']:,} tokens, "
                   f"{embedding['retries']:,} retries, {embedding['rate_limit_waits']:,} "
                   f"rate-limit waits ({embedding['rate_limit_wait_s']:.1f} s), "
                   f"{embedding['failures']:,} failed requests")


@click.command("stats")
@pass_state
def stats_command(state: CliState) -> None:
    """Show providers, index size, languages and query performance."""
    engine = open_engine(state)
    try:
        data = engine.stats()
    finally:
        engine.close()
    emit(state, data, _print_stats)
