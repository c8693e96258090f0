"""The web Index Manager: a small local app that shows a project's
index live in a browser: overview, progress, jobs, errors, search and what contextd saves.

* :mod:`contextd.web.server` — ``contextd ui``: binds 127.0.0.1, prints the URL, serves;
* :mod:`contextd.web.app` — the Starlette app: page routes and the JSON/SSE endpoints;
* :mod:`contextd.web.security` — Host/Origin checks and the per-start token;
* :mod:`contextd.web.feed` — one poller of the engine's progress shared by every browser,
  and the JSON-lines progress log;
* :mod:`contextd.web.registry` — running managers across projects;
* :mod:`contextd.web.pages` — one small module per page.

The manager never opens the database itself: it talks to the project's engine through
:mod:`contextd.runtime.owner`, so it is the owner or one of its clients, never a second writer.
"""
