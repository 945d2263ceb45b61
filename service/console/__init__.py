"""The operator console: static HTML, CSS and JavaScript in this package, served by the daemon at
``/`` (the page) and ``/console/<file>`` (its assets), reading the REST API with the API's own
tokens (entered once in the page, kept in the browser's ``sessionStorage``).

No build step and nothing from a CDN: the files here are what the browser runs. They are read
once, when the app is made, and served with an ETag and a Content-Security-Policy that allows
only this origin (no inline script or style). These routes are not part of the API: the OpenAPI
does not list them and they need no token (the page holds no data; the API calls it makes do).
"""

from __future__ import annotations

import hashlib
from importlib import resources

from fastapi import FastAPI, Path, Request, Response
from fastapi.responses import JSONResponse

ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "fleet.js": "text/javascript; charset=utf-8",
    "table.js": "text/javascript; charset=utf-8",
    "runs.js": "text/javascript; charset=utf-8",
    "actions.js": "text/javascript; charset=utf-8",
}
"""The console's files and their media types (nothing else is served)."""

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _load() -> dict[str, tuple[bytes, str]]:
    folder = resources.files(__name__)
    out: dict[str, tuple[bytes, str]] = {}
    for name in ASSETS:
        data = folder.joinpath(name).read_bytes()
        out[name] = (data, '"' + hashlib.sha1(data).hexdigest()[:16] + '"')
    return out


def mount_console(app: FastAPI) -> None:
    """Add the console's routes (``/`` and ``/console/<file>``) to ``app``."""
    files = _load()

    def serve(name: str, request: Request) -> Response:
        data, etag = files[name]
        headers = {**HEADERS, "ETag": etag}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(data, media_type=ASSETS[name], headers=headers)

    @app.get("/", include_in_schema=False)
    def console_page(request: Request) -> Response:
        return serve("index.html", request)

    @app.get("/console/{name}", include_in_schema=False)
    def console_asset(request: Request, name: str = Path()) -> Response:
        if name not in files or name == "index.html":
            return JSONResponse({"error": f"no console file {name!r}"}, status_code=404)
        return serve(name, request)
