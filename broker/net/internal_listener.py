"""An internal listener: one the broker's own processes use, on a Unix socket.

It is served like any listener (the same processors, request channel, handler pool
and API layer), with three differences that make it the cluster's inter-broker
listener: reaching the socket is the authentication (it lives in a directory only
the broker's user can enter), so every connection has the listener's fixed principal
(the API layer's principal middleware gives it); it serves only the APIs named; and
its connections are never closed for being idle (the other side keeps one open).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import attrs
import trio

from broker.net.admission import NewConnection
from broker.net.connection_quotas import ConnectionQuotas
from broker.net.processor import Processor

log = logging.getLogger(__name__)

LOCAL_ADDRESS = ("127.0.0.1", 0)
"""What an internal connection's context shows as its addresses (a Unix socket has none)."""


@attrs.frozen
class InternalListener:
    name: str
    path: Path
    principal: str
    api_keys: frozenset[int]


async def bind_internal(listener: InternalListener, backlog: int) -> trio.socket.SocketType:
    """Bind the listener's socket (replacing one a killed predecessor left)."""
    listener.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    listener.path.unlink(missing_ok=True)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    try:
        await sock.bind(str(listener.path))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


async def accept_internal(
    listener: InternalListener,
    sock: trio.socket.SocketType,
    processors: list[Processor],
    quotas: ConnectionQuotas,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Hand accepted connections to the listener's processors until cancelled; the
    socket file is removed on exit."""
    try:
        with sock:
            task_status.started()
            turn = 0
            while True:
                accepted, _ = await sock.accept()
                if not quotas.admit(listener.name, LOCAL_ADDRESS[0]):
                    log.warning("refused a connection on %s: connection limit", listener.name)
                    accepted.close()
                    continue
                connection = NewConnection(
                    socket=accepted,
                    listener_name=listener.name,
                    security_protocol="PLAINTEXT",
                    local_address=LOCAL_ADDRESS,
                    remote_address=LOCAL_ADDRESS,
                )
                processor = processors[turn % len(processors)]
                turn += 1
                if not processor.try_accept(connection):
                    try:
                        await processor.accept(connection)
                    except (trio.ClosedResourceError, trio.BrokenResourceError):
                        quotas.release(listener.name, LOCAL_ADDRESS[0])
                        accepted.close()
    finally:
        with contextlib.suppress(OSError):
            listener.path.unlink(missing_ok=True)
