"""The standalone service's ASGI application: the JSON API of docs/SERVICE.md, health and
readiness, the OpenAPI document, and the MCP streamable-HTTP endpoint at ``/mcp``, on one
Starlette app behind :class:`contextd.http.guard.Guard`.

The index is reached only through the :class:`contextd.mcp.lifecycle.EngineHandle`
(:func:`contextd.runtime.owner.connect` with duties): the service is one more process of the owner
protocol, owning the database or calling the process that does.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from contextd.errors import ContextdError, UsageError
from contextd.records import ContextScope, to_dict
from contextd.http import api
from contextd.http.guard import BodyTooLarge, Guard, RateLimiter, SiteCheck

log = logging.getLogger("contextd.http")


def _error(status: int, code: str, message: str, details: list | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    return JSONResponse({"error": error}, status_code=status, headers=headers)


class ServiceRoutes:
    """The endpoint functions, calling the engine in worker threads (its calls block)."""

    def __init__(self, handle: Any, concurrent_queries: int):
        self.handle = handle
        # Queries run on at most this many threads at once (engine.max_concurrent_queries);
        # the others wait their turn. A query is mostly CPU-bound Python under the GIL:
        # more threads add switching, not throughput (benchmarks/bench_service.py).
        self._query_slots = anyio.CapacityLimiter(concurrent_queries)

    async def _engine(self):
        """The engine; waiting for it (on a worker thread) only while it is still opening."""
        return self.handle.opened() or await anyio.to_thread.run_sync(self.handle.get)

    @staticmethod
    async def _parse(request: Request, model: type[BaseModel]) -> BaseModel:
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise HTTPException(415, "send the body as application/json (Content-Type: "
                                "application/json)")
        raw = await request.body()
        try:
            data = json.loads(raw or b"null")
        except ValueError as exc:
            raise _Refusal(400, "malformed_json", f"the body is not valid JSON: {exc}") from None
        except RecursionError:
            raise _Refusal(400, "malformed_json", "the body is not valid JSON: nested too "
                           "deep") from None
        if not isinstance(data, dict):
            raise _Refusal(400, "malformed_json", "the body must be a JSON object")
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            details = [{"field": ".".join(map(str, e["loc"])), "problem": e["msg"]}
                       for e in exc.errors()]
            summary = "; ".join(f"{d['field']}: {d['problem']}" for d in details)
            raise _Refusal(400, "invalid_request", summary, details) from None

    async def add_context(self, request: Request) -> JSONResponse:
        body = await self._parse(request, api.AddContextRequest)
        engine = await self._engine()
        result = await anyio.to_thread.run_sync(
            lambda: engine.add_context(body.file_path, body.content, body.lang, body.mime))
        return JSONResponse(result)

    async def delete_context(self, request: Request) -> JSONResponse:
        body = await self._parse(request, api.DeleteContextRequest)
        engine = await self._engine()
        return JSONResponse(await anyio.to_thread.run_sync(
            lambda: engine.delete_context(body.file_path)))

    async def query_context(self, request: Request) -> JSONResponse:
        from contextd.query.records import QueryRequest

        body = await self._parse(request, api.QueryContextRequest)
        engine = await self._engine()
        config = engine.project.config
        if body.model and body.model != config.embedding.model:
            raise _Refusal(400, "model_mismatch", f"this service embeds with "
                           f"{config.embedding.model}, not {body.model}")
        filters = body.filters or api.QueryFilters()
        scope = ContextScope(paths=api.as_list(filters.path_glob),
                             languages=api.as_list(filters.lang), kinds=api.as_list(filters.kind),
                             exclude_patterns=api.as_list(filters.exclude_glob))
        query = QueryRequest(query=body.q, k=body.k, scope=scope, max_tokens=body.budget,
                             mmr_lambda=body.mmr_lambda)
        response = await anyio.to_thread.run_sync(lambda: engine.query(query),
                                                  limiter=self._query_slots)
        return JSONResponse({
            "q_embed_model": (config.embedding.model if "semantic" in response.searched_by
                              else None),
            "total": response.total, "hits": [to_dict(h) for h in response.hits],
            "total_tokens": response.total_tokens, "providers": response.providers,
            "timings_ms": response.timings_ms, "notes": list(response.notes)})

    async def stats(self, request: Request) -> JSONResponse:
        """The engine's stats plus this service's own: queries running now and the most it
        runs at once, for an operator sizing ``engine.max_concurrent_queries``."""
        engine = await self._engine()
        stats = to_dict(await anyio.to_thread.run_sync(engine.stats))
        stats["service"] = {"queries_running": int(self._query_slots.borrowed_tokens),
                            "max_concurrent_queries": int(self._query_slots.total_tokens)}
        return JSONResponse(stats)

    async def backup(self, request: Request) -> JSONResponse:
        body = await self._parse(request, api.BackupRequest)
        engine = await self._engine()
        return JSONResponse(await anyio.to_thread.run_sync(
            lambda: engine.backup(body.destination)))

    async def healthz(self, request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> JSONResponse:
        state = self.handle.state()
        return JSONResponse(state, status_code=200 if state["ready"] else 503)

    async def openapi(self, request: Request) -> JSONResponse:
        return JSONResponse(api.openapi_document())


class _Refusal(Exception):
    """A request refused with a JSON error."""

    def __init__(self, status: int, code: str, message: str, details: list | None = None):
        super().__init__(message)
        self.status, self.code, self.details = status, code, details


async def _on_refusal(request: Request, exc: _Refusal) -> JSONResponse:
    return _error(exc.status, exc.code, str(exc), exc.details)


async def _on_http(request: Request, exc: HTTPException) -> JSONResponse:
    codes = {404: "not_found", 405: "method_not_allowed", 415: "unsupported_media_type"}
    message = exc.detail if exc.status_code == 415 else {
        404: f"no endpoint {request.url.path}; see /openapi.json",
        405: f"{request.method} is not allowed on {request.url.path}"}.get(
            exc.status_code, str(exc.detail))
    return _error(exc.status_code, codes.get(exc.status_code, "http_error"), message,
                  headers=exc.headers)


async def _on_contextd(request: Request, exc: ContextdError) -> JSONResponse:
    if isinstance(exc, UsageError):
        return _error(400, "bad_request", str(exc))
    return _error(503 if "still opening" in str(exc) else 500, "engine_error", str(exc))


async def _on_too_large(request: Request, exc: BodyTooLarge) -> JSONResponse:
    return _error(413, "body_too_large", str(exc))


async def _on_crash(request: Request, exc: Exception) -> JSONResponse:
    log.exception("service: %s %s failed", request.method, request.url.path)
    return _error(500, "internal_error", f"{type(exc).__name__}: {exc}")


def build_service(handle: Any, mcp_app: Starlette, keyring: Any, *, keys_required: bool,
                  max_body: int, rate: float, burst: int, query_slots: int,
                  site: SiteCheck | None = None) -> Guard:
    """The whole service: JSON routes and the MCP app's routes in one Starlette app (its
    lifespan runs the MCP session manager), behind the guard (``site``: the Host and Origin
    check of a loopback service)."""
    routes = ServiceRoutes(handle, query_slots)
    json_routes = [Route(path, getattr(routes, path.strip("/").replace(".json", "")),
                         methods=[method])
                   for method, path, *_ in api.ENDPOINTS]
    json_routes.append(Route("/openapi.json", routes.openapi, methods=["GET"]))
    app = Starlette(
        routes=json_routes + list(mcp_app.routes),
        lifespan=lambda _app: mcp_app.router.lifespan_context(mcp_app),
        exception_handlers={_Refusal: _on_refusal, HTTPException: _on_http,
                            BodyTooLarge: _on_too_large,
                            ContextdError: _on_contextd, Exception: _on_crash})
    return Guard(app, keyring, keys_required=keys_required, max_body=max_body,
                 limiter=RateLimiter(rate, burst), site=site)
