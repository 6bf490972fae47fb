"""The coordination-store seam: the operations a multi-host cluster needs.

Membership, controller election and replication state are written against
this protocol only, so another engine (etcd) can be added beside ZooKeeper
without touching them. Paths are ZooKeeper-like (`/brokers/ids/1`) because
Kafka's layout is documented that way; an engine without a tree maps them
onto keys. Every operation is async: an engine whose client blocks runs it in
a worker thread. Watches are one-shot, as in ZooKeeper and as etcd's can be
made: the event is sent to the Trio memory channel the caller passed, once.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol

import attrs
import trio


class CoordinationError(Exception):
    """A store operation failed for a reason its caller may handle."""


class NodeExistsError(CoordinationError):
    """`create` of a path that exists (another broker's id, a controller already elected)."""


class NoNodeError(CoordinationError):
    """The path (or, for `create`, its parent) does not exist."""


class BadVersionError(CoordinationError):
    """A conditional write found another version: someone else wrote first."""


class CoordinationUnavailable(ConnectionError):
    """The engine could not be reached (in time).

    A ConnectionError, so that the broker's start-up reports it in one line
    and exits non-zero like any other failure to open its resources.
    """


class WatchedChange(enum.Enum):
    CREATED = "created"
    DELETED = "deleted"
    DATA_CHANGED = "data_changed"
    CHILDREN_CHANGED = "children_changed"


@attrs.frozen
class WatchEvent:
    path: str
    change: WatchedChange


class SessionState(enum.Enum):
    """The store session as its users need to see it.

    CONNECTED: the session is usable (again). SUSPENDED: the connection is
    lost but the session may still live, so ephemeral nodes may still exist.
    LOST: the session ended; every ephemeral node it owned is gone and must
    be created again once CONNECTED (registration, controller election).
    """

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"


@attrs.frozen
class Versioned:
    """A node's data with the version a conditional write must name."""

    data: bytes
    version: int
    # The zxid of the transaction that created the node (ZooKeeper's czxid): a broker's
    # registration's is its broker epoch (KIP-380); -1 where not known.
    created_zxid: int = -1


@attrs.frozen
class CreateOp:
    path: str
    data: bytes
    ephemeral: bool = False


@attrs.frozen
class SetOp:
    path: str
    data: bytes
    version: int


@attrs.frozen
class CheckOp:
    """Only commit if the node is still at `version` (the controller-epoch fence:
    a deposed controller's writes fail as a whole)."""

    path: str
    version: int


Op = CreateOp | SetOp | CheckOp

WatchSink = trio.MemorySendChannel[WatchEvent]
SessionSink = trio.MemorySendChannel[SessionState]


class CoordinationStore(Protocol):
    """One client session with a coordination engine."""

    async def connect(self) -> None:
        """Open the session (creating the store's root if missing) or raise
        CoordinationUnavailable within the configured connection timeout."""

    async def close(self) -> None:
        """End the session: every ephemeral node it created disappears at once."""

    def watch_session(self, sink: SessionSink) -> None:
        """Send every later session state change to `sink`."""

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False) -> None:
        """Create one node; NodeExistsError if it exists, NoNodeError without its parent."""

    async def create_sequential(self, path_prefix: str, data: bytes = b"") -> str:
        """Create a persistent node named `path_prefix` plus a sequence number that grows
        across the parent's children (Kafka's `/isr_change_notification/isr_change_`);
        its full path."""

    async def ensure_path(self, path: str) -> None:
        """Create the persistent node and its parents where missing."""

    async def get(self, path: str, *, watch: WatchSink | None = None) -> Versioned | None:
        """The node's data and version, None when missing. A watch fires once on its
        creation, change or deletion."""

    async def set(self, path: str, data: bytes, *, version: int = -1) -> int:
        """Replace the data (only at `version` unless -1); the new version.
        BadVersionError if another write came first, NoNodeError if missing."""

    async def delete(self, path: str, *, version: int = -1) -> None:
        """Delete the node (only at `version` unless -1); NoNodeError if missing."""

    async def children(self, path: str, *, watch: WatchSink | None = None) -> list[str]:
        """The child names; a watch fires once when the set of children changes
        (or the node is deleted). NoNodeError if missing."""

    async def commit(self, ops: Sequence[Op]) -> None:
        """Apply every op or none: the error of the first op that failed is raised."""
