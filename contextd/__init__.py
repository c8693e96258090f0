"""contextd: a local context engine for AI coding agents.

Importing this package is cheap: heavy parts (DuckDB, tree-sitter, the embedding model) load
on first use. The public Python API for an orchestrator's pre-task hook::

    from contextd import ContextModule
    module = ContextModule.open(".")
    context = module.get_task_context({"title": "Fix token refresh", "description": "..."})
    print(module.render(context))
"""

from __future__ import annotations

from contextd.hookspecs import hookimpl
from contextd.records import ContextScope, ContextSnippet, TaskContext, TokenBudget

__version__ = "0.1.0"

__all__ = ["ContextModule", "Memory", "ContextScope", "ContextSnippet", "TaskContext", "TokenBudget",
           "hookimpl", "__version__"]


def __getattr__(name: str):
    # ContextModule and Memory pull in the store and providers; load them only when asked for.
    if name == "ContextModule":
        from contextd.api.module import ContextModule

        return ContextModule
    if name == "Memory":
        from contextd.api.memory import Memory

        return Memory
    raise AttributeError(f"module 'contextd' has no attribute {name!r}")
