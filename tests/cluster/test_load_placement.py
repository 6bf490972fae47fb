"""A three-process cluster places a new topic's leaders away from the process under load."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer

from broker.cluster.metadata_store import SqliteMetadataStore
from broker.cluster.placement_by_load import LOAD_MARGIN_FLOOR
from tests.cluster.test_supervisor import wait_until
from tests.integration.broker_harness import start_broker_process, stop_broker_process
from tests.interop.kafka_clients import admin, create_topic, rdkafka_settings

CLUSTER = {
    "process.count": "3",
    "num.network.threads": "1",
    "num.io.threads": "2",
    "auto.create.topics.enable": "false",
    "cluster.load.report.interval.ms": "200",
    "cluster.load.window.ms": "10000",
}


def leaders(bootstrap: str, topic: str) -> list[int]:
    metadata = admin(bootstrap).list_topics(topic, timeout=10)
    partitions = metadata.topics[topic].partitions
    return [partitions[p].leader for p in sorted(partitions)]


def test_a_new_topics_leaders_avoid_the_process_that_producers_keep_busy(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    cluster = start_broker_process(data, CLUSTER)
    store = SqliteMetadataStore(data)
    try:
        # One partition on each process: by count alone, the next one goes to the first.
        create_topic(cluster.bootstrap, "hot", 1)
        create_topic(cluster.bootstrap, "quiet", 2)
        (hot,) = leaders(cluster.bootstrap, "hot")
        assert sorted([hot, *leaders(cluster.bootstrap, "quiet")]) == sorted(cluster.node_ports())
        producer = Producer(rdkafka_settings(cluster.bootstrap, linger_ms=5))
        for _ in range(400):  # 4 MB within the window
            producer.produce("hot", b"x" * 10_000, partition=0)
            producer.poll(0)
        assert producer.flush(20) == 0

        def reported() -> bool:
            loads = store.load_reports()
            return loads.get(hot, 0.0) > 2 * LOAD_MARGIN_FLOOR and len(loads) == 3

        wait_until(reported, 10)
        create_topic(cluster.bootstrap, "next", 2)
        placed = leaders(cluster.bootstrap, "next")
        assert hot not in placed
        assert len(set(placed)) == 2
    finally:
        store.close()
        assert stop_broker_process(cluster) == 0
