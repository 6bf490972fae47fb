"""The log end offsets a host's supervisor cannot read from its own processes.

On a host among hosts a group's coordinator may be one of this host's processes while
the partitions it commits offsets for are led on other hosts: their `LogEndOffset`
gauges are in those hosts' /metrics, not in this supervisor's. So that its consumer lag
covers every partition of the groups its processes coordinate, the supervisor asks the
cluster through the Kafka API, as `kafka-consumer-groups.sh` does: ListOffsets (latest,
read_uncommitted: the high watermark) sent by our routing client to each partition's
leader, found with Metadata from one of its own processes.

Bounded and cached, because a scrape must stay cheap and answer even when the cluster
does not: at most MAX_PARTITIONS partitions, ASK_TIMEOUT_S for the whole question, and
the answer (or its failure) kept for CACHE_S, so scrapes more frequent than that, and
concurrent ones, ask once. What is not answered has no lag series this time.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from itertools import groupby
from typing import Any, Protocol

import trio

from broker.client.routing_session import RoutingSession
from broker.client.session import ClientSession
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)

log = logging.getLogger(__name__)

CACHE_S = 5.0
ASK_TIMEOUT_S = 3.0
MAX_PARTITIONS = 10_000
LATEST = -1
LIST_OFFSETS = 2

Key = tuple[str, int]


class OffsetsSession(Protocol):
    """What is asked of a session (our routing client's)."""

    def version_for(self, api_key: int, minimum: int = 0, maximum: int | None = None) -> int: ...

    async def request(self, body: Any, version: int, timeout_s: float = 30.0) -> Any: ...

    async def aclose(self) -> None: ...


Opener = Callable[[str, float], Awaitable[OffsetsSession]]


async def open_routing_session(address: str, timeout_s: float) -> OffsetsSession:
    session: ClientSession = await RoutingSession.open(address, timeout_s)
    return session


def latest_offsets_request(keys: Iterable[Key]) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        topics=tuple(
            ListOffsetsTopic(
                name=topic,
                partitions=tuple(
                    ListOffsetsPartition(partition_index=p, timestamp=LATEST) for _, p in group
                ),
            )
            for topic, group in groupby(sorted(keys), key=lambda key: key[0])
        ),
    )


class ClusterLogEnds:
    """Log end offsets asked of the cluster (see the module docstring)."""

    def __init__(self, bootstrap: Callable[[], str | None], opener: Opener) -> None:
        self._bootstrap = bootstrap
        self._open = opener
        self._lock = trio.Lock()
        self._asked: frozenset[Key] = frozenset()
        self._asked_at: float | None = None
        self._ends: dict[Key, int] = {}
        self._failing = False

    async def ends(self, wanted: Collection[Key]) -> dict[Key, int]:
        """The offsets of `wanted` the cluster gave in the last CACHE_S (asked now if
        not asked then); partitions it did not answer for are left out."""
        keys = frozenset(sorted(wanted)[:MAX_PARTITIONS])
        if not keys:
            return {}
        async with self._lock:
            now = trio.current_time()
            stale = self._asked_at is None or now - self._asked_at >= CACHE_S
            if stale or not keys <= self._asked:
                self._ends = await self._ask(keys)
                self._asked, self._asked_at = keys, trio.current_time()
        return {key: end for key, end in self._ends.items() if key in keys}

    async def _ask(self, keys: frozenset[Key]) -> dict[Key, int]:
        address = self._bootstrap()
        if address is None:
            return {}
        ends: dict[Key, int] = {}
        with trio.move_on_after(ASK_TIMEOUT_S) as scope:
            try:
                session = await self._open(address, ASK_TIMEOUT_S)
                try:
                    version = session.version_for(LIST_OFFSETS, minimum=1)
                    body = latest_offsets_request(keys)
                    response = await session.request(body, version, ASK_TIMEOUT_S)
                finally:
                    with trio.CancelScope(shield=True):
                        await session.aclose()
            # A scrape answers whatever the cluster does: connection failures, errors in
            # the answers of several leaders at once (an exception group) alike.
            except Exception as exc:
                self._note_failure(f"{type(exc).__name__}: {exc}")
                return {}
            for topic in response.topics:
                for partition in topic.partitions:
                    if partition.error_code == ErrorCode.NONE and partition.offset >= 0:
                        ends[(topic.name, partition.partition_index)] = partition.offset
        if scope.cancelled_caught:
            self._note_failure(f"no answer within {ASK_TIMEOUT_S:g} s")
            return {}
        if self._failing:
            log.info("consumer lag: the cluster answers ListOffsets again")
            self._failing = False
        return ends

    def _note_failure(self, why: str) -> None:
        """Logged once per outage, not per scrape."""
        if not self._failing:
            log.warning(
                "consumer lag: log end offsets of partitions led on other hosts not read"
                " (%s); their lag is left out until the cluster answers",
                why,
            )
        self._failing = True
