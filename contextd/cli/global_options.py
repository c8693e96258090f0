"""The global options (``--root``, ``--config``, ``--json``, ``-v``) after the subcommand too.

People type ``contextd stats --json`` and ``contextd query x --root R`` as often as the
documented ``contextd --json stats``. Rather than each command declaring its own copy (with a
chance of a second meaning), :func:`add_global_options` gives every command the same four
options once, when the lazy group loads it, and merges what was given there into the group's
:class:`~contextd.cli.common.CliState`: a value given after the subcommand wins.
"""

from __future__ import annotations

import functools
import logging

import click

from contextd.cli.common import CliState

# Parameter name → the option declaration; the same help texts as the group's.
_OPTIONS = {
    "root": lambda: click.Option(["--root"], type=click.Path(),
                                 help="Project root (same as before the subcommand)."),
    "config_path": lambda: click.Option(["--config", "config_path"],
                                        type=click.Path(dir_okay=False),
                                        help="context.toml to use (same as before the "
                                             "subcommand)."),
    "as_json": lambda: click.Option(["--json", "as_json"], is_flag=True, default=None,
                                    help="Print results as JSON."),
    "verbose": lambda: click.Option(["-v", "--verbose"], count=True,
                                    help="More diagnostics on stderr (-vv for debug)."),
}
_MARK = "_contextd_global_options"


def add_global_options(command: click.Command) -> click.Command:
    """Give ``command`` (and a group's subcommands) the global options, once."""
    if getattr(command, _MARK, False):
        return command
    setattr(command, _MARK, True)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_global_options(sub)
        return command
    taken = {p.name for p in command.params}
    clashes = taken & set(_OPTIONS)
    if clashes:  # one meaning per option: a command must not redefine a global one
        raise RuntimeError(f"command {command.name} redefines global option(s) "
                           f"{', '.join(sorted(clashes))}")
    command.params.extend(make() for make in _OPTIONS.values())
    if command.callback is not None:
        command.callback = _merging(command.callback)
    return command


def _merging(callback):
    @functools.wraps(callback)
    def run(*args, **kwargs):
        values = {name: kwargs.pop(name, None) for name in _OPTIONS}
        state = click.get_current_context().find_object(CliState)
        if state is not None:
            merge(state, **values)
        return callback(*args, **kwargs)

    return run


def merge(state: CliState, root: str | None, config_path: str | None, as_json: bool | None,
          verbose: int | None) -> None:
    """Apply options given after the subcommand to the group's state."""
    if root:
        state.root = root
    if config_path:
        state.config_path = config_path
    if as_json:
        state.as_json = True
    if verbose and verbose > state.verbose:
        state.verbose = verbose
        logging.getLogger().setLevel(logging.INFO if verbose == 1 else logging.DEBUG)
