"""ContextModule: what an orchestrator imports, opened in a deployment mode (docs/SERVICE.md).

    from contextd import ContextModule
    module = ContextModule.open("path/to/project")   # indexes it first if it never was
    context = module.get_task_context({"title": "Fix token refresh",
                                       "description": "Expired tokens are not refreshed",
                                       "complexity": 5, "task_type": "BUGFIX"})
    print(module.render(context))
    module.shutdown()

:meth:`ContextModule.open` is the one place a project is opened in a mode: ``embedded`` builds
the Engine (:mod:`contextd.runtime.engine`) in this process, whose context is this class;
``standalone`` and ``hybrid`` return a module with the same methods whose calls go to the
service (:mod:`contextd.api.remote`). It sits above both, so nothing below it builds the
thing that builds it.
"""

from __future__ import annotations

from typing import Any

from contextd.api.remote import open_module
from contextd.config.project import Project
from contextd.errors import UsageError
from contextd.facade.context import ProjectContext
from contextd.operations import expose
from contextd.runtime.embedded import own_index


class ContextModule(ProjectContext):
    """A project's context (:class:`contextd.facade.context.ProjectContext`), and the way to
    open one. The knowledge operations that name ``ContextModule`` in their declaration
    (:mod:`contextd.operations.knowledge`) are its methods too (``knowledge_add``, ...),
    run on the Engine it was opened with."""

    @classmethod
    def open(cls, root: str = ".", config_path: str | None = None, *,
             wait_for_model: bool = True, progress: Any = None,
             mode: str | None = None) -> Any:
        """The module of a project directory.

        Embedded (the default): indexes the project first when it never was (through the
        indexer), and with ``wait_for_model`` loads the embedding model before returning, so
        the first task already gets semantic results. ``shutdown()`` closes the index too.
        This process owns the index meanwhile (:mod:`contextd.runtime.embedded`): CLI
        commands and MCP servers started meanwhile ask it, and an idle background owner a
        CLI command left is stopped first.

        ``mode`` (default ``core.mode``): ``standalone`` and ``hybrid`` return a module with
        the same methods whose calls go to the service (see :mod:`contextd.api.remote`).
        """
        project = Project.open(root, config_path)
        mode = mode or project.config.core.mode
        if mode in ("standalone", "hybrid"):
            return open_module(project, mode)
        if mode != "embedded":
            raise UsageError(f"mode must be embedded, standalone or hybrid, not {mode!r}")
        shared = own_index(project, context_type=cls)
        engine = shared.engine
        if engine.store.generation() == 0:
            engine.ensure_indexed(progress=progress)
        module = engine.module
        module._engine = shared
        module.pipeline.warm_up(wait=wait_for_model)
        return module


expose(ContextModule, via="_engine")
