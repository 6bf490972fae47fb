"""A client session for a cluster: partition data to each leader, groups to their coordinator.

`ClientSession` talks to its bootstrap broker, which is every partition's leader
and every group's coordinator on a single broker. Against a cluster (a broker
with `process.count` > 1, or any Kafka cluster) the commands would get
NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR from it. This session keeps the same
interface and routes underneath: Produce, Fetch and ListOffsets are split by
partition leader (learnt with one Metadata request per topic) and sent to the
leaders concurrently, their answers merged into one response; the group APIs go
to the group's coordinator (FindCoordinator once per group, and again when an answer
says the coordinator moved or is not ready, as Kafka's clients do): DescribeGroups is
split by coordinator like the partition APIs, and ListGroups asks every broker and
merges the answers, as Kafka's admin client does. When Metadata lists one broker,
everything goes over the bootstrap connection as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import attrs
import tenacity
import trio

from broker.client.security_config import PLAINTEXT_CONFIG, SecurityConfig
from broker.client.session import ClientSession, check_error
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import FindCoordinatorRequest, MetadataRequest
from broker.protocol.messages.metadata_request import MetadataRequestTopic

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
FIND_COORDINATOR = 10
DESCRIBE_GROUPS, LIST_GROUPS = 15, 16
# OffsetCommit, OffsetFetch, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, OffsetDelete,
# ConsumerGroupHeartbeat, ConsumerGroupDescribe
GROUP_APIS = frozenset({8, 9, 11, 12, 13, 14, 47, 68, 69})
# Answers meaning "ask the group's coordinator again": it moved (NOT_COORDINATOR), or it
# is not serving yet (its shard is loading or its process is restarting).
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
# Bounded, as a command must end: about 2 s of lookups before the last answer is shown.
COORDINATOR_ATTEMPTS = 6
COORDINATOR_RETRY_S = 0.4

PeerOpener = Callable[[str, float, SecurityConfig], Awaitable[ClientSession]]
"""Opens a session to another broker: (``host:port``, timeout in seconds, security)."""


async def open_peer(address: str, timeout_s: float, security: SecurityConfig) -> ClientSession:
    return await ClientSession.open(address, timeout_s, security=security)


class RoutingSession(ClientSession):
    def __init__(
        self,
        connection: Any,
        broker_versions: dict[int, tuple[int, int]],
        security: SecurityConfig = PLAINTEXT_CONFIG,
        peer_opener: PeerOpener = open_peer,
    ) -> None:
        super().__init__(connection, broker_versions, security)
        self._open_peer = peer_opener
        self._bootstrap: tuple[str, int] | None = None
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._names: dict[Any, str] = {}
        self._peers: dict[tuple[str, int], ClientSession] = {}
        self._coordinators: dict[str, tuple[str, int]] = {}
        self._timeout_s = 10.0

    @classmethod
    async def open(
        cls,
        bootstrap: str,
        timeout_s: float = 10.0,
        *,
        negotiate: bool = True,
        security: SecurityConfig = PLAINTEXT_CONFIG,
    ) -> RoutingSession:
        session = await super().open(bootstrap, timeout_s, negotiate=negotiate, security=security)
        assert isinstance(session, RoutingSession)
        session._timeout_s = timeout_s
        return session

    async def aclose(self) -> None:
        for peer in self._peers.values():
            await peer.aclose()
        self._peers.clear()
        await super().aclose()

    # ------------------------------------------------------------ where things are

    async def _learn(self, topics: set[str] | None) -> None:
        """Brokers and the leaders of `topics` (None: of every topic)."""
        if not self.supports(METADATA):
            return
        body = MetadataRequest(
            topics=None if topics is None else tuple(MetadataRequestTopic(name=t) for t in topics),
            allow_auto_topic_creation=False,
        )
        response = await ClientSession.request(self, body, self.version_for(METADATA, 1))
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for topic in response.topics:
            if topic.name is None:
                continue
            self._names[getattr(topic, "topic_id", None)] = topic.name
            for p in topic.partitions:
                self._leaders[(topic.name, p.partition_index)] = p.leader_id

    async def brokers(self) -> dict[int, tuple[str, int]]:
        """Every broker Metadata lists now, by node id."""
        await self._learn(set())
        return dict(self._brokers)

    async def session_at(self, address: tuple[str, int] | None) -> ClientSession:
        """The session to `address`, opened on first use; this one on a single broker."""
        if address is None or len(self._brokers) <= 1:
            return self
        peer = self._peers.get(address)
        if peer is None:
            peer = await self._open_peer(
                f"{address[0]}:{address[1]}", self._timeout_s, self.security
            )
            self._peers[address] = peer
        return peer

    async def leader_session(self, topic: str, partition: int) -> ClientSession:
        """The session to the partition's leader, learning it when unknown."""
        if (topic, partition) not in self._leaders:
            await self._learn({topic})
        leader = self._leaders.get((topic, partition), -1)
        return await self.session_at(self._brokers.get(leader))

    # ------------------------------------------------------------ requests

    async def request(self, body: Any, version: int, timeout_s: float = 30.0) -> Any:
        key = int(body.API_KEY)
        if key == PRODUCE:
            return await self._split(
                body, version, timeout_s, "topic_data", "partition_data", "index", "responses"
            )
        if key == FETCH:
            return await self._split(
                body, version, timeout_s, "topics", "partitions", "partition", "responses"
            )
        if key == LIST_OFFSETS:
            return await self._split(
                body, version, timeout_s, "topics", "partitions", "partition_index", "topics"
            )
        if key == DESCRIBE_GROUPS:
            return await self._describe_groups(body, version, timeout_s)
        if key == LIST_GROUPS:
            return await self._list_groups(body, version, timeout_s)
        if key in GROUP_APIS:
            group = _group_of(body)
            if group is not None:
                return await self._asking_coordinators_again(
                    [group], self._at_coordinator, group, body, version, timeout_s
                )
        return await ClientSession.request(self, body, version, timeout_s)

    async def send_without_response(self, body: Any, version: int) -> None:
        if int(body.API_KEY) != PRODUCE:
            await ClientSession.send_without_response(self, body, version)
            return
        for session, part in await self._parts(body, "topic_data", "partition_data", "index"):
            await ClientSession.send_without_response(session, part, version)

    async def _parts(
        self, body: Any, topics_field: str, partitions_field: str, index_field: str
    ) -> list[tuple[ClientSession, Any]]:
        """The request cut into one request per leader (topic order kept)."""
        by_session: dict[int, tuple[ClientSession, list[Any]]] = {}
        for topic in getattr(body, topics_field):
            name = _topic_name(topic)
            if not name:  # Fetch by topic id
                topic_id = getattr(topic, "topic_id", None)
                if topic_id not in self._names:
                    await self._learn(None)
                name = self._names.get(topic_id, "")
            per_session: dict[int, tuple[ClientSession, list[Any]]] = {}
            for partition in getattr(topic, partitions_field):
                session = await self.leader_session(name, getattr(partition, index_field))
                per_session.setdefault(id(session), (session, []))[1].append(partition)
            for ident, (session, partitions) in per_session.items():
                entry = by_session.setdefault(ident, (session, []))
                entry[1].append(topic._replace(**{partitions_field: tuple(partitions)}))
        return [
            (session, body._replace(**{topics_field: tuple(topics)}))
            for session, topics in by_session.values()
        ]

    async def _split(
        self,
        body: Any,
        version: int,
        timeout_s: float,
        topics_field: str,
        partitions_field: str,
        index_field: str,
        response_field: str,
    ) -> Any:
        parts = await self._parts(body, topics_field, partitions_field, index_field)
        if len(parts) == 1 and parts[0][0] is self:
            return await ClientSession.request(self, body, version, timeout_s)
        responses = await self._gather(parts, version, timeout_s)
        merged = [item for r in responses for item in getattr(r, response_field)]
        first = responses[0]
        errors = [r.error_code for r in responses if getattr(r, "error_code", 0)]
        changes: dict[str, Any] = {response_field: tuple(merged)}
        if errors:
            changes["error_code"] = errors[0]
        return first._replace(**changes)

    async def _at_coordinator(self, group: str, body: Any, version: int, timeout_s: float) -> Any:
        session = await self.session_at(await self._coordinator(group))
        return await ClientSession.request(session, body, version, timeout_s)

    async def _asking_coordinators_again(
        self, groups: Iterable[str], send: Callable[..., Awaitable[Any]], *args: Any
    ) -> Any:
        """`send(*args)`'s answer (`send` an async function: tenacity awaits only those).
        While the answer names a coordinator error, the groups' coordinators are forgotten
        (looked up again on the next send) and it is sent again, a bounded number of
        times; then the last answer is returned for the caller to report."""

        def forget(_: tenacity.RetryCallState) -> None:
            for group in groups:
                self._coordinators.pop(group, None)

        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_result(names_coordinator_error),
            stop=tenacity.stop_after_attempt(COORDINATOR_ATTEMPTS),
            wait=tenacity.wait_fixed(COORDINATOR_RETRY_S),
            before_sleep=forget,
            retry_error_callback=_last_answer,
        )
        return await retrying(send, *args)

    async def _describe_groups(self, body: Any, version: int, timeout_s: float) -> Any:
        return await self._asking_coordinators_again(
            body.groups, self._describe_groups_once, body, version, timeout_s
        )

    async def _describe_groups_once(self, body: Any, version: int, timeout_s: float) -> Any:
        """Each group asked of its coordinator; the answers in the order asked."""
        by_address: dict[tuple[str, int] | None, list[str]] = {}
        for group in body.groups:
            by_address.setdefault(await self._coordinator(group), []).append(group)
        if len(by_address) <= 1:
            session = await self.session_at(next(iter(by_address), None))
            return await ClientSession.request(session, body, version, timeout_s)
        parts = [
            (await self.session_at(address), body._replace(groups=tuple(groups)))
            for address, groups in by_address.items()
        ]
        responses = await self._gather(parts, version, timeout_s)
        described = {g.group_id: g for r in responses for g in r.groups}
        return responses[0]._replace(groups=tuple(described[g] for g in body.groups))

    async def _list_groups(self, body: Any, version: int, timeout_s: float) -> Any:
        """Every broker's groups: each coordinator lists only its own."""
        if not self._brokers:
            await self._learn(set())
        sessions = {id(s): s for s in [await self.session_at(a) for a in self._brokers.values()]}
        if len(sessions) <= 1:
            return await ClientSession.request(self, body, version, timeout_s)
        responses = await self._gather(
            [(session, body) for session in sessions.values()], version, timeout_s
        )
        errors = [r.error_code for r in responses if r.error_code]
        return responses[0]._replace(
            groups=tuple(g for r in responses for g in r.groups),
            error_code=errors[0] if errors else 0,
        )

    async def _gather(
        self, parts: list[tuple[ClientSession, Any]], version: int, timeout_s: float
    ) -> list[Any]:
        """The requests sent concurrently, one per session; their answers in order."""
        responses: list[Any] = [None] * len(parts)

        async def one(index: int, session: ClientSession, part: Any) -> None:
            responses[index] = await ClientSession.request(session, part, version, timeout_s)

        async with trio.open_nursery() as nursery:
            for index, (session, part) in enumerate(parts):
                nursery.start_soon(one, index, session, part)
        return responses

    async def _coordinator(self, group: str) -> tuple[str, int] | None:
        if group in self._coordinators:
            return self._coordinators[group]
        if not self._brokers:
            await self._learn(set())
        if len(self._brokers) <= 1 or not self.supports(FIND_COORDINATOR):
            return None
        found = await find_coordinator(self, group)
        address = (found.host, found.port)
        self._coordinators[group] = address
        return address


@attrs.frozen
class Coordinator:
    node_id: int
    host: str
    port: int


async def find_coordinator(session: ClientSession, group: str) -> Coordinator:
    """The group's coordinator, as any broker names it (FindCoordinator)."""
    version = session.version_for(FIND_COORDINATOR)
    if version >= 4:
        body = FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))
        response = await ClientSession.request(session, body, version)
        (found,) = response.coordinators
    else:
        found = await ClientSession.request(session, FindCoordinatorRequest(key=group), version)
    check_error(found.error_code, f"FindCoordinator for group {group!r}")
    return Coordinator(found.node_id, found.host, found.port)


def names_coordinator_error(response: Any) -> bool:
    """Whether a group API's answer says to find the coordinator again: in its own
    error code, a group's (DescribeGroups, OffsetFetch v8+, ConsumerGroupDescribe) or a
    partition's (OffsetCommit, which has no other)."""
    codes = [getattr(response, "error_code", ErrorCode.NONE)]
    for group in getattr(response, "groups", None) or ():
        codes.append(getattr(group, "error_code", ErrorCode.NONE))
    for topic in getattr(response, "topics", None) or ():
        for partition in getattr(topic, "partitions", None) or ():
            codes.append(getattr(partition, "error_code", ErrorCode.NONE))
    return any(code in COORDINATOR_ERRORS for code in codes)


def _last_answer(state: tenacity.RetryCallState) -> Any:
    assert state.outcome is not None
    return state.outcome.result()


def _topic_name(topic: Any) -> str:
    for field in ("name", "topic"):
        value = getattr(topic, field, None)
        if isinstance(value, str) and value:
            return value
    return ""


def _group_of(body: Any) -> str | None:
    group = getattr(body, "group_id", None)
    if isinstance(group, str) and group:
        return group
    groups = getattr(body, "groups", None)
    if groups and len(groups) == 1:
        return str(groups[0].group_id)
    group_ids = getattr(body, "group_ids", None)
    if group_ids and len(group_ids) == 1:
        return str(group_ids[0])
    return None
