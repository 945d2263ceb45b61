"""The REST API (FastAPI; OpenAPI at ``/docs`` and ``/openapi.json``).

Routes only read the daemon's state or hand work to the same queue the scheduler uses. Probes
(``/livez``, ``/readyz``) and ``/metrics`` need no token; everything under ``/v1`` needs a bearer
token when tokens are configured: ``read`` for GET, ``admin`` for everything that changes
something. Without tokens the API only listens on loopback (the settings refuse anything else).
Errors are JSON ``{"error": message}`` with the status code that fits (400 bad request, 401 no or
unknown token, 403 insufficient scope, 404 unknown table/run/instant, 409 conflicting state).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from hoodie.errors import HoodieError, InvalidInputError, TableNotFoundError, TimelineError
from service import views
from service.daemon import TRIGGERABLE, Daemon
from service.errors import BadRequest, Conflict, NotFound, ServiceError
from service.store import RunState

Scope = Literal["read", "admin"]


class TriggerRequest(BaseModel):
    """Schedule now and execute: ``options`` are Hudi keys; ``instant`` executes that plan instead."""

    options: dict[str, str] = Field(default_factory=dict)
    instant: str | None = Field(default=None, pattern=r"^\d{14,17}$")


class TrueTimeRequest(BaseModel):
    lock_held: bool = False
    """The caller already holds the table lock (it asks for a completion time inside its commit)."""


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def _status_of(error: Exception) -> int:
    if isinstance(error, ApiError):
        return error.status
    if isinstance(error, (NotFound, TableNotFoundError)):
        return 404
    if isinstance(error, (BadRequest, InvalidInputError)):
        return 400
    if isinstance(error, (Conflict, TimelineError)):
        return 409
    if isinstance(error, HoodieError):
        return 422
    return 500


def create_app(daemon: Daemon, *, manage_lifecycle: bool = True) -> FastAPI:
    settings = daemon.settings
    tokens = [(t.secret(), t.scope, t.name) for t in settings.api.tokens]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            daemon.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                daemon.stop()

    app = FastAPI(
        title="hts",
        summary="Table services for Apache Hudi tables",
        version="0.1.0",
        lifespan=lifespan,
    )

    def authorize(scope: Scope) -> Callable[..., None]:
        def check(authorization: Annotated[str | None, Header()] = None) -> None:
            if not tokens:
                return
            if authorization is None or not authorization.lower().startswith("bearer "):
                raise ApiError(401, "a bearer token is required", {"WWW-Authenticate": "Bearer"})
            given = authorization[7:].strip().encode()
            match = next((t for t in tokens if hmac.compare_digest(t[0].encode(), given)), None)
            if match is None:
                raise ApiError(401, "unknown token", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
            if scope == "admin" and match[1] != "admin":
                raise ApiError(403, f"token {match[2]!r} has scope {match[1]!r}; this needs 'admin'")

        return check

    read = [Depends(authorize("read"))]
    admin = [Depends(authorize("admin"))]

    @app.exception_handler(ApiError)
    @app.exception_handler(ServiceError)
    @app.exception_handler(HoodieError)
    async def _service_error(_: Request, error: Exception) -> JSONResponse:
        headers = error.headers if isinstance(error, ApiError) else None
        return JSONResponse({"error": str(error)}, status_code=_status_of(error), headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            + (f" (got {e['input']!r})" if "input" in e else "")
            for e in error.errors()
        )
        return JSONResponse({"error": f"invalid request: {problems}"}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(error.detail)}, status_code=error.status_code)

    @app.middleware("http")
    async def _count(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        daemon.metrics.api_requests.labels(path, request.method, str(response.status_code)).inc()
        return response

    # -- probes and metrics ---------------------------------------------------------------------

    @app.get("/livez", tags=["probes"])
    def livez() -> JSONResponse:
        """Live while the watch tick keeps finishing."""
        reason = daemon.liveness()
        if reason is not None:
            return JSONResponse({"live": False, "reason": reason}, status_code=503)
        return JSONResponse({"live": True})

    @app.get("/readyz", tags=["probes"])
    def readyz() -> JSONResponse:
        """Ready when started, the run history is writable and every table lock is connected."""
        reasons = daemon.readiness()
        if reasons:
            return JSONResponse({"ready": False, "reasons": reasons}, status_code=503)
        return JSONResponse({"ready": True})

    metrics_deps = read if settings.api.metrics_require_token else []

    @app.get("/metrics", tags=["probes"], dependencies=metrics_deps)
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(daemon.metrics.exposition(), media_type="text/plain; version=0.0.4")

    # -- tables ---------------------------------------------------------------------------------

    @app.get("/v1/status", tags=["daemon"], dependencies=read)
    def status() -> dict[str, Any]:
        return {
            "replica": daemon.replica,
            "leader": daemon.is_leader,
            "paused": daemon.queue.paused,
            "tables": len(daemon.registry),
            "spark_master": settings.spark.master,
            "queue": {s: {"waiting": w, "running": r} for s, (w, r) in daemon.queue.counts().items()},
            "runs": daemon.store.counts(),
        }

    @app.get("/v1/tables", tags=["tables"], dependencies=read)
    def tables() -> list[dict[str, Any]]:
        return [views.summary(e) for e in sorted(daemon.registry, key=lambda e: e.id)]

    @app.get("/v1/tables/{table_id}", tags=["tables"], dependencies=read)
    def table(table_id: str) -> dict[str, Any]:
        entry = daemon.entry(table_id)
        running = [
            {
                "run": i.run_id,
                "service": i.service,
                "instant": i.instant,
                "tasks_done": i.progress[0],
                "tasks_total": i.progress[1],
            }
            for i in daemon.queue.items()
            if i.table_id == table_id and i.running
        ]
        gave_up = {k[1]: v for k, v in daemon.gave_up.items() if k[0] == table_id}
        return views.detail(entry, running, gave_up, daemon.refused(entry))

    def _open(table_id: str) -> Any:
        entry = daemon.entry(table_id)
        if entry.table is None:
            raise Conflict(f"table {table_id} cannot be read now: {entry.error or 'not opened yet'}")
        return entry.table

    @app.get("/v1/tables/{table_id}/timeline", tags=["tables"], dependencies=read)
    def timeline(table_id: str) -> dict[str, Any]:
        return {"table": table_id, "instants": views.timeline(_open(table_id))}

    @app.get("/v1/tables/{table_id}/plans/{instant}", tags=["tables"], dependencies=read)
    def plan(table_id: str, instant: str) -> dict[str, Any]:
        return {"table": table_id, **views.plan(_open(table_id), instant)}

    def _trigger(service: str) -> Callable[..., JSONResponse]:
        def trigger(
            table_id: str,
            body: TriggerRequest | None = None,
            idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
        ) -> JSONResponse:
            request = body or TriggerRequest()
            run, created = daemon.trigger(
                table_id,
                service,
                options=request.options,
                instant=request.instant,
                idempotency_key=idempotency_key,
            )
            return JSONResponse(run.as_json(), status_code=202 if created else 200)

        trigger.__name__ = f"trigger_{service}"
        trigger.__doc__ = (
            f"Schedule a {service} now and execute it (or execute the REQUESTED plan ``instant``). "
            "The same ``Idempotency-Key`` header returns the run the first request made."
        )
        return trigger

    for service in TRIGGERABLE:
        app.post(
            f"/v1/tables/{{table_id}}/{service}", tags=["triggers"], dependencies=admin, status_code=202
        )(_trigger(service))

    @app.post("/v1/tables/{table_id}/pause", tags=["tables"], dependencies=admin)
    def pause_table(table_id: str) -> dict[str, Any]:
        daemon.pause(table_id)
        return {"table": table_id, "paused": True}

    @app.post("/v1/tables/{table_id}/resume", tags=["tables"], dependencies=admin)
    def resume_table(table_id: str) -> dict[str, Any]:
        daemon.resume(table_id)
        return {"table": table_id, "paused": False}

    @app.post("/v1/pause", tags=["daemon"], dependencies=admin)
    def pause_all() -> dict[str, Any]:
        daemon.pause()
        return {"paused": True}

    @app.post("/v1/resume", tags=["daemon"], dependencies=admin)
    def resume_all() -> dict[str, Any]:
        daemon.resume()
        return {"paused": False}

    @app.post("/v1/tables/{table_id}/truetime", tags=["truetime"], dependencies=admin)
    def truetime(table_id: str, body: TrueTimeRequest | None = None) -> dict[str, Any]:
        """A new instant time for the table, by Hudi's TrueTime rule (lock, skew wait, table timezone)."""
        started = time.monotonic()
        instant = daemon.truetime(table_id, lock_held=(body or TrueTimeRequest()).lock_held)
        return {
            "table": table_id,
            "instant_time": instant,
            "took_ms": round((time.monotonic() - started) * 1000, 1),
        }

    # -- runs ----------------------------------------------------------------------------------

    @app.get("/v1/runs", tags=["runs"], dependencies=read)
    def runs(
        table: str | None = None,
        state: RunState | None = None,
        service: str | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[dict[str, Any]]:
        found = daemon.store.list(
            table_id=table, state=state.value if state else None, service=service, limit=limit
        )
        return [r.as_json() for r in found]

    @app.get("/v1/runs/{run_id}", tags=["runs"], dependencies=read)
    def run(run_id: int) -> dict[str, Any]:
        found = daemon.store.get(run_id)
        if found is None:
            raise NotFound(f"no run {run_id}")
        return found.as_json()

    @app.post("/v1/runs/{run_id}/cancel", tags=["runs"], dependencies=admin)
    def cancel(run_id: int) -> dict[str, Any]:
        return daemon.cancel(run_id).as_json()

    return app
