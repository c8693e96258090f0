"""The plugin manager: loads third-party entry points, then the built-ins, lazily and once.

Environment:
- ``CONTEXTD_LOAD_PLUGINS``: comma-separated entry-point names to load (empty string: none);
  unset loads every installed plugin. Built-ins always load.
- ``CONTEXTD_TRACE_PLUGINS=1``: log every hook call to stderr (debugging a plugin).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable

import pluggy

from contextd import hookspecs

ENTRY_POINT_GROUP = "contextd"

# Built-in plugins, registered after third-party ones with the same hooks (trylast).
DEFAULT_PLUGINS = (
    "contextd.chunkers",
    "contextd.embedders",
    "contextd.providers",
    "contextd.contextualizers",
    "contextd.stash.provider",
)

_lock = threading.Lock()
_pm: pluggy.PluginManager | None = None


def get_plugin_manager() -> pluggy.PluginManager:
    """Return the process-wide plugin manager, creating and loading it on first use."""
    global _pm
    with _lock:
        if _pm is None:
            _pm = _build_plugin_manager()
        return _pm


def _build_plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("contextd")
    pm.add_hookspecs(hookspecs)
    allowed = os.environ.get("CONTEXTD_LOAD_PLUGINS")
    names = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if names is not None and ep.name not in names:
            continue
        if pm.get_plugin(ep.name) is None:
            pm.register(ep.load(), name=ep.name)
    for module_name in DEFAULT_PLUGINS:
        if pm.get_plugin(module_name) is None:
            pm.register(importlib.import_module(module_name), name=module_name)
    pm.check_pending()
    if os.environ.get("CONTEXTD_TRACE_PLUGINS"):
        pm.trace.root.setwriter(lambda msg: sys.stderr.write(msg))
        pm.enable_tracing()
    return pm


@dataclass(frozen=True)
class Registration:
    """One thing a plugin registered, with the plugin that registered it."""

    name: str
    value: Any
    plugin: str


def collect(hook_name: str, key: Callable[[tuple], str]) -> dict[str, Registration]:
    """Call a register-callback hook and return what was registered, by name.

    ``key`` turns the arguments of one ``register(...)`` call into its name. The first
    registration of a name wins (third parties are called before the trylast built-ins).
    """
    pm = get_plugin_manager()
    found: dict[str, Registration] = {}
    impls = getattr(pm.hook, hook_name).get_hookimpls()
    plugins = [impl.plugin for impl in reversed(impls)]  # pluggy's call order
    for plugin in plugins:
        others = [p for p in plugins if p is not plugin]
        registered: list[tuple] = []
        pm.subset_hook_caller(hook_name, remove_plugins=others)(
            register=lambda *args, into=registered: into.append(args)
        )
        plugin_name = pm.get_name(plugin) or repr(plugin)
        for args in registered:
            name = key(args)
            if name not in found:
                found[name] = Registration(name, args if len(args) > 1 else args[0], plugin_name)
    return found


def plugin_version(plugin_name: str) -> str:
    """The version of the distribution that installed the plugin ``plugin_name``; empty for a
    built-in or a plugin registered without a distribution."""
    pm = get_plugin_manager()
    for plugin, dist in pm.list_plugin_distinfo():
        if pm.get_name(plugin) == plugin_name:
            return str(dist.version)
    return ""


def describe_plugins() -> list[dict[str, Any]]:
    """Installed plugins with their versions and hooks (for ``contextd plugins``)."""
    pm = get_plugin_manager()
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    rows = []
    for plugin in pm.get_plugins():
        name = pm.get_name(plugin)
        dist = dists.get(id(plugin))
        rows.append({
            "name": name,
            "hooks": sorted(h.name for h in pm.get_hookcallers(plugin) or []),
            "version": dist.version if dist else None,
            "package": dist.project_name if dist else None,
            "builtin": name in DEFAULT_PLUGINS,
        })
    return sorted(rows, key=lambda r: (r["builtin"], r["name"]))
