"""The SQLite metadata store: transactions, versions, placement, two connections."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.cluster.metadata_store import SqliteMetadataStore
from broker.errors import KafkaError
from broker.protocol.error_codes import ErrorCode


def cluster_store(path: Path, nodes: list[int]) -> SqliteMetadataStore:
    store = SqliteMetadataStore(path)
    store.prepare_nodes(nodes)
    for node in nodes:
        store.register_broker(node, {"PLAINTEXT": ("127.0.0.1", 9000 + node)})
    return store


def test_a_created_topic_is_seen_by_another_connection_with_leaders_spread(
    tmp_path: Path,
) -> None:
    writer = cluster_store(tmp_path, [1, 2, 3])
    reader = SqliteMetadataStore(tmp_path)
    before = reader.version()
    topic_id = uuid.uuid4()
    version = writer.create_topic("orders", topic_id, 6, {"retention.ms": "1000"})
    assert version > before
    assert reader.version() == version
    image = reader.read_image()
    topic = image.topics["orders"]
    assert topic.topic_id == topic_id
    assert dict(topic.configs) == {"retention.ms": "1000"}
    assert sorted(topic.leaders) == [1, 1, 2, 2, 3, 3]
    assert [b.node_id for b in image.alive_brokers()] == [1, 2, 3]
    assert image.endpoint(2, "PLAINTEXT") == ("127.0.0.1", 9002)


def test_consecutive_topics_continue_the_leader_rotation(tmp_path: Path) -> None:
    store = cluster_store(tmp_path, [0, 1, 2])
    store.create_topic("a", uuid.uuid4(), 1, {})
    store.create_topic("b", uuid.uuid4(), 1, {})
    store.create_topic("c", uuid.uuid4(), 1, {})
    image = store.read_image()
    assert {image.topics[t].leaders[0] for t in "abc"} == {0, 1, 2}


def test_an_existing_or_colliding_topic_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    store = cluster_store(tmp_path, [1])
    store.create_topic("a.b", uuid.uuid4(), 1, {})
    version = store.version()
    with pytest.raises(KafkaError) as exists:
        store.create_topic("a.b", uuid.uuid4(), 2, {})
    assert exists.value.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError) as collides:
        store.create_topic("a_b", uuid.uuid4(), 2, {})
    assert collides.value.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert store.version() == version
    assert len(store.read_image().topics["a.b"].leaders) == 1


def test_partitions_grow_configs_change_and_topics_are_deleted(tmp_path: Path) -> None:
    store = cluster_store(tmp_path, [1, 2])
    store.create_topic("t", uuid.uuid4(), 2, {})
    store.add_partitions("t", 5)
    store.set_topic_configs("t", {"cleanup.policy": "compact"})
    topic = store.read_image().topics["t"]
    assert len(topic.leaders) == 5
    assert dict(topic.configs) == {"cleanup.policy": "compact"}
    with pytest.raises(KafkaError) as shrink:
        store.add_partitions("t", 3)
    assert shrink.value.error_code == ErrorCode.INVALID_PARTITIONS
    store.delete_topic("t")
    assert "t" not in store.read_image().topics
    with pytest.raises(KafkaError) as missing:
        store.delete_topic("t")
    assert missing.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fewer_processes_hand_the_removed_nodes_partitions_to_the_others(tmp_path: Path) -> None:
    store = cluster_store(tmp_path, [1, 2, 3, 4])
    store.create_topic("t", uuid.uuid4(), 8, {})
    store.prepare_nodes([1, 2])
    image = store.read_image()
    assert set(image.topics["t"].leaders) == {1, 2}
    assert sorted(image.brokers) == [1, 2]
    assert image.alive_brokers() == []  # down until each process registers again
    assert store.get("process.count") == "2"


def test_a_dead_process_is_not_listed_until_it_registers_again(tmp_path: Path) -> None:
    store = cluster_store(tmp_path, [1, 2])
    store.set_alive(2, False)
    assert [b.node_id for b in store.read_image().alive_brokers()] == [1]
    store.register_broker(2, {"PLAINTEXT": ("127.0.0.1", 9100)})
    image = store.read_image()
    assert image.is_alive(2)
    assert image.endpoint(2, "PLAINTEXT") == ("127.0.0.1", 9100)


def test_producer_id_blocks_never_overlap_across_connections_and_reopening(
    tmp_path: Path,
) -> None:
    first = SqliteMetadataStore(tmp_path)
    second = SqliteMetadataStore(tmp_path)
    starts = [first.allocate_producer_ids(1000), second.allocate_producer_ids(1000)]
    first.close()
    second.close()
    starts.append(SqliteMetadataStore(tmp_path).allocate_producer_ids(1000))
    assert sorted(starts) == [0, 1000, 2000]


def test_the_cluster_id_is_kept_once_stored(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path)
    assert store.cluster_id("first") == "first"
    assert SqliteMetadataStore(tmp_path).cluster_id("second") == "first"


def test_topics_are_spread_over_configured_processes_before_any_has_registered(
    tmp_path: Path,
) -> None:
    store = SqliteMetadataStore(tmp_path)
    store.prepare_nodes([5, 6, 7])
    store.create_topic("adopted", uuid.uuid4(), 3, {})
    assert sorted(store.read_image().topics["adopted"].leaders) == [5, 6, 7]
