"""The transaction coordinator's markers in a cluster of processes (Kafka's
TransactionMarkerChannelManager).

Each marker goes to the partition's leader: appended here when this process
leads it, sent as WriteTxnMarkers to the leading process otherwise. A group's
marker goes to the group's coordinator the same way, as the pseudo-partition
`__consumer_offsets`-<shard>. Like Kafka's channel manager, undelivered markers
are retried (with backoff) while their process is down or restarting; when
`delivery_timeout_s` passes first, the write fails and the transaction stays
prepared, to be finished by the coordinator's next retry
(`complete_pending`, on its abort timer) or by the client retrying EndTxn.
`route_markers` is the pure part: who gets what.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import NoReturn, Protocol

import attrs
import tenacity
import trio

from broker.coordinator.group_metadata_partition import CONSUMER_OFFSETS as GROUP_MARKER_TOPIC
from broker.errors import KafkaError, PeerUnavailable
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from broker.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse
from broker.topology import LocalMarkers
from broker.transaction.marker_writer import SKIPPED_MARKER_ERRORS
from broker.transaction.transaction_coordinator import COORDINATOR_EPOCH
from broker.transaction.transaction_metadata import TopicPartition

log = logging.getLogger(__name__)

MARKER_DELIVERY_TIMEOUT_S = 20.0
RETRY_BACKOFF_S = 0.1
MAX_RETRY_BACKOFF_S = 1.0


@attrs.frozen
class MarkerRoute:
    local_partitions: tuple[TopicPartition, ...]
    local_groups: tuple[str, ...]
    remote_partitions: dict[int, tuple[TopicPartition, ...]]
    remote_groups: dict[int, tuple[str, ...]]  # node -> groups of that node's shard


def route_markers(
    partitions: Iterable[TopicPartition],
    groups: Iterable[str],
    *,
    my_node: int,
    leader_of: Callable[[str, int], int | None],
    group_node: Callable[[str], int],
) -> MarkerRoute:
    """Split a transaction's markers by the process that must write them. A partition
    with no known leader (deleted) stays local, where it is skipped."""
    local: list[TopicPartition] = []
    remote: dict[int, list[TopicPartition]] = {}
    for tp in sorted(set(partitions)):
        leader = leader_of(*tp)
        if leader is None or leader == my_node:
            local.append(tp)
        else:
            remote.setdefault(leader, []).append(tp)
    local_groups: list[str] = []
    remote_groups: dict[int, list[str]] = {}
    for group in sorted(set(groups)):
        node = group_node(group)
        if node == my_node:
            local_groups.append(group)
        else:
            remote_groups.setdefault(node, []).append(group)
    return MarkerRoute(
        tuple(local),
        tuple(local_groups),
        {n: tuple(tps) for n, tps in remote.items()},
        {n: tuple(gs) for n, gs in remote_groups.items()},
    )


class MarkerSender(Protocol):
    async def send(self, node: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        """PeerUnavailable when the process cannot be reached."""
        ...


def marker_request(
    producer_id: int,
    epoch: int,
    commit: bool,
    partitions: Iterable[TopicPartition],
    group_shards: Iterable[int],
    coordinator_epoch: int = COORDINATOR_EPOCH,
) -> WriteTxnMarkersRequest:
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    shards = sorted(set(group_shards))
    if shards:
        topics[GROUP_MARKER_TOPIC] = shards
    return WriteTxnMarkersRequest(
        markers=(
            WritableTxnMarker(
                producer_id=producer_id,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=tuple(
                    WritableTxnMarkerTopic(name=t, partition_indexes=tuple(p))
                    for t, p in topics.items()
                ),
                coordinator_epoch=coordinator_epoch,
            ),
        )
    )


class RoutingMarkerWriter:
    def __init__(
        self,
        local: LocalMarkers,
        sender: MarkerSender,
        *,
        my_node: int,
        leader_of: Callable[[str, int], int | None],
        group_shard: Callable[[str], int],
        base_node: int = 0,
        group_node: Callable[[str], int] | None = None,
        delivery_timeout_s: float = MARKER_DELIVERY_TIMEOUT_S,
    ) -> None:
        """A group's marker goes to `group_node(group)` where given (the hosts: the
        leader of `__consumer_offsets`-0), else to `base_node` + its shard (the
        processes of one host)."""
        self._local = local
        self._sender = sender
        self._my_node = my_node
        self._leader_of = leader_of
        self._group_shard = group_shard
        self._base_node = base_node
        self._group_node_of = group_node
        self.delivery_timeout_s = delivery_timeout_s

    def _group_node(self, group: str) -> int:
        if self._group_node_of is not None:
            return self._group_node_of(group)
        return self._base_node + self._group_shard(group)

    async def write_markers(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        partitions: Iterable[TopicPartition],
        groups: Iterable[str],
        coordinator_epoch: int = COORDINATOR_EPOCH,
    ) -> None:
        remaining_partitions = set(partitions)
        remaining_groups = set(groups)
        deadline = trio.current_time() + self.delivery_timeout_s

        def past_deadline(state: tenacity.RetryCallState) -> bool:
            return trio.current_time() + state.upcoming_sleep > deadline

        def not_delivered(state: tenacity.RetryCallState) -> NoReturn:
            raise KafkaError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"markers for producer {producer_id} not delivered yet to "
                f"{sorted(remaining_partitions)} / groups {sorted(remaining_groups)}",
            )

        # Rounds until nothing is left, 0.1 s apart and doubling up to 1 s, while the
        # deadline allows the next wait; an error a round raises ends the write at once.
        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_result(bool),
            wait=tenacity.wait_exponential(multiplier=RETRY_BACKOFF_S, max=MAX_RETRY_BACKOFF_S),
            stop=past_deadline,
            retry_error_callback=not_delivered,
        )
        await retrying(
            self._deliver_round,
            producer_id,
            epoch,
            commit,
            remaining_partitions,
            remaining_groups,
            coordinator_epoch,
        )

    async def _deliver_round(
        self,
        producer_id: int,
        epoch: int,
        commit: bool,
        remaining_partitions: set[TopicPartition],
        remaining_groups: set[str],
        coordinator_epoch: int,
    ) -> bool:
        """Writes the local markers and sends the remote ones to their nodes, removing what
        was delivered from the remaining sets; True while something is left."""
        route = route_markers(
            remaining_partitions,
            remaining_groups,
            my_node=self._my_node,
            leader_of=self._leader_of,
            group_node=self._group_node,
        )
        for topic, index in route.local_partitions:
            await self._local.write_partition_marker(
                producer_id, epoch, commit, topic, index, coordinator_epoch
            )
            remaining_partitions.discard((topic, index))
        if route.local_groups:
            await self._local.write_group_marker(producer_id, epoch, commit)
            remaining_groups -= set(route.local_groups)
        nodes = set(route.remote_partitions) | set(route.remote_groups)
        try:
            async with trio.open_nursery() as nursery:
                for node in sorted(nodes):
                    nursery.start_soon(
                        self._send,
                        node,
                        producer_id,
                        epoch,
                        commit,
                        route.remote_partitions.get(node, ()),
                        route.remote_groups.get(node, ()),
                        remaining_partitions,
                        remaining_groups,
                        coordinator_epoch,
                    )
        except* KafkaError as refused:  # a node's answer fenced this coordinator
            raise refused.exceptions[0] from None
        return bool(remaining_partitions or remaining_groups)

    async def _send(
        self,
        node: int,
        producer_id: int,
        epoch: int,
        commit: bool,
        partitions: tuple[TopicPartition, ...],
        groups: tuple[str, ...],
        remaining_partitions: set[TopicPartition],
        remaining_groups: set[str],
        coordinator_epoch: int,
    ) -> None:
        """One WriteTxnMarkers; removes what it delivered from the remaining sets. A
        marker refused as a replaced coordinator's ends the write (KafkaError)."""
        shards = {self._group_shard(g): g for g in groups}
        request = marker_request(producer_id, epoch, commit, partitions, shards, coordinator_epoch)
        try:
            response = await self._sender.send(node, request)
        except PeerUnavailable as exc:
            log.info("markers for producer %d: node %d unavailable (%s)", producer_id, node, exc)
            return
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    delivered = p.error_code == ErrorCode.NONE or (
                        p.error_code in SKIPPED_MARKER_ERRORS and topic.name != GROUP_MARKER_TOPIC
                    )
                    if p.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
                        raise KafkaError(
                            ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                            f"{topic.name}-{p.partition_index} has markers of producer "
                            f"{producer_id} from a newer coordinator epoch than {coordinator_epoch}",
                        )
                    if not delivered:
                        log.info(
                            "marker for %s-%d on node %d: error %d; retrying",
                            topic.name,
                            p.partition_index,
                            node,
                            p.error_code,
                        )
                        continue
                    if topic.name == GROUP_MARKER_TOPIC:
                        remaining_groups.difference_update(
                            g for g in groups if self._group_shard(g) == p.partition_index
                        )
                    else:
                        remaining_partitions.discard((topic.name, p.partition_index))
