"""The Index Manager's pages, one small module each. A page module defines ``PATH``,
``TITLE`` and ``async def body(request, ctx) -> str`` (the HTML under the title); a new
capability adds a module here and a line to :data:`PAGES`, and :mod:`contextd.web.app`
routes it and :mod:`contextd.web.layout` frames it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import anyio

from contextd.web.pages import (errors, jobs, knowledge, live, memory, overview, savings,
                                 search, sessions)

PAGES = (overview, live, jobs, errors, search, knowledge, memory, sessions, savings)


@dataclass
class PageContext:
    """What a page may use: the engine (its methods run in a worker thread, since they may
    wait on the owner's socket or DuckDB) and the progress feed."""

    handle: Any
    feed: Any
    project: str

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        engine = self.handle.get()
        function: Callable[..., Any] = getattr(engine, method)
        return await anyio.to_thread.run_sync(lambda: function(*args, **kwargs))
