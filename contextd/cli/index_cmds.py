"""Index commands: ``rebuild``, ``refresh`` and ``watch``.

They talk to the project's Engine through :func:`contextd.cli.common.open_engine` (this
process, or the process that owns the database), show progress on stderr and print the result
record on stdout (JSON with ``--json``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

import click

from contextd.cli.common import CliState, emit, open_engine, pass_state, user_path
from contextd.errors import ContextdError
from contextd.indexer.progress import Progress, terminal_progress

# How long a Ctrl-C'd or terminated ``contextd watch`` lets its engine close before it exits.
WATCH_CLOSE_WAIT_S = 10.0
# How often a watching main thread wakes to run a signal handler another thread received.
SIGNAL_CHECK_S = 0.2


def _progress(state: CliState) -> Progress:
    bootstrap = state.project().config.bootstrap
    return terminal_progress(bootstrap.show_progress, bootstrap.progress_interval_seconds)


def _absolute(state: CliState, paths: tuple[str, ...]) -> list[str] | None:
    """Paths as given on the command line, made absolute (:func:`contextd.cli.common.user_path`:
    relative to the working directory inside the project, else to the root)."""
    root = state.project().root
    return [user_path(p, root) for p in paths] or None


def _confirm_rebuild(paths: list[str] | None) -> None:
    """Ask on a terminal; refuse without one (a script must say --force)."""
    what = "the index of " + ", ".join(paths) if paths else "the whole index"
    if not sys.stdin.isatty():
        raise ContextdError(f"rebuild drops and re-creates {what}; pass --force to run it "
                            "without a terminal to confirm on")
    click.confirm(f"Rebuild drops and re-creates {what}. Continue?", abort=True,
                  err=True)


@click.command()
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
@click.option("--paths", "path_opts", multiple=True, metavar="PATH",
              help="Rebuild only these files or directories (more may follow as arguments).")
@click.argument("more_paths", nargs=-1, type=click.Path())
@click.option("--dry-run", is_flag=True, help="Only estimate: files, time, languages.")
@click.option("--no-vacuum", is_flag=True, help="Do not VACUUM the database afterwards.")
@click.option("--keep-errors", is_flag=True, help="Keep the recorded indexing failures.")
@pass_state
def rebuild(state: CliState, force: bool, path_opts: tuple[str, ...],
            more_paths: tuple[str, ...], dry_run: bool, no_vacuum: bool,
            keep_errors: bool) -> None:
    """Drop and rebuild the index (all of it, or --paths), like a first start.

    \b
    Examples:
      contextd rebuild --dry-run
      contextd rebuild --force
      contextd rebuild --paths src/auth/ docs/
    """
    paths = _absolute(state, path_opts + more_paths)
    if not force and not dry_run:
        _confirm_rebuild(paths)
    engine = open_engine(state)
    try:
        result = engine.rebuild(paths, dry_run=dry_run, vacuum=not no_vacuum,
                                keep_errors=keep_errors, wait=True, created_by="cli",
                                progress=None if dry_run else _progress(state))
    finally:
        engine.close()

    def human(r) -> None:
        click.echo(r.message)
        if r.details.get("byLanguage"):
            for language, count in r.details["byLanguage"].items():
                click.echo(f"  {language:<14} {count:>8,}")
    emit(state, result, human)
    if result.status not in ("completed", "queued"):
        sys.exit(1)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--force", is_flag=True, help="Re-chunk even files whose content is unchanged.")
@pass_state
def refresh(state: CliState, paths: tuple[str, ...], force: bool) -> None:
    """Re-index what changed (everything, or the given files and directories)."""
    engine = open_engine(state)
    try:
        report = engine.refresh(_absolute(state, paths), force=force, progress=_progress(state))
    finally:
        engine.close()
    emit(state, report, lambda r: click.echo(r.summary))


@click.command()
@pass_state
def watch(state: CliState) -> None:
    """Keep the index current until Ctrl-C: catch up, then re-index every save.

    Each batch of changes is logged on stderr. When another contextd process already owns
    the index (an MCP server), that one watches; this one takes over when it exits.
    """
    from contextd.runtime.owner import connect

    logging.getLogger("contextd.runtime.watcher").setLevel(logging.INFO)
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum, _frame) -> None:
        received.append(signum)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    engine = connect(state.project(), duties=True)
    click.echo(f"contextd: watching {state.project().root} (Ctrl-C to stop)", err=True)
    try:
        # Waits in slices: the kernel may hand Ctrl-C to any thread (a watcher's or DuckDB's),
        # and Python runs the handler only when the main thread next runs bytecode, which an
        # unbounded wait never does (a watch ignored Ctrl-C until killed).
        while not stop.wait(SIGNAL_CHECK_S):
            pass
    finally:
        # Bounded, as the background owner's: a store close waits for reads under way in
        # the owner's threads (a catalog load, a model warm-up), which on a loaded machine
        # kept a Ctrl-C waiting over a minute. What is not closed by then ends with the
        # process (the kernel frees the owner lock; DuckDB replays its WAL at the next open).
        closing = threading.Thread(target=engine.close, name="contextd-close", daemon=True)
        closing.start()
        closing.join(WATCH_CLOSE_WAIT_S)
    if received and received[0] == signal.SIGINT:
        raise KeyboardInterrupt  # "contextd: interrupted", exit 130, like every command
    click.echo("contextd: stopped watching", err=True)
    if closing.is_alive():  # finalising beside a half-closed store could hang
        sys.stderr.flush()
        os._exit(0)


commands = [rebuild, refresh, watch]
