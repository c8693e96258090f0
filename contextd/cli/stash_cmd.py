"""``contextd stash``: agent memory from the command line (add, search, show, rm, protect, gc).

Every subcommand goes through the project's owner process (:mod:`contextd.runtime.owner`), so it
sees and changes the same memory as the MCP servers running beside it. ``--json`` prints the
records of :mod:`contextd.stash.model`, the same the MCP tools return.
"""

from __future__ import annotations

import click

from contextd.cli.common import CliState, emit, open_engine, pass_state
from contextd.stash.model import (
    ALL_SESSIONS, DEFAULT_SESSION, RetrieveRequest, RetrieveResult, SegmentInput, SegmentList,
    SegmentType, StashRequest,
)

TYPE_CHOICE = click.Choice([t.value for t in SegmentType])
SESSION_OPTION = click.option("--session", "session_id", default=DEFAULT_SESSION,
                              show_default=True, envvar="CONTEXTD_SESSION",
                              help="Session whose memory to use (sessions are isolated).")


def _run(state: CliState, call):
    """Run ``call(engine)`` on the project's shared engine and let it go."""
    engine = open_engine(state)
    try:
        return call(engine)
    finally:
        engine.close()


@click.group("stash")
def stash_group() -> None:
    """Agent memory: stash context segments, find them again by meaning, bring them back.

    \b
    Examples:
      contextd stash add --type error_log --topic auth < traceback.txt
      contextd stash add "Decision: sessions live in Redis (sub-ms lookups)" --type decision
      contextd stash search "why is the login crashing" --json
      contextd stash show seg-1a2b3c4d5e6f7a8b
      contextd stash gc
    """


@stash_group.command("add")
@click.argument("text", required=False)
@click.option("--file", "path", type=click.File("r"), help="Read the text from a file "
              "('-' for stdin; the default when TEXT is not given).")
@click.option("--type", "kind", type=TYPE_CHOICE, default="message", show_default=True,
              help="What the segment is.")
@click.option("--topic", help="Tag to filter on later.")
@click.option("--source", help="Where it came from (file path, command...).")
@click.option("--ref", "references", multiple=True, help="Id of a segment it refers to "
              "(repeatable).")
@click.option("--timestamp", help="When the content came to be (ISO 8601; default now).")
@click.option("--expires-in-days", type=click.FloatRange(min=0), help="Forget it after this "
              "many days (0 = never).")
@click.option("--protect", is_flag=True, help="Never expire or collect it.")
@SESSION_OPTION
@pass_state
def add_command(state: CliState, text: str | None, path, kind: str, topic: str | None,
                source: str | None, references: tuple[str, ...], timestamp: str | None,
                expires_in_days: float | None, protect: bool, session_id: str) -> None:
    """Stash TEXT (or the contents of --file, or stdin)."""
    if text is not None and path is not None:
        raise click.UsageError("give TEXT or --file, not both")
    if text is None:
        text = (path or click.get_text_stream("stdin")).read()
    request = StashRequest((SegmentInput(text=text, type=kind, topic=topic, source=source,
                                         session_id=session_id, references=references,
                                         timestamp=timestamp),),
                           expires_in_days=expires_in_days, protected=protect)
    result = _run(state, lambda engine: engine.stash(request))
    emit(state, result, lambda r: click.echo(
        f"{r.segment_ids[0]}  ({r.tokens_freed} tokens"
        f"{f', {r.secrets_redacted} secret(s) redacted' if r.secrets_redacted else ''})"))


def _print_found(result: RetrieveResult) -> None:
    for number, item in enumerate(result.segments, start=1):
        parts = item.score_parts
        via = f"  via {item.reached_from}" if item.reached_from else ""
        click.echo(f"{number:>2}. {item.score:.3f}  {item.segment_id}  [{item.type}"
                   f"{', ' + item.topic if item.topic else ''}]  sim {parts.similarity:.3f} "
                   f"age {parts.age:.3f} recency {parts.recency:.3f}{via}")
        for line in item.text.splitlines()[:3]:
            click.echo(f"      {line}")
    click.echo(f"{len(result.segments)} of {result.total_found} found, "
               f"{result.total_tokens} tokens, {result.timings_ms.get('total', 0):.0f} ms")
    for note in result.notes:
        click.echo(f"contextd: {note}", err=True)


@stash_group.command("search")
@click.argument("query")
@click.option("--top-k", type=click.IntRange(1, 100), help="Most hits (default 5).")
@click.option("--min-similarity", type=click.FloatRange(-1.0, 1.0),
              help="Cosine similarity cut-off (default [stash] min_similarity).")
@click.option("--all-sessions", is_flag=True, help="Search every session.")
@click.option("--type", "types", type=TYPE_CHOICE, multiple=True, help="Only this type "
              "(repeatable).")
@click.option("--topic", help="Only this topic.")
@click.option("--since", help="Only segments created at or after (ISO 8601).")
@click.option("--until", help="Only segments created at or before (ISO 8601).")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Token budget.")
@click.option("--max-hops", type=click.IntRange(0, 10), help="Reference hops followed.")
@SESSION_OPTION
@pass_state
def search_command(state: CliState, query: str, top_k: int | None,
                   min_similarity: float | None, all_sessions: bool, types: tuple[str, ...],
                   topic: str | None, since: str | None, until: str | None,
                   max_tokens: int | None, max_hops: int | None, session_id: str) -> None:
    """Find stashed segments relevant to QUERY (previews; `show` prints them whole)."""
    request = RetrieveRequest(query=query, top_k=top_k, min_similarity=min_similarity,
                              session_id=ALL_SESSIONS if all_sessions else session_id,
                              all_sessions=all_sessions, types=types, topic=topic,
                              since=since, until=until, max_tokens=max_tokens,
                              max_hops=max_hops)
    result = _run(state, lambda engine: engine.retrieve_stashed(request))
    emit(state, result, _print_found)


def _print_segments(result: SegmentList) -> None:
    for segment in result.segments:
        flags = ", protected" if segment.protected else (
            f", expires {segment.expires_at}" if segment.expires_at else "")
        click.echo(f"== {segment.segment_id}  [{segment.type}"
                   f"{', ' + segment.topic if segment.topic else ''}]  session "
                   f"{segment.session_id}, {segment.tokens} tokens, stashed "
                   f"{segment.stashed_at}{flags}")
        click.echo(segment.text)
    click.echo(f"{len(result.segments)} of {result.total} segment(s)", err=True)


@stash_group.command("show")
@click.argument("segment_ids", nargs=-1)
@click.option("--all-sessions", is_flag=True, help="List every session's segments.")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="Most segments listed.")
@click.option("--expired", "include_expired", is_flag=True,
              help="Also list expired segments gc has not collected yet.")
@SESSION_OPTION
@pass_state
def show_command(state: CliState, segment_ids: tuple[str, ...], all_sessions: bool,
                 limit: int, include_expired: bool, session_id: str) -> None:
    """Print segments in full: the given ids, or the session's newest (live ones)."""
    if segment_ids:
        result = _run(state, lambda engine: engine.get_stashed(list(segment_ids)))
    else:
        result = _run(state, lambda engine: engine.list_stashed(
            session_id=session_id, all_sessions=all_sessions, limit=limit,
            include_expired=include_expired))
    emit(state, result, _print_segments)


@stash_group.command("rm")
@click.argument("segment_ids", nargs=-1, required=True)
@pass_state
def rm_command(state: CliState, segment_ids: tuple[str, ...]) -> None:
    """Forget segments (an unknown id deletes nothing)."""
    result = _run(state, lambda engine: engine.delete_stashed(list(segment_ids)))
    emit(state, result, lambda r: click.echo(f"deleted {r.count} segment(s)"))


@stash_group.command("protect")
@click.argument("segment_ids", nargs=-1, required=True)
@click.option("--off", is_flag=True, help="Lift the protection instead.")
@pass_state
def protect_command(state: CliState, segment_ids: tuple[str, ...], off: bool) -> None:
    """Protect segments from expiry and gc (--off: lift it)."""
    result = _run(state, lambda engine: engine.protect_stashed(list(segment_ids),
                                                                protected=not off))
    emit(state, result, lambda r: click.echo(
        f"{'unprotected' if off else 'protected'} {r.count} segment(s)"))


@stash_group.command("gc")
@pass_state
def gc_command(state: CliState) -> None:
    """Delete expired segments and unprotected ones older than [stash] gc_max_age_days."""
    result = _run(state, lambda engine: engine.gc_stash())
    emit(state, result, lambda r: click.echo(
        f"removed {len(r.expired)} expired and {len(r.aged_out)} aged-out segment(s); "
        f"{r.remaining} remain"))

