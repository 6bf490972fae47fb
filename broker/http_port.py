"""One HTTP port of ours (/metrics and the web console) as a broker Service.

An ASGI app served by hypercorn's Trio worker: HTTP parsing, keep-alive and
timeouts are hypercorn's (h11), never ours. The TCP socket is bound here first so
that a busy port is one logged line and the broker runs on without the endpoint,
and so that `bound_port` is known for port 0. A Unix socket path serves the same
way (a cluster process's private metrics, read by its supervisor).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

log = logging.getLogger(__name__)

_GRACEFUL_TIMEOUT_S = 1.0


class HttpPort:
    """Serves `app` on `host:port` (0: a free port) or on the Unix socket `unix_path`."""

    def __init__(
        self,
        app: Any,
        host: str,
        port: int,
        *,
        what: str = "metrics",
        unix_path: Path | None = None,
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.what = what
        self.unix_path = unix_path
        self.bound_port: int | None = None

    def _bind(self) -> socket.socket:
        if self.unix_path is not None:
            self.unix_path.unlink(missing_ok=True)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(str(self.unix_path))
        else:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.host or "0.0.0.0", self.port))
            except OSError:
                sock.close()
                raise
            self.bound_port = sock.getsockname()[1]
        sock.listen(128)
        sock.setblocking(False)
        return sock

    def _config(self, fd: int) -> Config:
        config = Config()
        config.bind = [f"fd://{fd}"]
        config.accesslog = None
        config.errorlog = logging.getLogger("broker.http")
        config.graceful_timeout = _GRACEFUL_TIMEOUT_S
        return config

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        where = str(self.unix_path) if self.unix_path else f"{self.host or '0.0.0.0'}:{self.port}"
        try:
            sock = self._bind()
        except OSError as exc:
            # An aid, not the service: a busy port must not stop the broker.
            log.error("%s endpoint disabled: cannot bind %s: %s", self.what, where, exc.strerror)
            task_status.started()
            return
        if self.unix_path is None:
            log.info(
                "serving %s on http://%s:%d/", self.what, self.host or "0.0.0.0", self.bound_port
            )
        # Hypercorn owns (and closes) a duplicate of the bound socket.
        config = self._config(os.dup(sock.fileno()))
        sock.close()
        try:
            await serve(self.app, config, task_status=_started(task_status))
        finally:
            if self.unix_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.unix_path)


class _started:
    """Hypercorn reports its binds; the broker's services report nothing."""

    def __init__(self, outer: trio.TaskStatus[None]) -> None:
        self._outer = outer

    def started(self, value: object = None) -> None:
        self._outer.started()


def find_http_port(services: Iterable[object]) -> HttpPort | None:
    """The broker's HTTP port among its services (None when `metrics.port` is -1)."""
    for service in services:
        if isinstance(service, HttpPort):
            return service
    return None
