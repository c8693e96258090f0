"""``contextd plugins``: what is installed, with versions and hooks (always JSON)."""

from __future__ import annotations

import json

import click

from contextd.plugins.manager import describe_plugins


@click.command("plugins")
def plugins_command() -> None:
    """List installed plugins (built-in and third-party), their versions and hooks, as JSON."""
    click.echo(json.dumps(describe_plugins(), indent=2))
