"""``contextd query`` and ``contextd stats``.

A query brings the index up to date first (bootstrapping a directory never indexed, with
progress on stderr), so ``contextd query "..."`` works in any repository with no setup.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from contextd.cli.common import (
    COMMAND_STARTED, COMMAND_TIMING, CliState, command_ms, emit, open_engine, pass_state, shown,
    user_path,
)
from contextd.errors import UsageError
from contextd.query.records import QueryRequest, QueryResponse
from contextd.records import ContextScope, to_dict
from contextd.boundary.roles import ROLE_NAMES

# Lines of each snippet shown in the human-readable listing.
PREVIEW_LINES = 3


def _progress(state: CliState):
    from contextd.indexer.progress import terminal_progress

    bootstrap = state.project().config.bootstrap
    return terminal_progress(bootstrap.show_progress, bootstrap.progress_interval_seconds)


def preview(hit: Any) -> list[tuple[int, str]]:
    """(line number, text) of the lines shown under a hit: those that matched the query
    (``metadata["matched_lines"]``), else its first PREVIEW_LINES lines."""
    lines = hit.snippet.split("\n")
    wanted = hit.metadata.get("matched_lines") or range(
        hit.start_line, hit.start_line + min(PREVIEW_LINES, len(lines)))
    return [(n, lines[n - hit.start_line]) for n in wanted
            if 0 <= n - hit.start_line < len(lines)][:PREVIEW_LINES]


def root_relative(pattern: str, root: Path) -> str:
    """A ``--path`` as the index knows it (relative to the project root; see
    :func:`contextd.cli.common.user_path` for what a relative one is relative to). The root
    itself comes back as "" (no restriction)."""
    absolute = os.path.realpath(user_path(pattern, root))
    relative = os.path.relpath(absolute, root)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep):
        raise UsageError(f"--path {pattern} is outside the project root {root}")
    trailing = "/" if pattern.endswith("/") and relative != "." else ""
    return "" if relative == "." else Path(relative).as_posix() + trailing


def _without_semantic(project) -> tuple[str, ...]:
    """The enabled providers that need no embedding model (the hybrid's parts but semantic,
    and those it does not combine), for an answer given before the vectors exist."""
    config = project.config
    return tuple(pid for pid, provider in config.providers.items()
                 if provider.enabled and pid not in ("hybrid", "semantic"))


def _print_hits(response: QueryResponse) -> None:
    for number, hit in enumerate(response.hits, start=1):
        role = f"  ({hit.role})" if hit.role else ""
        if hit.metadata.get("projects"):
            role += f"  project {', '.join(hit.metadata['projects'])}"
        if hit.metadata.get("stale"):
            role += "  stale: lines as on disk now, the file changed since it was indexed"
        click.echo(f"{number:>2}. {hit.score:.3f}  {shown(hit.file_path)}:{hit.start_line}-"
                   f"{hit.end_line}  {hit.label}  [{', '.join(hit.providers)}]{role}")
        for line_number, line in preview(hit):
            click.echo(f"  {line_number:>5} {line}")
    click.echo(f"{len(response.hits)} hits of {response.total} found, "
               f"{response.total_tokens} tokens, {_waited(response)}")


def _print_files(response: QueryResponse) -> None:
    for number, found in enumerate(response.files, start=1):
        lines = ", ".join(f"{start}-{end}" for start, end in found.ranges)
        click.echo(f"{number:>2}. {found.score:.3f}  {shown(found.file_path)}  (lines {lines})")
    click.echo(f"{len(response.files)} files, {_waited(response)}")


def _waited(response: QueryResponse) -> str:
    """``1234 ms`` (the command's whole wait), with the search's own share when it differs:
    a query that waited behind an index catch-up printed its search time alone ("4711 ms"
    after a 21 s wait)."""
    timings = response.timings_ms
    whole = timings.get(COMMAND_TIMING, timings.get("total", 0))
    search = timings.get("total", 0)
    if whole - search >= 1:
        return f"{whole:.0f} ms ({search:.0f} ms searching)"
    return f"{whole:.0f} ms"


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
@click.option("--file", "files", multiple=True, help="Only this file (exact path, repeatable).")
@click.option("--folder", "folders", multiple=True, help="Only in this folder: a name anywhere, "
              "/path from the root, or a glob (repeatable).")
@click.option("--context", "contexts", multiple=True, help="Also search this knowledge "
              "context (repeatable; '*' = all).")
@click.option("--project", "projects", multiple=True, help="Search this project of the "
              "monorepo ([projects.NAME] in context.toml); several are searched each on its "
              "own and fused under one budget ('*' = all).")
@click.option("--role", "roles", multiple=True, type=click.Choice(ROLE_NAMES),
              help="Only files of this role: source, test, doc or config (repeatable).")
@click.option("--min-score", type=click.FloatRange(0.0, 1.0), help="Lowest hit score kept "
              "(scores mean the same across queries).")
@click.option("--memory", help="Also search stashed agent memory of this session ('*': every "
              "session).")
@click.option("--render", "as_block", is_flag=True, help="Print a <project_context> block "
              "(with --json: the response with the block in its 'rendered' field).")
@click.option("--memory-min-similarity", type=click.FloatRange(-1.0, 1.0),
              help="Cut-off of the --memory segments (default [stash] min_similarity).")
@click.option("--files", "by_file", is_flag=True, help="List the files to look at, ranked by "
              "the chunks found in them, instead of the chunks.")
@click.option("--prompt", "as_prompt", is_flag=True, help="Print the task prompt an agent starts "
              "from (TEXT as the task's title, its <project_context> block, the Guidelines).")
@click.option("--task-id", default="", help="With --prompt: the task's id.")
@click.option("--task-type", help="With --prompt: the task's type, e.g. IMPLEMENTATION.")
@click.option("--complexity", type=click.IntRange(1, 10), help="With --prompt: 1-10.")
@click.option("--description", help="With --prompt: the task's description (searched too).")
@click.option("--ab", "ab", is_flag=True, help="Rank with and without the contextual prefixes "
              "side by side: what contextual retrieval changes here.")
@click.option("--expect", "expect", multiple=True, help="With --ab: a file that answers "
              "TEXT; its rank with and without prefixes is shown (repeatable).")
@click.option("--repo", metavar="GIT_URL_OR_PATH", help="Search this repository instead of "
              "the project here: a folder, or a git URL cloned on first use; its index lives "
              "in the cache (~/.cache/contextd/repos/), never in the repository.")
@pass_state
def query_command(state: CliState, text: str, k: int | None, providers: tuple[str, ...],
                  budget: int | None, paths: tuple[str, ...], excludes: tuple[str, ...],
                  languages: tuple[str, ...], kinds: tuple[str, ...], roles: tuple[str, ...],
                  files: tuple[str, ...], folders: tuple[str, ...],
                  contexts: tuple[str, ...], projects: tuple[str, ...],
                  min_score: float | None, memory: str | None,
                  memory_min_similarity: float | None, as_block: bool, by_file: bool,
                  as_prompt: bool, task_id: str, task_type: str | None,
                  complexity: int | None, description: str | None, ab: bool,
                  expect: tuple[str, ...], repo: str | None) -> None:
    """Search the project's context for TEXT.

    \b
    Examples:
      contextd query "where are JWT tokens validated"
      contextd query "retry backoff" --k 5 --lang python --json
      contextd query "RateLimiter" --provider symbol --render
      contextd query "Fix: expired tokens are not refreshed" --files
      contextd query "session timeout" --project backend --project frontend
      contextd query "Fix token refresh" --prompt --task-type BUGFIX --complexity 5
      contextd query "where are tokens refreshed" --ab
      contextd query "how is a redirect followed" --repo https://github.com/encode/httpx
    """
    if not text.strip():
        raise UsageError("the query is empty; say what you are looking for, e.g. "
                         "contextd query \"where are tokens refreshed\"")
    if sum((by_file, as_block, as_prompt, ab)) > 1:
        raise UsageError("--files, --render, --prompt and --ab exclude each other")
    if expect and not ab:
        raise UsageError("--expect goes with --ab")
    if repo is not None:
        from contextd.cli.repo_source import prepared_repository

        root, config = prepared_repository(repo)
        state.root, state.config_path, state._project = str(root), str(config), None
    if ab:
        return _ab_command(state, text, k, expect)
    task = {"task_id": task_id, "title": text, "description": description,
            "task_type": task_type, "complexity": complexity}
    if description:
        text = f"{text}\n{description}"
    from contextd.runtime.background import (Handoff, index_for_command, keeps_warm,
                                             start_background_owner)
    from contextd.runtime.read_only import is_read_only

    project = state.project()
    request = QueryRequest(
        query=text, k=k, max_tokens=budget, min_score=min_score,
        providers=tuple(providers) or None, wait_for_model=True, by_file=by_file,
        contexts=contexts or None, projects=projects or None,
        scope=ContextScope(paths=tuple(r for r in (root_relative(p, project.root)
                                                   for p in paths) if r),
                           languages=languages, kinds=kinds, exclude_patterns=excludes,
                           files=files, folders=folders, memory=memory, roles=roles,
                           memory_min_similarity=memory_min_similarity))
    engine = open_engine(state, reads_only=True)
    read_only = is_read_only(engine)
    try:
        handoff = Handoff() if read_only else index_for_command(
            engine, project, _progress(state), started=COMMAND_STARTED)
        if handoff.start_owner:
            # Started before this answer is searched, not after: the owner's start-up (its
            # imports, ~1 s of CPU) overlaps the search, and it takes the index over the
            # moment this command lets go, so the next command asks it instead of reading
            # files in-line as a second owner (issue 37: 6.4 s for the second answer).
            start_background_owner(project, engine)
        if handoff.handed_off:
            # Answer from what is ready, without loading the model in this process.
            request = dataclasses.replace(request, wait_for_model=False,
                                          providers=request.providers
                                          or _without_semantic(project))
        response = engine.query(request)
        note = handoff.note(response.notes) if handoff.handed_off else None
        if note:
            response = dataclasses.replace(response, notes=response.notes + (note,))
        if not read_only and not handoff.start_owner and keeps_warm(engine, project, response):
            start_background_owner(project, engine)
    finally:
        engine.close()
    response = dataclasses.replace(response, timings_ms={**response.timings_ms,
                                                         COMMAND_TIMING: command_ms()})
    for note in response.notes:
        click.echo(f"contextd: {note}", err=True)
    if as_block or as_prompt:  # imported here: rendering pulls in numpy
        from contextd.query.prompt import render_task_prompt
        from contextd.query.render import context_from_response, render_context

        context = context_from_response(response)
        block = (render_task_prompt(task, context) if as_prompt else render_context(context))
    if state.as_json:
        data = to_dict(response)
        if as_block or as_prompt:
            data["prompt" if as_prompt else "rendered"] = block
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    elif as_block or as_prompt:
        click.echo(block)
    else:
        (_print_files if by_file else _print_hits)(response)


def _ab_command(state: CliState, text: str, k: int | None, expect: tuple[str, ...]) -> None:
    """``contextd query --ab``: the two dense rankings, side by side."""
    engine = open_engine(state)
    try:
        from contextd.runtime.background import index_for_command, start_background_owner

        handoff = index_for_command(engine, state.project(), _progress(state),
                                    started=COMMAND_STARTED)
        expect = tuple(root_relative(p, state.project().root) for p in expect)
        data = engine.contextual_search(text, limit=k or 10, ab=True, expect=expect)
        if handoff.start_owner:  # files or vectors left: the background reads and embeds them
            start_background_owner(state.project(), engine)
    finally:
        engine.close()
    emit(state, data, _print_ab)


def _print_ab(data: dict[str, Any]) -> None:
    ab = data["ab"]
    width = 56
    click.echo(f"{'with contextual prefixes':<{width}}  without them")
    for left, right in zip(ab["with_context"], ab["without_context"]):
        cells = []
        for item in (left, right):
            moved = f"(#{item['other_rank']})" if item["other_rank"] else "(-)"
            cell = (f"{item['rank']:>2}. {item['score']:.3f} {item['file_path']}:"
                    f"{item['start_line']} {moved}")
            cells.append(cell[:width])
        click.echo(f"{cells[0]:<{width}}  {cells[1]}")
    click.echo(f"{ab['overlap']} of {len(ab['with_context'])} in both lists; "
               f"{ab['contextualized_chunks']} of {ab['chunks_compared']} chunks carry a "
               f"prefix; (#n) = rank in the other list")
    for item in ab["expected"]:
        click.echo(f"{item['path']}: #{item['rank_with_context'] or '-'} with prefixes, "
                   f"#{item['rank_without_context'] or '-'} without")
    for note in ab["notes"]:
        click.echo(f"contextd: {note}", err=True)
    if ab["vectors_computed"]:
        click.echo(f"contextd: embedded {ab['vectors_computed']} chunk texts without their "
                   "prefix (kept for the next comparison)", err=True)


def _print_stats(data: Any, background_log: Path) -> None:
    storage = data.storage
    click.echo(f"files: {storage.get('total_files')}  chunks: {storage.get('total_chunks')}  "
               f"database: {storage.get('db_size_mb')} MB  last indexed: "
               f"{storage.get('last_indexed')}")
    click.echo("providers:")
    for provider in data.providers:
        if not provider["enabled"]:
            state = "disabled"
        elif provider["available"]:
            state = "available"
        else:
            state = "loading" if provider.get("pending") else "unavailable"
        click.echo(f"  {provider['id']:<12} {state:<12} {provider['name']}")
    _print_embedding(data.embedding)
    averages = data.performance.get("avg_ms", {})
    if averages:
        click.echo("average latency (ms): " + ", ".join(f"{k} {v}" for k, v in averages.items()))
    languages = data.languages
    if languages:
        click.echo("languages: " + ", ".join(f"{k} {v}" for k, v in languages.items()))
    if storage.get("skipped"):
        from contextd.query.render import skipped_text  # rendering pulls in numpy

        click.echo(skipped_text(storage["skipped"]))
        for skip in storage.get("skipped_examples", [])[:5]:
            click.echo(f"  {shown(skip['path'])}: {skip['reason']} ({skip['detail']})")
    indexing = data.indexing
    click.echo(f"indexing: {indexing.get('state')} ({indexing.get('text', '')})")
    owner = data.owner
    if owner.get("pid"):
        memory = (f", {owner['rss_mb']:,.0f} MB resident, peak "
                  f"{owner.get('peak_rss_mb') or 0:,.0f} MB (memory_limit_mb "
                  f"{owner.get('memory_limit_mb')})" if owner.get("rss_mb") is not None else "")
        role = (" (this process)" if owner.get("this_process")
                else " (stop it with 'contextd stop')")
        click.echo(f"owner: pid {owner['pid']}{role}{memory}")
        click.echo(f"owner log: {_owner_log(owner, background_log)}")
    for problem in indexing.get("problem_files") or []:
        click.echo(f"  not indexed as written: {shown(problem['path'])}: {problem['reason']}")


def _owner_log(owner: dict[str, Any], background_log: Path) -> str:
    """Where the owner writes its job lines: owner.log for a background owner, else its
    stderr (an MCP server's goes to the agent's log), with where a background one would."""
    logged = owner.get("log") or "stderr"
    if logged != "stderr":
        return shown(logged)
    return f"its stderr (a background owner logs to {shown(background_log)})"


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
    from contextd.crypto import side_file
    from contextd.runtime.background import OWNER_LOG

    engine = open_engine(state, reads_only=True)
    try:
        data = engine.stats()
    finally:
        engine.close()
    background_log = side_file(state.project(), OWNER_LOG)
    emit(state, data, lambda shown_data: _print_stats(shown_data, background_log))
