"""The plugin contract: every hook documented, built-ins registered through the same hooks,
third-party registrations win name clashes, `contextd plugins` reports what is installed."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from contextd import hookimpl, hookspecs
from contextd.plugins.manager import DEFAULT_PLUGINS, collect, get_plugin_manager

HOOKS = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
         if name.startswith("register_")]


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented(hook):
    doc = inspect.getdoc(getattr(hookspecs, hook))
    assert doc and "register(" in doc and "Returns" in doc


def test_builtins_are_loaded_with_the_same_hooks():
    pm = get_plugin_manager()
    names = {pm.get_name(p) for p in pm.get_plugins()}
    assert set(DEFAULT_PLUGINS) <= names
    pm.check_pending()


class _ClashingChunker:
    name = "python"
    language = "python"
    extensions = (".py",)
    filenames = ()

    def chunk(self, text, path, settings):
        return []


class _ThirdParty:
    @hookimpl
    def register_chunkers(self, register):
        register(_ClashingChunker())


def test_third_party_registration_wins_a_name_clash():
    pm = get_plugin_manager()
    plugin = _ThirdParty()
    pm.register(plugin, name="third-party-test")
    try:
        found = collect("register_chunkers", key=lambda args: args[0].name)
        assert found["python"].plugin == "third-party-test"
        assert isinstance(found["python"].value, _ClashingChunker)
    finally:
        pm.unregister(plugin)
    found = collect("register_chunkers", key=lambda args: args[0].name)
    assert all(r.plugin in DEFAULT_PLUGINS for r in found.values())


def test_plugins_command_lists_builtins_as_json():
    out = subprocess.run([sys.executable, "-m", "contextd", "plugins"], capture_output=True,
                         text=True, check=True).stdout
    rows = json.loads(out)
    assert {r["name"] for r in rows if r["builtin"]} == set(DEFAULT_PLUGINS)
    assert all(isinstance(r["hooks"], list) for r in rows)
