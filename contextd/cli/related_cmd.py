"""``contextd related PATH:LINE``: the code most like the function or chunk at a location."""

from __future__ import annotations

import os

import click

from contextd.cli.common import (COMMAND_STARTED, CliState, emit, open_engine, pass_state,
                                 shown, user_path)
from contextd.errors import UsageError
from contextd.query.related import DEFAULT_K, RelatedResult


def parse_location(location: str) -> tuple[str, int]:
    """``src/x.py:40`` → (``src/x.py``, 40), with a sentence for anything else."""
    path, colon, line = location.rpartition(":")
    if not colon or not path or not line.isdigit() or int(line) < 1:
        raise UsageError(f"{location!r}: give a file and a line, e.g. src/billing/invoice.py:40")
    return path, int(line)


def _human(result: RelatedResult) -> None:
    start, end = result.target_lines
    click.echo(f"like {shown(result.file_path)}:{start}-{end} {shown(result.target_label)}")
    if not result.hits:
        click.echo("  no other code of its language is indexed")
    for hit in result.hits:
        meaning = "-" if hit.meaning is None else f"{hit.meaning:.2f}"
        click.echo(f"{hit.score:.3f}  {shown(hit.file_path)}:{hit.start_line}-{hit.end_line}"
                   f"  {shown(hit.label)}  {hit.why} (shape {hit.shape:.2f}, calls "
                   f"{hit.calls:.2f}, meaning {meaning})")
    for note in result.notes:
        click.echo(f"contextd: {note}", err=True)


@click.command("related")
@click.argument("location", metavar="PATH:LINE")
@click.option("-k", "--k", "k", type=click.IntRange(1, 100), default=DEFAULT_K,
              show_default=True, help="Results wanted.")
@pass_state
def related_command(state: CliState, location: str, k: int) -> None:
    """List the code most like the function (or chunk) at PATH:LINE, across the project:
    near-copies (the same shape under other names), code that calls the same helpers, and
    code that means the same (the vectors the index holds). Each line gives the score, the
    location, and why: near-copy, calls alike or similar.

    \b
    Examples:
      contextd related src/billing/invoice.py:40
      contextd related src/billing/invoice.py:40 -k 3 --json
    """
    from contextd.indexer.progress import terminal_progress
    from contextd.runtime.background import index_for_command, start_background_owner

    path, line = parse_location(location)
    project = state.project()
    relative = os.path.relpath(user_path(path, project.root), project.root)
    if relative.startswith(os.pardir + os.sep) or relative == os.pardir:
        raise UsageError(f"{path} is outside the project root {project.root}")
    bootstrap = project.config.bootstrap
    engine = open_engine(state)
    try:
        handoff = index_for_command(engine, project, terminal_progress(
            bootstrap.show_progress, bootstrap.progress_interval_seconds),
            started=COMMAND_STARTED)
        # Handed off: the vectors are the background owner's job; answer without the model.
        result = engine.related(relative.replace(os.sep, "/"), line, k,
                                wait_for_model=not handoff.handed_off)
        if handoff.start_owner:  # the vectors left: a background owner computes them
            start_background_owner(project, engine)
    finally:
        engine.close()
    emit(state, result, _human)
