"""The JSON API of the standalone service (its endpoints: docs/SERVICE.md): request models
and the OpenAPI schema built from them.

Requests are pydantic models with ``extra="forbid"`` and ``strict``: a misspelt field is
refused with its name, never silently ignored, and a value of the wrong JSON type is refused
rather than coerced. The OpenAPI document is generated from the same models, so it
cannot drift from what the service accepts.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


MAX_QUERY_CHARS = 2000


class _Strict(BaseModel):
    """Unknown fields refused, and every value of the JSON type its schema names (``k`` is a
    number, not ``"5"`` or ``true``)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class AddContextRequest(_Strict):
    """Index one project file: ``content`` as its text, or the file on disk when omitted."""

    file_path: str = Field(min_length=1, max_length=4096,
                           description="Path relative to the project root (or absolute inside "
                                       "it).")
    lang: str | None = Field(None, max_length=64, description="Language hint; the language "
                             "is detected from the file name, a disagreeing hint is noted.")
    mime: str | None = Field(None, max_length=255, description="MIME type hint.")
    content: str | None = Field(None, description="The file's text; omitted: read from disk. "
                                "Pushed text is replaced by the disk version at the file's next "
                                "change or catch-up.")


class DeleteContextRequest(_Strict):
    """Drop one file from the index."""

    file_path: str = Field(min_length=1, max_length=4096)


class QueryFilters(_Strict):
    """Where to search; each takes one value or a list."""

    lang: str | list[str] | None = Field(None, description="Languages (python, markdown...).")
    kind: str | list[str] | None = Field(None, description="Chunk kinds (function, class...).")
    path_glob: str | list[str] | None = Field(None, description="Globs on the relative path.")
    exclude_glob: str | list[str] | None = Field(None, description="Globs of paths left out "
                                                 "(an extension of the spec's filters).")


class QueryContextRequest(_Strict):
    """Search the index."""

    q: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The query.")
    k: int | None = Field(None, ge=1, description="Most hits (default query.default_k, "
                          "at most query.max_k).")
    filters: QueryFilters | None = None
    mmr_lambda: float | None = Field(None, ge=0.0, le=1.0, description="MMR: 1 relevance only, "
                                     "0 diversity only (default query.mmr_lambda).")
    budget: int | None = Field(None, ge=1, description="Token budget of the hits (default "
                               "budget.default_max_tokens, at most query.max_budget_tokens).")
    model: str | None = Field(None, description="Embedding model expected; refused when the "
                              "service embeds with another.")


class BackupRequest(_Strict):
    """Take a backup now."""

    destination: str | None = Field(None, max_length=4096, description="Name of a new file "
                                    "in the service's backup folder (no '..', no path "
                                    "elsewhere); default: a dated file there.")


def as_list(value: str | list[str] | None) -> tuple[str, ...]:
    """A filter value as a tuple."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


# (method, path, request model or None, scope, summary) of every JSON endpoint.
ENDPOINTS: tuple[tuple[str, str, type[BaseModel] | None, str | None, str], ...] = (
    ("POST", "/add_context", AddContextRequest, "write", "Index one file's content."),
    ("POST", "/delete_context", DeleteContextRequest, "write", "Drop one file from the index."),
    ("POST", "/query_context", QueryContextRequest, "read", "Ranked, budgeted snippets."),
    ("GET", "/stats", None, "read", "get_context_stats."),
    ("POST", "/backup", BackupRequest, "write", "Take a consistent backup now."),
    ("GET", "/healthz", None, None, "The process is up."),
    ("GET", "/readyz", None, None, "The index is open and answering."),
)

_ERROR_SCHEMA = {
    "type": "object", "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {
        "code": {"type": "string"}, "message": {"type": "string"},
        "details": {"type": "array", "items": {"type": "object"}}}}}}


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of the JSON API (the MCP endpoint is ``/mcp``)."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {"Error": _ERROR_SCHEMA}
    for method, path, model, scope, summary in ENDPOINTS:
        operation: dict[str, Any] = {
            "summary": summary,
            "responses": {"200": {"description": "OK", "content": {"application/json": {
                "schema": {"type": "object"}}}}}}
        for status in ("400", "401", "403", "404", "405", "413", "415", "429", "503"):
            operation["responses"][status] = {"description": "error", "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        if scope:
            operation["security"] = [{"apiKey": []}]
            operation["x-scope"] = scope
        if model is not None:
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
            operation["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}
        paths[path] = {method.lower(): operation}
    return {"openapi": "3.1.0",
            "info": {"title": "contextd service", "version": importlib.metadata.version("contextd"),
                     "description": "The contextd JSON API; MCP streamable HTTP at /mcp."},
            "paths": paths,
            "components": {"schemas": schemas, "securitySchemes": {"apiKey": {
                "type": "http", "scheme": "bearer",
                "description": "`contextd keys create`; not needed on loopback while no "
                               "key exists."}}}}
