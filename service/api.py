"""The REST API (FastAPI; OpenAPI at ``/docs`` and ``/openapi.json``).

Routes only read the daemon's state or hand work to the same queue the scheduler uses. Probes
(``/livez``, ``/readyz``) and ``/metrics`` need no token; everything under ``/v1`` needs a bearer
token when tokens are configured: ``read`` for GET, ``admin`` for everything that changes
something. Without tokens the API only listens on loopback (the settings refuse anything else).
Errors are JSON ``{"error": message}`` with the status code that fits (400 bad request, 401 no or
unknown token, 403 insufficient scope, 404 unknown table/run/instant, 405 a method the path does
not take, with ``Allow``, 409 conflicting state, 422 a table or plan hts cannot read). The OpenAPI
lists, per operation, exactly these statuses with their bodies (``service.schemas``), and the
bearer scheme when tokens are configured. The operator console (``service.console``) is served at
``/`` beside the API, outside the OpenAPI; ``/v1/fleet``, ``/v1/whoami`` and
``/v1/tables/{id}/storage`` exist for it.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from hoodie.errors import HoodieError, InvalidInputError, TableNotFoundError, TimelineError
from service import fleet, schemas, views
from service.console import mount_console
from service.daemon import Daemon
from service.errors import BadRequest, Conflict, NotFound, ServiceError
from service.operations import TRIGGERABLE
from service.schemas import (
    INSTANT_PATTERN,
    RUN_ID_MAX,
    SERVICE_PATTERN,
    TABLE_ID_PATTERN,
    ErrorBody,
    RunBody,
    TriggerRequest,
    TrueTimeRequest,
)
from service.store import RunState

Scope = Literal["read", "admin"]
TableId = Annotated[str, Path(pattern=TABLE_ID_PATTERN, description="The table's id (GET /v1/tables)")]
RunId = Annotated[int, Path(ge=1, le=RUN_ID_MAX, description="A run's id")]
ServiceName = Annotated[
    str, Path(pattern=SERVICE_PATTERN, max_length=64, description="A table service (e.g. compaction)")
]

_ERRORS = {
    400: "The request is malformed: a parameter, header or body that does not fit its schema",
    401: "No bearer token, or an unknown one",
    403: "The token's scope does not allow this",
    404: "No such table, run or instant",
    409: "The request conflicts with the table's or run's state",
    422: "A table, timeline or plan hts cannot read or serve",
}
_BEARER = HTTPBearer(auto_error=False, description="A token from api.tokens")
_UNAUTHORIZED_HEADERS = {
    "WWW-Authenticate": {"description": "The bearer scheme", "required": True, "schema": {"type": "string"}}
}


_RUN_LINKS = {
    name: {"operationId": op, "parameters": {"run_id": "$response.body#/id"}}
    for name, op in (("GetRun", "get_run"), ("CancelRun", "cancel_run"))
}
_INDEXING_DOC = (
    " Indexing needs ``options`` asking for at least one index (e.g. "
    "``hoodie.metadata.record.index.enable=true``); which indexes a table can take depends on the "
    "table (its partitioning, its secondary index definitions): 400 or 409 name what is refused."
)

_INDEXING_EXAMPLE = {
    "requestBody": {
        "content": {
            "application/json": {"example": {"options": {"hoodie.metadata.record.index.enable": "true"}}}
        }
    }
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error responses ``codes``, each with the error body."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        out[code] = {"model": ErrorBody, "description": _ERRORS[code]}
        if code == 401:
            out[code]["headers"] = _UNAUTHORIZED_HEADERS
    return out


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
        redirect_slashes=False,
    )

    def token_of(credentials: HTTPAuthorizationCredentials | None) -> tuple[str, str, str]:
        """The configured token ``(secret, scope, name)`` the request carries; 401 otherwise."""
        if credentials is None:
            raise ApiError(401, "a bearer token is required", {"WWW-Authenticate": "Bearer"})
        given = credentials.credentials.strip().encode()
        match = next((t for t in tokens if hmac.compare_digest(t[0].encode(), given)), None)
        if match is None:
            raise ApiError(401, "unknown token", {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return match

    def authorize(scope: Scope) -> Callable[..., None]:
        def check(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]) -> None:
            match = token_of(credentials)
            if scope == "admin" and match[1] != "admin":
                raise ApiError(403, f"token {match[2]!r} has scope {match[1]!r}; this needs 'admin'")

        return check

    # Without tokens there is no auth at all (loopback only), and the OpenAPI says so.
    read = [Depends(authorize("read"))] if tokens else []
    admin = [Depends(authorize("admin"))] if tokens else []
    auth_errors = (401,) if tokens else ()
    admin_errors = (401, 403) if tokens else ()

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
        # 405 keeps Starlette's ``Allow`` header: the methods the path takes.
        return JSONResponse(
            {"error": str(error.detail)}, status_code=error.status_code, headers=error.headers
        )

    @app.middleware("http")
    async def _count(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        daemon.metrics.api_requests.labels(path, request.method, str(response.status_code)).inc()
        return response

    # -- probes and metrics ---------------------------------------------------------------------

    @app.get(
        "/livez",
        tags=["probes"],
        response_model=None,
        responses={200: {"model": schemas.Live}, 503: {"model": schemas.NotLive, "description": "Not live"}},
    )
    def livez() -> JSONResponse:
        """Live while the watch tick keeps finishing."""
        reason = daemon.liveness()
        if reason is not None:
            return JSONResponse({"live": False, "reason": reason}, status_code=503)
        return JSONResponse({"live": True})

    @app.get(
        "/readyz",
        tags=["probes"],
        response_model=None,
        responses={
            200: {"model": schemas.Ready},
            503: {"model": schemas.NotReady, "description": "Not ready"},
        },
    )
    def readyz() -> JSONResponse:
        """Ready when started, the run history is writable and every table lock is connected."""
        reasons = daemon.readiness()
        if reasons:
            return JSONResponse({"ready": False, "reasons": reasons}, status_code=503)
        return JSONResponse({"ready": True})

    metrics_token = settings.api.metrics_require_token

    @app.get(
        "/metrics",
        tags=["probes"],
        dependencies=read if metrics_token else [],
        response_class=PlainTextResponse,
        responses=errors(*auth_errors) if metrics_token else {},
    )
    def metrics() -> PlainTextResponse:
        """Prometheus' text exposition format."""
        return PlainTextResponse(daemon.metrics.exposition(), media_type=METRICS_MEDIA_TYPE)

    # -- tables ---------------------------------------------------------------------------------

    @app.get("/v1/status", tags=["daemon"], dependencies=read, responses=errors(*auth_errors))
    def status() -> schemas.Status:
        return schemas.Status.model_validate(
            {
                "replica": daemon.replica,
                "leader": daemon.is_leader,
                "paused": daemon.queue.paused,
                "tables": len(daemon.registry),
                "spark_master": settings.spark.master,
                "queue": {s: {"waiting": w, "running": r} for s, (w, r) in daemon.queue.counts().items()},
                "runs": daemon.store.counts(),
            }
        )

    @app.get("/v1/tables", tags=["tables"], dependencies=read, responses=errors(*auth_errors))
    def tables() -> list[schemas.TableSummary]:
        entries = sorted(daemon.registry, key=lambda e: e.id)
        return [
            schemas.TableSummary.model_validate(
                views.summary(e, daemon.health_of(e), daemon.suspended_services(e.id))
            )
            for e in entries
        ]

    @app.get("/v1/tables/{table_id}", tags=["tables"], dependencies=read, responses=errors(*auth_errors, 404))
    def table(table_id: TableId) -> schemas.TableDetail:
        entry = daemon.entry(table_id)
        running = [
            {
                "run": i.run_id,
                "service": i.service,
                "instant": i.target,
                "tasks_done": i.progress[0],
                "tasks_total": i.progress[1],
            }
            for i in daemon.queue.items()
            if i.table_id == table_id and i.running
        ]
        gave_up = {k[1]: v for k, v in daemon.gave_up.items() if k[0] == table_id}
        return schemas.TableDetail.model_validate(
            views.detail(
                entry,
                running,
                gave_up,
                daemon.refused(entry),
                daemon.health_of(entry),
                [s for (t, _), s in sorted(daemon.streaks.items()) if t == table_id],
                daemon.store.cost_totals(table_id),
            )
        )

    def _open(table_id: str) -> Any:
        entry = daemon.entry(table_id)
        if entry.table is None:
            raise Conflict(f"table {table_id} cannot be read now: {entry.error or 'not opened yet'}")
        return entry.table

    @app.get(
        "/v1/tables/{table_id}/timeline",
        tags=["tables"],
        dependencies=read,
        responses=errors(*auth_errors, 404, 409, 422),
    )
    def timeline(table_id: TableId) -> schemas.Timeline:
        return schemas.Timeline.model_validate(
            {"table": table_id, "instants": views.timeline(_open(table_id))}
        )

    @app.get(
        "/v1/tables/{table_id}/plans/{instant}",
        tags=["tables"],
        dependencies=read,
        responses=errors(400, *auth_errors, 404, 409, 422),
    )
    def plan(
        table_id: TableId,
        instant: Annotated[str, Path(pattern=INSTANT_PATTERN, description="The plan's instant time")],
    ) -> schemas.Plan:
        return schemas.Plan.model_validate({"table": table_id, **views.plan(_open(table_id), instant)})

    def _trigger(service: str) -> Callable[..., JSONResponse]:
        def trigger(
            table_id: TableId,
            body: TriggerRequest | None = None,
            idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
        ) -> JSONResponse:
            request = body or TriggerRequest()
            run, created = daemon.trigger(
                table_id,
                service,
                options=request.options,
                instant=request.instant,
                idempotency_key=idempotency_key,
            )
            return JSONResponse(
                RunBody.model_validate(run.as_json()).model_dump(mode="json"),
                status_code=202 if created else 200,
            )

        trigger.__name__ = f"trigger_{service}"
        trigger.__doc__ = (
            f"Schedule a {service} now and execute it (or execute the REQUESTED plan ``instant``). "
            "The same ``Idempotency-Key`` header returns the run the first request made; so does a "
            "request for work that is queued or running already (200)."
            + (_INDEXING_DOC if service == "indexing" else "")
        )
        return trigger

    for service in TRIGGERABLE:
        refusals = (400, *admin_errors, 404, 409, *((422,) if service == "indexing" else ()))
        app.post(
            f"/v1/tables/{{table_id}}/{service}",
            tags=["triggers"],
            dependencies=admin,
            status_code=202,
            response_model=RunBody,
            responses={
                202: {"description": "A new run, queued", "links": _RUN_LINKS},
                200: {
                    "model": RunBody,
                    "description": "The run that already does this work",
                    "links": _RUN_LINKS,
                },
                **errors(*refusals),
            },
            openapi_extra=_INDEXING_EXAMPLE if service == "indexing" else None,
        )(_trigger(service))

    @app.post(
        "/v1/tables/{table_id}/pause",
        tags=["tables"],
        dependencies=admin,
        responses=errors(*admin_errors, 404),
    )
    def pause_table(table_id: TableId) -> schemas.TablePaused:
        daemon.pause(table_id)
        return schemas.TablePaused(table=table_id, paused=True)

    @app.post(
        "/v1/tables/{table_id}/resume",
        tags=["tables"],
        dependencies=admin,
        responses=errors(*admin_errors, 404),
    )
    def resume_table(table_id: TableId) -> schemas.TablePaused:
        daemon.resume(table_id)
        return schemas.TablePaused(table=table_id, paused=False)

    @app.post(
        "/v1/tables/{table_id}/services/{service}/resume",
        tags=["tables"],
        dependencies=admin,
        responses=errors(400, *admin_errors, 404, 409),
    )
    def resume_service(table_id: TableId, service: ServiceName) -> schemas.ServiceResumed:
        """Resume a service suspended on the table after ``retry.suspend_after`` consecutive failed
        runs: its pending instants (also those given up on) run again and its policy schedules again.
        404: no such table or service; 409: the service is not suspended there."""
        resumed = daemon.resume_service(table_id, service)
        return schemas.ServiceResumed.model_validate({"table": table_id, **resumed.as_json()})

    @app.post("/v1/pause", tags=["daemon"], dependencies=admin, responses=errors(*admin_errors))
    def pause_all() -> schemas.Paused:
        daemon.pause()
        return schemas.Paused(paused=True)

    @app.post("/v1/resume", tags=["daemon"], dependencies=admin, responses=errors(*admin_errors))
    def resume_all() -> schemas.Paused:
        daemon.resume()
        return schemas.Paused(paused=False)

    @app.post(
        "/v1/tables/{table_id}/truetime",
        tags=["truetime"],
        dependencies=admin,
        responses=errors(400, *admin_errors, 404, 409),
    )
    def truetime(table_id: TableId, body: TrueTimeRequest | None = None) -> schemas.TrueTime:
        """A new instant time for the table, by Hudi's TrueTime rule (lock, skew wait, table timezone)."""
        started = time.monotonic()
        instant = daemon.truetime(table_id, lock_held=(body or TrueTimeRequest()).lock_held)
        took_ms = round((time.monotonic() - started) * 1000, 1)
        return schemas.TrueTime(table=table_id, instant_time=instant, took_ms=took_ms)

    # -- the console's data ---------------------------------------------------------------------

    whoami_doc = (
        "What the caller's token may do: ``admin`` acts, ``read`` only looks (without tokens "
        "configured, everyone is ``admin`` on loopback)."
    )
    if tokens:

        @app.get(
            "/v1/whoami",
            tags=["console"],
            operation_id="whoami",
            responses=errors(*auth_errors),
            description=whoami_doc,
        )
        def whoami(
            credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
        ) -> schemas.WhoAmI:
            _, scope, name = token_of(credentials)
            given: Scope = "admin" if scope == "admin" else "read"
            return schemas.WhoAmI(auth=True, scope=given, name=name, triggerable=list(TRIGGERABLE))

    else:

        @app.get("/v1/whoami", tags=["console"], operation_id="whoami", description=whoami_doc)
        def whoami_open() -> schemas.WhoAmI:
            return schemas.WhoAmI(auth=False, scope="admin", name=None, triggerable=list(TRIGGERABLE))

    @app.get(
        "/v1/fleet",
        tags=["console"],
        dependencies=read,
        response_model=None,
        responses={
            200: {"model": schemas.Fleet, "description": "Every table, compact"},
            **errors(*auth_errors),
        },
    )
    def fleet_page() -> Response:
        """Every table's state, pending services with their ages against the table's thresholds,
        queued and running work, recent failures, refused and suspended services, in one response
        (fields at their default are left out)."""
        # Built to ``schemas.Fleet`` by ``service.fleet`` (its tests validate it against the model)
        # and sent as it is: validating 1,000 tables again here would double what this costs.
        body = json.dumps(fleet.fleet(daemon), separators=(",", ":"), ensure_ascii=False)
        return Response(body, media_type="application/json")

    @app.get(
        "/v1/tables/{table_id}/storage",
        tags=["tables"],
        dependencies=read,
        responses=errors(*auth_errors, 404, 409, 422),
    )
    def storage(table_id: TableId) -> schemas.TableStorage:
        """File groups and slices in summary (per partition, the first 200 by name), the metadata
        table's partitions and their state, and the table's shape with its evidence."""
        entry = daemon.entry(table_id)
        table = _open(table_id)
        return schemas.TableStorage.model_validate(
            {"table": table_id, **views.storage(table, entry.config.options, daemon.refused(entry))}
        )

    # -- runs ----------------------------------------------------------------------------------

    @app.get("/v1/runs", tags=["runs"], dependencies=read, responses=errors(400, *auth_errors))
    def runs(
        table: Annotated[str | None, Query(pattern=TABLE_ID_PATTERN)] = None,
        state: RunState | None = None,
        service: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[RunBody]:
        found = daemon.store.list(
            table_id=table, state=state.value if state else None, service=service, limit=limit
        )
        return [RunBody.model_validate(r.as_json()) for r in found]

    @app.get(
        "/v1/runs/{run_id}",
        tags=["runs"],
        operation_id="get_run",
        dependencies=read,
        responses=errors(400, *auth_errors, 404),
    )
    def run(run_id: RunId) -> RunBody:
        found = daemon.store.get(run_id)
        if found is None:
            raise NotFound(f"no run {run_id}")
        return RunBody.model_validate(found.as_json())

    @app.post(
        "/v1/runs/{run_id}/cancel",
        tags=["runs"],
        operation_id="cancel_run",
        dependencies=admin,
        responses=errors(400, *admin_errors, 404, 409),
    )
    def cancel(run_id: RunId) -> RunBody:
        return RunBody.model_validate(daemon.cancel(run_id).as_json())

    mount_console(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


METRICS_MEDIA_TYPE = "text/plain; version=0.0.4"


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's OpenAPI, made exact: validation errors answer 400 with the error body (not FastAPI's
    422 ``HTTPValidationError``, which this API never sends), error bodies are always JSON, and
    ``/metrics`` answers Prometheus' text format."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    spec = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        routes=app.routes,
    )
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    for operations in spec.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            for code, response in list(responses.items()):
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                if schema == {"$ref": "#/components/schemas/HTTPValidationError"}:
                    del responses[code]
                elif any(c.get("schema") == error_ref for c in response.get("content", {}).values()):
                    response["content"] = {"application/json": {"schema": error_ref}}
    metrics = spec["paths"]["/metrics"]["get"]["responses"]["200"]
    metrics["content"] = {METRICS_MEDIA_TYPE: {"schema": {"type": "string"}}}
    for name in ("HTTPValidationError", "ValidationError"):
        spec.get("components", {}).get("schemas", {}).pop(name, None)
    app.openapi_schema = spec
    return spec
