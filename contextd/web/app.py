"""The Index Manager's Starlette app: one route per page module, the live feed (SSE), the
progress log, and the JSON endpoints the pages' buttons call. Long work (a rebuild) runs as
the engine's job; a page or a button never holds the database itself."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from contextd.boundary.path_args import check_paths, refusal_text
from contextd.errors import ContextdError, JobConflictError
from contextd.web.layout import esc, int_param, page
from contextd.web.pages import PAGES, PageContext
from contextd.web.security import ManagerGuard

# Largest JSON body a button sends (a path or a list of paths).
MAX_BODY = 64 * 1024
# An idle SSE stream gets a comment this often, so proxies and browsers keep it open.
KEEPALIVE_S = 15.0
# How often an SSE stream looks for a newer snapshot (the feed itself polls every 0.5 s).
STREAM_TICK_S = 0.2


class ApiError(Exception):
    """A button's request that cannot be done; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def build_app(handle: Any, feed: Any, token: str, port: int, project: str) -> ManagerGuard:
    """The whole app behind its guard (Host, Origin, token)."""
    ctx = PageContext(handle=handle, feed=feed, project=project)
    nav = [(module.PATH, module.TITLE) for module in PAGES]
    stopping = threading.Event()
    refreshing = threading.Lock()

    def page_route(module: Any) -> Route:
        async def endpoint(request: Request) -> Response:
            status = 200
            try:
                body = await module.body(request, ctx)
            except ContextdError as exc:
                status, body = 503, f'<p class="bad">{esc(str(exc))}</p>'
            return HTMLResponse(page(module.TITLE, module.PATH, body, project, nav,
                                     getattr(module, "SCRIPT", "")), status_code=status,
                                headers={"cache-control": "no-store"})
        return Route(module.PATH, endpoint, methods=["GET"])

    async def events(request: Request) -> Response:
        async def stream():
            last, quiet = None, 0.0
            while not stopping.is_set():
                version, snapshot = feed.snapshot()
                if version != last:
                    last, quiet = version, 0.0
                    yield f"data: {json.dumps(snapshot, default=str)}\n\n"
                elif quiet >= KEEPALIVE_S:
                    quiet = 0.0
                    yield ": keep-alive\n\n"
                if await request.is_disconnected():
                    return
                await anyio.sleep(STREAM_TICK_S)
                quiet += STREAM_TICK_S
        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"cache-control": "no-store"})

    async def progress_log(request: Request) -> Response:
        limit = int_param(request.query_params.get("limit"), 200, 1, 10000)
        return JSONResponse(feed.entries(limit))

    async def progress_now(request: Request) -> Response:
        return JSONResponse(json.loads(json.dumps(feed.snapshot()[1], default=str)))

    async def rebuild(request: Request) -> Response:
        body = await _json(request)
        if body.get("confirm") is not True:
            raise ApiError(400, "a rebuild deletes the index and re-creates it: send "
                                "confirm=true to proceed")
        paths = _paths(body.get("paths"))
        try:
            result = await ctx.call("rebuild", paths=paths, wait=False, created_by="ui")
        except JobConflictError:
            raise ApiError(409, "another rebuild is already running: cancel it on the Jobs "
                                "page or wait for it to end") from None
        return JSONResponse({"job_id": result.job_id, "status": result.status,
                             "message": f"rebuild {result.job_id} started"}, status_code=202)

    async def refresh(request: Request) -> Response:
        body = await _json(request)
        paths = _paths(body.get("paths"))
        if paths:  # refused now, with the reason, not after a 202 by a failed job
            _, refused = check_paths(Path(project), paths)
            if refused:
                raise ApiError(400, f"refresh refused: {refusal_text(refused)}")
        if not refreshing.acquire(blocking=False):
            raise ApiError(409, "a refresh started here is still running")

        def run() -> None:
            try:
                handle.get().refresh(paths=paths, force=bool(body.get("force")))
            except Exception as exc:  # shown by the live line and the jobs page
                feed.note_failure(f"refresh failed: {exc}")
            finally:
                refreshing.release()

        threading.Thread(target=run, name="contextd-ui-refresh", daemon=True).start()
        return JSONResponse({"message": "refresh of changed files started"}, status_code=202)

    async def cancel(request: Request) -> Response:
        status = await ctx.call("cancel_job", request.path_params["job_id"])
        if status is None:
            raise ApiError(404, f"no job {request.path_params['job_id']!r}: see the Jobs page")
        return JSONResponse({"job_id": status.job_id, "status": status.status,
                             "message": f"job {status.job_id}: {status.status}"
                             + (" (stops after its current batch)"
                                if status.status == "in_progress" else "")})

    async def retry(request: Request) -> Response:
        body = await _json(request)
        path = body.get("path")
        if not isinstance(path, str) or not path:
            raise ApiError(400, "send the file to retry as {\"path\": \"...\"}")
        report = await ctx.call("refresh", paths=[path], force=True)
        return JSONResponse({"message": f"{path}: {report.summary}",
                             "failed": report.files_failed})

    async def schema_status(request: Request) -> Response:
        return JSONResponse(await ctx.call("schema_status"),
                            headers={"cache-control": "no-store"})

    async def api_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, ApiError):
            return JSONResponse({"message": str(exc)}, status_code=exc.status)
        return JSONResponse({"message": str(exc)}, status_code=400)

    routes = [page_route(module) for module in PAGES] + [
        Route("/events", events, methods=["GET"]),
        Route("/progress", progress_log, methods=["GET"]),
        Route("/api/progress", progress_now, methods=["GET"]),
        Route("/schema-status", schema_status, methods=["GET"]),
        Route("/api/rebuild", rebuild, methods=["POST"]),
        Route("/api/refresh", refresh, methods=["POST"]),
        Route("/api/jobs/{job_id}/cancel", cancel, methods=["POST"]),
        Route("/api/errors/retry", retry, methods=["POST"]),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        yield
        stopping.set()  # open event streams end, so shutdown does not wait for them

    app = Starlette(routes=routes, exception_handlers={ApiError: api_error,
                                                       ContextdError: api_error},
                    lifespan=lifespan)
    return ManagerGuard(app, token, port)


async def _json(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise ApiError(413, f"request body over {MAX_BODY:,} bytes")
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise ApiError(400, "the request body is not JSON (or is nested too deep)") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


def _paths(raw: Any) -> list[str] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
        raise ApiError(400, "paths must be a list of file or directory paths")
    return raw
