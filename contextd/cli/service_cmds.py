"""``contextd server`` (the standalone HTTP service) and ``contextd keys`` (its API keys)."""

from __future__ import annotations

import os
import sys

import click

from contextd.cli.common import CliState, emit, emit_rows, pass_state


@click.command("server")
@click.option("--port", type=click.IntRange(1, 65535), help="Port (default: [engine] port).")
@click.option("--host", help="Address to listen on (default: [engine] host, 127.0.0.1). Any "
                             "non-loopback address needs API keys.")
@pass_state
def server_cmd(state: CliState, port: int | None, host: str | None) -> None:
    """Run the standalone context service: the JSON API, /healthz, /readyz, /openapi.json
    and MCP over streamable HTTP at /mcp.

    \b
    Examples:
      contextd server --port 9090
      contextd keys create ci --scope read && contextd server --host 0.0.0.0
    """
    from contextd.http.runner import serve_service

    serve_service(state.root, state.config_path, host, port, verbose=state.verbose)
    # As `contextd serve`: the engine is closed; skip finalisation under native threads.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@click.group("keys")
def keys_group() -> None:
    """API keys of the standalone service (stored hashed beside the index)."""


def _ring(state: CliState):
    from contextd.http.keys import KeyRing

    return KeyRing.of(state.project())


@keys_group.command("create")
@click.argument("name")
@click.option("--scope", type=click.Choice(["read", "write"]), default="read", show_default=True,
              help="read: query and stats; write: also add/delete context, backups, MCP.")
@pass_state
def keys_create(state: CliState, name: str, scope: str) -> None:
    """Create a key; its plaintext is printed once and never stored."""
    key, plaintext = _ring(state).create(name, scope)
    emit(state, {**key.public(), "key": plaintext},
         lambda r: click.echo(f"{r['key']}\n(key {r['key_id']}, {r['scope']}; shown once, "
                              "store it now)"))


@keys_group.command("list")
@pass_state
def keys_list(state: CliState) -> None:
    """List keys (id, name, scope, creation time; never the keys)."""
    emit_rows(state, [k.public() for k in _ring(state).keys()],
              "no API keys (loopback calls need none)",
              lambda r: f"{r['key_id']}  {r['scope']:<5}  {r['created_at']}  {r['name']}")


@keys_group.command("revoke")
@click.argument("key_id")
@pass_state
def keys_revoke(state: CliState, key_id: str) -> None:
    """Revoke a key by id or name; a running service refuses it at once."""
    key = _ring(state).revoke(key_id)
    emit(state, {**key.public(), "revoked": True},
         lambda r: click.echo(f"revoked {r['key_id']} ({r['name']})"))


@keys_group.command("rotate-db-key")
@click.option("--new-key-env", help="Environment variable holding the new database key.")
@click.option("--new-key-file", type=click.Path(dir_okay=False, exists=True),
              help="File holding the new database key.")
@pass_state
def keys_rotate_db_key(state: CliState, new_key_env: str | None,
                       new_key_file: str | None) -> None:
    """Re-encrypt the index and its backups with a new database key (security.encrypt_db).
    Stop the processes that own the index first; afterwards point security.key_env or
    key_file at the new key."""
    from contextd.crypto import db_secret
    from contextd.runtime.key_rotation import rotate_db_key
    from contextd.errors import UsageError

    if bool(new_key_env) == bool(new_key_file):
        raise UsageError("give exactly one of --new-key-env and --new-key-file")
    project = state.project()
    secret = db_secret(project.config, env=new_key_env, file=new_key_file)
    result = rotate_db_key(project, secret)
    emit(state, result, lambda r: click.echo(
        f"re-encrypted {len(r['reencrypted'])} file(s); now set security.key_env/key_file "
        "to the new key"))
