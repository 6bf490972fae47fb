"""The ZooKeeper engine of the coordination seam, on the kazoo client.

kazoo blocks, so every call runs in a worker thread (`trio.to_thread`) and the
Trio loop never waits on the network. Its watch callbacks and session-state
listeners run on kazoo's own thread: they only hand the event to the Trio loop
(`TrioToken.run_sync_soon`), which puts it on the caller's memory channel.
Nothing of kazoo's leaves this module.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
import trio
from kazoo import exceptions as zk_errors
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KazooState, WatchedEvent
from kazoo.retry import KazooRetry

from broker.coordination.store import (
    BadVersionError,
    CheckOp,
    CoordinationError,
    CoordinationUnavailable,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    Op,
    SessionSink,
    SessionState,
    Versioned,
    WatchedChange,
    WatchEvent,
    WatchSink,
)

log = logging.getLogger(__name__)
# Reconnection attempts at most this far apart, for as long as it takes (Java's client
# waits up to a second between attempts). kazoo's default doubles the wait up to an
# hour: a ZooKeeper back after an outage of 10 s was reached 5-10 s later, past the
# session timeout, so every session expired that a prompt reconnect keeps.
RECONNECT_MAX_DELAY_S = 1.0
# kazoo logs every failed connection attempt; the store reports session states itself.
_kazoo_log = logging.getLogger("broker.coordination.kazoo")
_kazoo_log.setLevel(logging.ERROR)

T = TypeVar("T")

_CHANGES = {
    EventType.CREATED: WatchedChange.CREATED,
    EventType.DELETED: WatchedChange.DELETED,
    EventType.CHANGED: WatchedChange.DATA_CHANGED,
    EventType.CHILD: WatchedChange.CHILDREN_CHANGED,
}
_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}


@attrs.frozen
class ZooKeeperSettings:
    """`zookeeper.connect` and its timeouts, as Kafka names them."""

    connect: str
    session_timeout_ms: int = 18000
    connection_timeout_ms: int = 18000

    @property
    def hosts(self) -> str:
        return self.connect.split("/", 1)[0]

    @property
    def chroot(self) -> str:
        """The chroot path ("" for none), normalised as ZooKeeper paths are."""
        _, slash, path = self.connect.partition("/")
        if not slash or not path.strip("/"):
            return ""
        return posixpath.normpath("/" + path)


def get_or_create_blocking(settings: ZooKeeperSettings, path: str, data: bytes) -> bytes:
    """Before the broker (and its Trio tasks) exist: `path`'s data, created with `data`
    if missing (the broker's identity must be known when it is built). A short session
    of its own; CoordinationUnavailable as `connect` raises it."""
    client = KazooClient(
        hosts=settings.hosts, timeout=settings.session_timeout_ms / 1000, logger=_kazoo_log
    )
    try:
        client.start(settings.connection_timeout_ms / 1000)
    except KazooTimeoutError:
        raise CoordinationUnavailable(
            f"zookeeper.connect={settings.connect}: no ZooKeeper server answered"
            f" within zookeeper.connection.timeout.ms={settings.connection_timeout_ms}"
        ) from None
    try:
        if settings.chroot:
            client.ensure_path(settings.chroot)
            client.chroot = settings.chroot
        client.ensure_path(posixpath.dirname(path))
        with contextlib.suppress(zk_errors.NodeExistsError):
            client.create(path, data)
        found, _stat = client.get(path)
        return bytes(found)
    except zk_errors.KazooException as exc:
        raise _translate(exc) from exc
    finally:
        client.stop()
        client.close()


def reconnection_retry() -> KazooRetry:
    return KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=RECONNECT_MAX_DELAY_S)


def _translate(exc: BaseException) -> BaseException:
    if isinstance(exc, zk_errors.NodeExistsError):
        return NodeExistsError(str(exc) or "node exists")
    if isinstance(exc, zk_errors.NoNodeError):
        return NoNodeError(str(exc) or "no node")
    if isinstance(exc, zk_errors.BadVersionError):
        return BadVersionError(str(exc) or "bad version")
    if isinstance(exc, (zk_errors.ConnectionLoss, zk_errors.SessionExpiredError)):
        return CoordinationUnavailable(f"ZooKeeper: {type(exc).__name__}")
    if isinstance(exc, zk_errors.KazooException):
        return CoordinationError(f"ZooKeeper: {type(exc).__name__} {exc}")
    return exc


class KazooCoordinationStore:
    """One ZooKeeper session; the chroot of `zookeeper.connect` is created if missing."""

    def __init__(self, settings: ZooKeeperSettings) -> None:
        self._settings = settings
        self._watchers: weakref.WeakValueDictionary[int, Callable[[WatchedEvent], None]] = (
            weakref.WeakValueDictionary()
        )
        # Connected without the chroot first, so that it can be created (as Kafka does).
        self._client = KazooClient(
            hosts=settings.hosts,
            timeout=settings.session_timeout_ms / 1000,
            logger=_kazoo_log,
            connection_retry=reconnection_retry(),
        )
        self._token: trio.lowlevel.TrioToken | None = None
        self._session_sinks: list[SessionSink] = []
        self._client.add_listener(self._on_state)

    async def connect(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        timeout_s = self._settings.connection_timeout_ms / 1000
        try:
            await trio.to_thread.run_sync(self._client.start, timeout_s)
        except KazooTimeoutError:
            raise CoordinationUnavailable(
                f"zookeeper.connect={self._settings.connect}: no ZooKeeper server answered"
                f" within zookeeper.connection.timeout.ms={self._settings.connection_timeout_ms}"
            ) from None
        chroot = self._settings.chroot
        if chroot:
            await self._call(self._client.ensure_path, chroot)
            self._client.chroot = chroot
        log.info("connected to ZooKeeper at %s", self._settings.connect)

    async def close(self) -> None:
        def stop_and_close() -> None:
            self._client.stop()
            self._client.close()

        await trio.to_thread.run_sync(stop_and_close)

    def watch_session(self, sink: SessionSink) -> None:
        self._session_sinks.append(sink)

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False) -> None:
        await self._call(self._client.create, path, data, ephemeral=ephemeral)

    async def create_sequential(self, path_prefix: str, data: bytes = b"") -> str:
        path = await self._call(self._client.create, path_prefix, data, sequence=True)
        return str(path)

    async def ensure_path(self, path: str) -> None:
        await self._call(self._client.ensure_path, path)

    async def get(self, path: str, *, watch: WatchSink | None = None) -> Versioned | None:
        watcher = self._watcher(watch)

        def read() -> Versioned | None:
            # exists() leaves a watch on a missing node too, so its creation is seen.
            if self._client.exists(path, watch=watcher) is None:
                return None
            data, stat = self._client.get(path)
            return Versioned(bytes(data), int(stat.version), int(stat.czxid))

        try:
            return await self._call(read)
        except NoNodeError:  # deleted between exists() and get(): the watch fires
            return None

    async def set(self, path: str, data: bytes, *, version: int = -1) -> int:
        stat = await self._call(self._client.set, path, data, version=version)
        return int(stat.version)

    async def delete(self, path: str, *, version: int = -1) -> None:
        await self._call(self._client.delete, path, version=version)

    async def children(self, path: str, *, watch: WatchSink | None = None) -> list[str]:
        names = await self._call(self._client.get_children, path, watch=self._watcher(watch))
        return sorted(str(name) for name in names)

    async def commit(self, ops: Sequence[Op]) -> None:
        def run() -> list[Any]:
            transaction = self._client.transaction()
            for op in ops:
                if isinstance(op, CreateOp):
                    transaction.create(op.path, op.data, ephemeral=op.ephemeral)
                elif isinstance(op, CheckOp):
                    transaction.check(op.path, op.version)
                else:
                    transaction.set_data(op.path, op.data, version=op.version)
            return list(transaction.commit())

        results = await self._call(run)
        failures = [r for r in results if isinstance(r, Exception)]
        real = [r for r in failures if not isinstance(r, zk_errors.RolledBackError)]
        if real:
            raise _translate(real[0])
        if failures:
            raise CoordinationError("ZooKeeper rolled the transaction back")

    # -- the bridges between kazoo's thread and Trio --
    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        def call() -> T:
            return fn(*args, **kwargs)

        try:
            return await trio.to_thread.run_sync(call, abandon_on_cancel=True)
        except Exception as exc:
            translated = _translate(exc)
            if translated is exc:
                raise
            raise translated from None

    def _watcher(self, sink: WatchSink | None) -> Callable[[WatchedEvent], None] | None:
        """One callback per sink while a watch of it is pending: kazoo keeps a path's
        watchers in a set, so a znode read again before its watch fired (a topic's states
        re-read on an assignment change) holds one watch, not one more per read, and its
        change is delivered once. kazoo holds the callback and the callback holds the sink
        (some sinks have no other owner); the cache holds the callback weakly, so once no
        watch is pending both can go."""
        if sink is None:
            return None
        found = self._watchers.get(id(sink))
        if found is not None:
            return found

        def on_event(event: WatchedEvent) -> None:
            change = _CHANGES.get(event.type)
            if change is not None:
                self._to_trio(sink, WatchEvent(str(event.path), change))

        self._watchers[id(sink)] = on_event
        return on_event

    def _on_state(self, state: KazooState) -> None:
        session_state = _STATES[state]
        for sink in self._session_sinks:
            self._to_trio(sink, session_state)

    def _to_trio(self, sink: trio.MemorySendChannel[Any], item: object) -> None:
        def deliver() -> None:
            try:
                sink.send_nowait(item)
            except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
                log.warning("coordination event %r dropped: its receiver is gone or full", item)

        if self._token is None:
            return
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(deliver)
