"""The pipeline's client routes each partition to its leader in a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.pipeline.kafka_client import KafkaClient, KafkaClientError
from broker.pipeline.routed_client import RoutedKafkaClient
from broker.protocol.error_codes import ErrorCode
from broker.protocol.records import Record, encode_batch, iter_batches, iter_records
from tests.integration.broker_harness import start_broker_process, stop_broker_process


def test_reads_and_writes_reach_every_partitions_leader(tmp_path: Path) -> None:
    cluster = start_broker_process(tmp_path / "data", {"process.count": "3"})
    try:
        with RoutedKafkaClient.connect(cluster.bootstrap) as client:
            assert client.create_topic("routed", 6)
            batches = {
                ("routed", p): encode_batch(
                    [Record(i, 0, b"k", b"p%d-%d" % (p, i)) for i in range(p + 1)]
                )
                for p in range(6)
            }
            assert client.produce(batches) == dict.fromkeys(batches, 0)
            ends = client.list_offsets(dict.fromkeys(batches, -1))
            assert ends == {("routed", p): p + 1 for p in range(6)}
            for p in range(6):
                fetched = client.fetch("routed", p, 0, max_wait_ms=0)
                assert fetched.error_code == ErrorCode.NONE
                values = [
                    r.value
                    for header, batch in iter_batches(fetched.records)
                    for r in iter_records(batch, header)
                ]
                assert values == [b"p%d-%d" % (p, i) for i in range(p + 1)]
            assert client.delete_records({("routed", 5): 3}) == {("routed", 5): 3}
        # One connection alone reaches only the partitions its broker leads.
        with KafkaClient.connect(cluster.bootstrap) as single:
            with pytest.raises(KafkaClientError) as refused:
                single.list_offsets({("routed", p): -1 for p in range(6)})
            assert refused.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        assert stop_broker_process(cluster) == 0


def test_a_partition_its_leader_does_not_know_yet_is_asked_again_after_a_lookup(
    tmp_path: Path,
) -> None:
    cluster = start_broker_process(tmp_path / "data", {"process.count": "2"})
    try:
        client = RoutedKafkaClient.connect(cluster.bootstrap)
        with client:
            assert client.create_topic("moving", 2)
            client.list_offsets({("moving", p): -1 for p in range(2)})
            # Stale leaders, as after a topic moved: every partition "led" by the other node.
            client._leaders = {k: 3 - v for k, v in client._leaders.items()}
            assert client.list_offsets({("moving", p): -1 for p in range(2)}) == {
                ("moving", 0): 0,
                ("moving", 1): 0,
            }
            with pytest.raises(KafkaClientError) as unknown:
                client.list_offsets({("missing", 0): -1})  # bounded: gives up after a while
            assert unknown.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        assert stop_broker_process(cluster) == 0
