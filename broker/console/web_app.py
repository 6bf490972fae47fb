"""The routes of our HTTP port: /metrics, and the web console under /console/.

A Starlette app (it runs on Trio through anyio) served by hypercorn
(broker/http_port.py). The console's pages are plain ES modules and CSS shipped in
this package (`static/`): nothing to build, nothing fetched from elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from broker.http_port import HttpPort
from broker.metrics_http import MetricsSource, exposition_of

if TYPE_CHECKING:  # a cluster process serves no console: it need not import one
    from broker.console.console_api import ConsoleApi

STATIC = Path(__file__).parent / "static"


def private_metrics_port(metrics: MetricsSource, path: Path) -> HttpPort:
    """A supervised process's /metrics on the Unix socket `path`, read by its supervisor,
    which serves the one HTTP port (and the console) of all its processes."""
    return HttpPort(web_app(metrics, None), "", 0, unix_path=path)


def web_app(metrics: MetricsSource, console: ConsoleApi | None) -> Starlette:
    async def serve_metrics(request: Request) -> Response:
        body = exposition_of(await metrics.families())
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def root(request: Request) -> Response:
        links = '<a href="/metrics">/metrics</a>'
        if console is not None:
            links += ' and the <a href="/console/">web console</a>'
        return HTMLResponse(f"<!doctype html><title>broker</title><p>See {links}.</p>")

    routes: list[BaseRoute] = [
        Route("/", root, methods=["GET", "HEAD"]),
        Route("/metrics", serve_metrics, methods=["GET", "HEAD"]),
    ]
    if console is not None:

        async def page(request: Request) -> Response:
            return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

        async def to_page(request: Request) -> Response:
            return RedirectResponse("/console/")

        routes += [
            Route("/console", to_page),
            Mount(
                "/console",
                routes=[
                    Route("/", page),
                    Mount("/static", StaticFiles(directory=STATIC), name="static"),
                    *console.routes(),
                ],
            ),
        ]
    return Starlette(routes=routes)
