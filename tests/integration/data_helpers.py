"""Requests the data and admin API tests send, built on our own client and codec."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from broker.client.connection import KafkaConnection
from broker.protocol import records as rec
from broker.protocol.compression import CompressionType
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from broker.protocol.messages.create_topics_request import CreatableTopic, CreatableTopicConfig
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData

PRODUCE_VERSION = 9
FETCH_VERSION = 12


def batch(
    values: Sequence[bytes],
    *,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_timestamp: int | None = None,
) -> bytes:
    return rec.encode_batch(
        [
            rec.Record(offset_delta=i, timestamp_delta=i, key=b"k%d" % i, value=v)
            for i, v in enumerate(values)
        ],
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_timestamp=base_timestamp,
    )


def produce_request(
    topic: str,
    partitions: Mapping[int, bytes | None],
    acks: int = -1,
    *,
    transactional_id: str | None = None,
) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        transactional_id=transactional_id,
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=tuple(
                    PartitionProduceData(index=i, records=r) for i, r in partitions.items()
                ),
            ),
        ),
    )


async def produce(
    conn: KafkaConnection,
    topic: str,
    records: bytes | None,
    partition: int = 0,
    acks: int = -1,
    version: int = PRODUCE_VERSION,
    *,
    transactional_id: str | None = None,
) -> Any:
    """The one partition's response of a single-partition produce."""
    request = produce_request(topic, {partition: records}, acks, transactional_id=transactional_id)
    response = await conn.request(request, version)
    return response.responses[0].partition_responses[0]


def fetch_request(
    topic: str,
    offsets: Mapping[int, int],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 1 << 20,
    session_id: int = 0,
    session_epoch: int = -1,
) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=tuple(
                    FetchPartition(
                        partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes
                    )
                    for p, o in offsets.items()
                ),
            ),
        ),
    )


async def fetch(
    conn: KafkaConnection, topic: str, offset: int, partition: int = 0, **kwargs: Any
) -> Any:
    """The one partition's data of a single-partition fetch."""
    response = await conn.request(
        fetch_request(topic, {partition: offset}, **kwargs), FETCH_VERSION
    )
    assert response.error_code == ErrorCode.NONE
    return response.responses[0].partitions[0]


def values_of(records: bytes | memoryview | None) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a fetched record set."""
    out = []
    for header, view in rec.iter_batches(records or b"", allow_partial_tail=True):
        for record in rec.iter_records(bytes(view), header):
            out.append((record.offset, record.value))
    return out


async def fetch_all(
    conn: KafkaConnection, topic: str, partition: int = 0
) -> list[tuple[int, bytes | None]]:
    """Every record of a partition, from its log start, in as many fetches as needed."""
    offset = (await list_offset(conn, topic, -2, partition)).offset
    result: list[tuple[int, bytes | None]] = []
    while True:
        data = await fetch(conn, topic, offset, partition)
        assert data.error_code == ErrorCode.NONE, ErrorCode(data.error_code).name
        got = [r for r in values_of(data.records) if r[0] >= offset]
        if not got:
            return result
        result.extend(got)
        offset = got[-1][0] + 1


async def create_topic(
    conn: KafkaConnection,
    name: str,
    partitions: int = 1,
    configs: Mapping[str, str] | None = None,
    *,
    replication_factor: int = 1,
    validate_only: bool = False,
    version: int = 7,
) -> Any:
    response = await conn.request(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=tuple(
                        CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                    ),
                ),
            ),
            timeout_ms=5000,
            validate_only=validate_only,
        ),
        version,
    )
    return response.topics[0]


async def list_offset(
    conn: KafkaConnection, topic: str, timestamp: int, partition: int = 0, version: int = 7
) -> Any:
    response = await conn.request(
        ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=(
                ListOffsetsTopic(
                    name=topic,
                    partitions=(
                        ListOffsetsPartition(partition_index=partition, timestamp=timestamp),
                    ),
                ),
            ),
        ),
        version,
    )
    return response.topics[0].partitions[0]
