"""The pipeline's client for a cluster: each partition's requests go to its leader.

`KafkaClient` keeps one connection, which is enough against a single broker. A
cluster (`process.count` > 1, or any Kafka cluster) leads each partition on one
broker, which refuses the others with NOT_LEADER_OR_FOLLOWER. This client
looks the leaders up with one Metadata request when it first needs them,
opens one connection per leader on demand, and splits ListOffsets, Fetch,
Produce and DeleteRecords by leader. Against a single broker it sends
everything over the bootstrap connection, as `KafkaClient` does. A client
lives for one operation (the source and sink connect per call), so a leader
that moved is found again by the retry that follows a retriable error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar, cast

from broker.client.security_config import PLAINTEXT_CONFIG, SecurityConfig
from broker.pipeline.kafka_client import (
    FetchedPartition,
    KafkaClient,
    KafkaClientError,
    TopicPartition,
)
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import MetadataRequest
from broker.protocol.messages.metadata_request import MetadataRequestTopic

V = TypeVar("V")

REFUSED = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)
"""Errors a broker answers before touching the log: the request may go again."""
REFUSED_RETRY_S = 3.0


class RoutedKafkaClient(KafkaClient):
    _connect_args: tuple[str, float, SecurityConfig]
    _leaders: dict[TopicPartition, int]
    _nodes: dict[int, tuple[str, int]]
    _peers: dict[int, KafkaClient]

    @classmethod
    def connect(
        cls,
        bootstrap: str,
        client_id: str = "trio-kafka-pipeline",
        timeout_s: float = 30.0,
        security: SecurityConfig = PLAINTEXT_CONFIG,
    ) -> RoutedKafkaClient:
        client = cast(RoutedKafkaClient, super().connect(bootstrap, client_id, timeout_s, security))
        client._connect_args = (client_id, timeout_s, security)
        client._leaders = {}
        client._nodes = {}
        client._peers = {}
        return client

    def close(self) -> None:
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()
        super().close()

    # ------------------------------------------------------------ routing

    def _learn(self, topics: Iterable[str]) -> None:
        body = MetadataRequest(
            topics=tuple(MetadataRequestTopic(name=t) for t in sorted(set(topics))),
            allow_auto_topic_creation=False,
        )
        response = self._connection.request(body, self._version(MetadataRequest.API_KEY))
        self._nodes = {b.node_id: (b.host, b.port) for b in response.brokers}
        for topic in response.topics:
            for part in topic.partitions:
                if topic.name is not None:
                    self._leaders[(topic.name, part.partition_index)] = part.leader_id

    def _client_for(self, key: TopicPartition) -> KafkaClient:
        leader = self._leaders.get(key, -1)
        if len(self._nodes) <= 1 or leader not in self._nodes:
            return self  # a single broker, or no leader now: the broker answers the error
        peer = self._peers.get(leader)
        if peer is None:
            client_id, timeout_s, security = self._connect_args
            host, port = self._nodes[leader]
            peer = KafkaClient.connect(f"{host}:{port}", client_id, timeout_s, security)
            self._peers[leader] = peer
        return peer

    def _split(
        self, keys: Iterable[TopicPartition]
    ) -> list[tuple[KafkaClient, list[TopicPartition]]]:
        keys = list(keys)
        unknown = {topic for topic, partition in keys if (topic, partition) not in self._leaders}
        if unknown:
            self._learn(unknown)
        groups: dict[int, tuple[KafkaClient, list[TopicPartition]]] = {}
        for key in keys:
            client = self._client_for(key)
            groups.setdefault(id(client), (client, []))[1].append(key)
        return list(groups.values())

    def _each_leader(
        self,
        items: dict[TopicPartition, V],
        call: Callable[[KafkaClient, dict[TopicPartition, V]], dict[TopicPartition, int]],
        *,
        retry: bool = False,
    ) -> dict[TopicPartition, int]:
        """`call` once per leader. With `retry` (requests that may be repeated), a leader
        that does not know a partition yet (a topic just created or moved: metadata
        reaches the processes one after another) is asked again after the leaders are
        looked up again, as Kafka's clients do, within `REFUSED_RETRY_S`."""
        result: dict[TopicPartition, int] = {}
        pending = dict(items)
        deadline = time.monotonic() + REFUSED_RETRY_S
        while pending:
            refused: dict[TopicPartition, V] = {}
            for client, keys in self._split(pending):
                part = {k: pending[k] for k in keys}
                try:
                    result.update(call(client, part))
                except KafkaClientError as exc:
                    if (
                        not retry
                        or len(self._nodes) <= 1  # one broker: it knows, no need to ask again
                        or exc.error_code not in REFUSED
                        or time.monotonic() > deadline
                    ):
                        raise
                    refused.update(part)
                    self._forget(keys)
            pending = refused
            if pending:
                time.sleep(0.05)
        return result

    def _forget(self, keys: list[TopicPartition]) -> None:
        for key in keys:
            self._leaders.pop(key, None)

    # ------------------------------------------------------------ requests by partition

    def list_offsets(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self._each_leader(timestamps, KafkaClient.list_offsets, retry=True)

    def produce(
        self, batches: dict[TopicPartition, bytes], *, acks: int = -1, timeout_ms: int = 30000
    ) -> dict[TopicPartition, int]:
        return self._each_leader(
            batches,
            lambda client, part: KafkaClient.produce(
                client, part, acks=acks, timeout_ms=timeout_ms
            ),
        )

    def delete_records(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self._each_leader(offsets, KafkaClient.delete_records, retry=True)

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 8 << 20,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
    ) -> FetchedPartition:
        ((client, _),) = self._split([(topic, partition)])
        fetched = KafkaClient.fetch(
            client,
            topic,
            partition,
            offset,
            max_bytes=max_bytes,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
        )
        if fetched.error_code in REFUSED:
            self._forget([(topic, partition)])  # the caller's retry looks the leader up again
        return fetched
