"""The ``contextd`` command line.

One click group with global options; each command family lives in its own module and is
imported lazily from COMMANDS. Results go to stdout (``--json`` for machines), diagnostics
and progress to stderr. Expected failures (:class:`contextd.errors.ContextdError`) print one
line and exit 1 (usage errors 2), and so do faults of the disk under the index (no space left, a
read-only folder: :mod:`contextd.store.disk_faults`); set ``CONTEXTD_RAISE_ERRORS=1`` to see
tracebacks.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click

from contextd.cli.common import CliState
from contextd.errors import ContextdError

# Every command, by name, as "module:attribute". Modules are imported only when their command
# runs (or for --help), so `contextd query` does not pay for tree-sitter, and `contextd serve`
# answers its first MCP request sooner.
COMMANDS = {
    "init": "contextd.cli.boundary_cmds:init_cmd",
    "validate-config": "contextd.cli.boundary_cmds:validate_config_cmd",
    "list-indexable": "contextd.cli.boundary_cmds:list_indexable_cmd",
    "check-file": "contextd.cli.boundary_cmds:check_file_cmd",
    "project-stats": "contextd.cli.boundary_cmds:project_stats_cmd",
    "chunks": "contextd.cli.chunks_cmd:chunks_command",
    "embedders": "contextd.cli.embedders_cmd:embedders_group",
    "rebuild": "contextd.cli.index_cmds:rebuild",
    "refresh": "contextd.cli.index_cmds:refresh",
    "watch": "contextd.cli.index_cmds:watch",
    "query": "contextd.cli.query_cmds:query_command",
    "related": "contextd.cli.related_cmd:related_command",
    "stats": "contextd.cli.query_cmds:stats_command",
    "serve": "contextd.cli.serve_cmd:serve",
    "plugins": "contextd.cli.plugins_cmd:plugins_command",
    "docs": "contextd.cli.docs_cmd:docs_group",
    "search": "contextd.cli.search_cmd:search_command",
    "report": "contextd.cli.report_cmd:report_command",
    "ui": "contextd.cli.ui_cmd:ui_group",
    "stash": "contextd.cli.stash_cmd:stash_group",
    "tokens": "contextd.cli.tokens_cmd:tokens_group",
    "kb": "contextd.cli.kb_cmd:kb_group",
    "workspaces": "contextd.cli.workspaces_cmd:workspaces_group",
    "store": "contextd.cli.store_cmd:store_group",
    "owner": "contextd.cli.owner_cmd:owner_command",
    "stop": "contextd.cli.owner_cmd:stop_command",
    "server": "contextd.cli.service_cmds:server_cmd",
    "keys": "contextd.cli.service_cmds:keys_group",
    "backup": "contextd.cli.backup_cmds:backup_cmd",
    "restore": "contextd.cli.backup_cmds:restore_cmd",
    "install": "contextd.cli.install_cmd:install_cmd",
    "uninstall": "contextd.cli.install_cmd:uninstall_cmd",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use, each given the global
    options (:mod:`contextd.cli.global_options`) so they work after the subcommand too."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        from contextd.cli.global_options import add_global_options

        module_name, attribute = target.split(":")
        return add_global_options(getattr(importlib.import_module(module_name), attribute))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="contextd", prog_name="contextd")
@click.option("--root", type=click.Path(), envvar="CONTEXTD_ROOT",
              help="Project root (default: detected from the working directory).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              envvar="CONTEXTD_CONFIG", help="context.toml to use (default: <root>/context.toml).")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@click.option("-v", "--verbose", count=True, help="More diagnostics on stderr (-vv for debug).")
@click.pass_context
def cli(ctx: click.Context, root: str | None, config_path: str | None, as_json: bool,
        verbose: int) -> None:
    """contextd: the few hundred lines of a project an agent needs, ranked and cut to a budget.

    \b
    Examples:
      contextd query "where are JWT tokens validated"
      contextd --json query "retry backoff" --k 5
      contextd list-indexable --limit 20
      contextd serve            # MCP server over stdio
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="contextd: %(message)s")
    ctx.obj = CliState(root=root, config_path=config_path, as_json=as_json, verbose=verbose)


def main() -> None:
    """Entry point of the console script: one error boundary for the whole CLI. Ctrl-C,
    whatever exception it surfaced as (:mod:`contextd.indexer.interrupts`), ends in
    :func:`interrupted`."""
    from contextd.indexer import interrupts
    interrupts.install()
    try:
        try:
            _main()
        finally:
            # Output still buffered for a pipe whose reader is gone fails here, inside this
            # boundary, instead of at interpreter exit ("Exception ignored", exit 120).
            sys.stdout.flush()
    except BrokenPipeError:
        reader_gone()
    except BaseException as exc:
        if interrupts.is_interrupt(exc):
            interrupted()
        raise


def _main() -> None:
    try:
        # Not cli.main(): on Ctrl-C it prints an empty line to stderr before raising Abort,
        # and "contextd: interrupted" must be the only line.
        with cli.make_context("contextd", sys.argv[1:]) as ctx:
            result = cli.invoke(ctx)
        sys.exit(result if isinstance(result, int) else 0)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, KeyboardInterrupt):  # click wraps Ctrl-C in Abort
            raise exc.__context__ from None
        click.echo("contextd: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except ContextdError as exc:
        if os.environ.get("CONTEXTD_RAISE_ERRORS"):
            raise
        click.echo(f"contextd: error: {exc.for_cli()}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:
        # A full disk or a read-only index folder surfaces from DuckDB, the owner lock or a
        # spool file, as whatever exception each raises: one line naming it, not a traceback.
        from contextd.store.disk_faults import disk_fault

        fault = disk_fault(exc)
        if fault is None or os.environ.get("CONTEXTD_RAISE_ERRORS"):
            raise
        click.echo(f"contextd: error: {fault}", err=True)
        sys.exit(fault.exit_code)


def reader_gone() -> None:
    """The reader of stdout closed the pipe (``contextd stats | head -1``): it has what it
    wanted, so the command ends quietly with exit 0, whichever command it was. stdout is
    pointed at /dev/null first, so no later flush fails again ("Exception ignored ...
    BrokenPipeError"), and the process ends as :func:`interrupted` does, without
    finalisation, for the same reason (native libraries' threads)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.stderr.flush()
    finally:
        os._exit(0)


def interrupted() -> None:
    """Ctrl-C: one line and exit 130, without going through interpreter finalisation.

    The command's own ``finally`` blocks have run by now (the job is marked interrupted, the
    index closed), but native libraries (DuckDB's and ONNX Runtime's bindings) still have
    threads or objects alive: finalising the interpreter then prints dozens of "leaked"
    warnings or aborts (exit 134). Nothing is left to clean up, so the process ends here."""
    try:
        click.echo("contextd: interrupted", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(130)
