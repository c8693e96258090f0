"""contextd: a local context engine for AI coding agents.

Importing this package is cheap: heavy parts (DuckDB, tree-sitter, the embedding model) load
on first use. The public Python API for an orchestrator's pre-task hook::

    from contextd import ContextModule
    module = ContextModule.open(".")
    context = module.get_task_context({"title": "Fix token refresh", "description": "..."})
    print(module.render(context))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contextd.api.memory import Memory
    from contextd.api.module import ContextModule
    from contextd.hookspecs import hookimpl
    from contextd.records import ContextScope, ContextSnippet, TaskContext, TokenBudget

__version__ = "0.1.0"

__all__ = ["ContextModule", "Memory", "ContextScope", "ContextSnippet", "TaskContext", "TokenBudget",
           "hookimpl", "__version__"]

# Each public name, by the module that holds it, imported when first asked for:
# ContextModule and Memory pull in the store and providers, and even pluggy and the records
# would slow `contextd serve`'s answer to the MCP handshake (contextd.mcp.prelude).
_HOMES = {"ContextModule": "contextd.api.module", "Memory": "contextd.api.memory",
          "hookimpl": "contextd.hookspecs", "ContextScope": "contextd.records",
          "ContextSnippet": "contextd.records", "TaskContext": "contextd.records",
          "TokenBudget": "contextd.records"}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'contextd' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
