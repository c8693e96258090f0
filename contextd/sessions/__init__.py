"""Search sessions and Markdown reports: research a question across the index in
small steps, then write down what was found with every claim linked to its source lines.

* :mod:`contextd.sessions.manager` — search_knowledge / get_search_results /
  list_search_results: sessions of kept results, stored in the index database, expiring;
* :mod:`contextd.sessions.scope` — a search's ``scope {files, folders}`` as query scope paths;
* :mod:`contextd.sessions.templates` — report templates (built-in and the user's), their
  variable schemas, Jinja2 in a sandbox;
* :mod:`contextd.sessions.reports` — create_rag_report: validate the variables, check and
  link every citation, write ``YYYYMMDD_HHMMSS_<name>.md`` where it is allowed to;
* :mod:`contextd.sessions.records` — the records every surface exchanges.

Sessions go through the Engine (the process owning the database); reports need only the
project (its root and configuration) and are written by the process that was asked.
"""

from contextd.sessions.records import (
    SearchRequest, SearchResults, SearchSession, SessionHit, SessionInfo, SessionList,
)

__all__ = ["SearchRequest", "SearchResults", "SearchSession", "SessionHit", "SessionInfo",
           "SessionList"]
