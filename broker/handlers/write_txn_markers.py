"""WriteTxnMarkers (key 27), v0-1: a transaction coordinator's COMMIT/ABORT markers
for the partitions this broker leads.

Kafka's brokers send it to each other; here the processes of a cluster send it
over their private channel (broker/cluster/peer_channel.py), whose requests
carry the cluster's own principal, which may CLUSTER_ACTION. Over a client
listener the request needs CLUSTER_ACTION on the cluster, as in Kafka: the
authorization middleware checks it (`cluster_action_from`), not the handler.

A group's marker names the pseudo-partition `__consumer_offsets`-<shard> (Kafka
writes it into that `__consumer_offsets` partition): the group coordinator of
that shard commits or drops the offsets it holds for the producer.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.errors import KafkaError
from broker.net.request import Request
from broker.protocol.api import ApiKey
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WriteTxnMarkersRequest,
)
from broker.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from broker.transaction.marker_writer import LocalMarkerWriter

GROUP_MARKER_TOPIC = "__consumer_offsets"


class WriteTxnMarkersHandler:
    api_key = ApiKey.WRITE_TXN_MARKERS
    waits_on_replication = True  # answered once the ISR has its records
    min_version = 0
    max_version = 1
    cluster_action_from = 0  # every version needs CLUSTER_ACTION (middleware/authorization)

    def __init__(self, markers: LocalMarkerWriter, owns_group_shard: Callable[[int], bool]) -> None:
        self._markers = markers
        self._owns_group_shard = owns_group_shard

    async def handle(self, request: Request[WriteTxnMarkersRequest]) -> WriteTxnMarkersResponse:
        body = request.body
        return WriteTxnMarkersResponse(
            markers=tuple([await self._write(marker) for marker in body.markers])
        )

    async def _write(self, marker: WritableTxnMarker) -> WritableTxnMarkerResult:
        topics = []
        for topic in marker.topics:
            results = []
            for index in topic.partition_indexes:
                error = await self._write_one(marker, topic.name, index)
                results.append(
                    WritableTxnMarkerPartitionResult(partition_index=index, error_code=error)
                )
            topics.append(WritableTxnMarkerTopicResult(name=topic.name, partitions=tuple(results)))
        return WritableTxnMarkerResult(producer_id=marker.producer_id, topics=tuple(topics))

    async def _write_one(self, marker: WritableTxnMarker, topic: str, index: int) -> int:
        try:
            if topic == GROUP_MARKER_TOPIC:
                if not self._owns_group_shard(index):
                    return ErrorCode.NOT_COORDINATOR
                await self._markers.write_group_marker(
                    marker.producer_id, marker.producer_epoch, marker.transaction_result
                )
            else:
                await self._markers.write_partition_marker(
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.transaction_result,
                    topic,
                    index,
                    marker.coordinator_epoch,
                )
        except KafkaError as exc:
            return exc.error_code
        return ErrorCode.NONE

    def error_response(self, request: Request, error_code: int) -> WriteTxnMarkersResponse:
        body: WriteTxnMarkersRequest = request.body
        return WriteTxnMarkersResponse(
            markers=tuple(
                WritableTxnMarkerResult(
                    producer_id=m.producer_id,
                    topics=tuple(
                        WritableTxnMarkerTopicResult(
                            name=t.name,
                            partitions=tuple(
                                WritableTxnMarkerPartitionResult(
                                    partition_index=p, error_code=error_code
                                )
                                for p in t.partition_indexes
                            ),
                        )
                        for t in m.topics
                    ),
                )
                for m in body.markers
            )
        )
