"""Brokers among hosts authenticated to each other, with an authorizer: three `broker
serve` hosts on 127.0.0.2-4 whose only listener is SASL_PLAINTEXT with SCRAM-SHA-256,
`super.users=User:admin`, the brokers logging in as admin
(`sasl.mechanism.inter.broker.protocol` and the listener's JAAS config) with two replica
fetchers per leader. Alice, an ordinary user with ACLs on her topic, transactional id
and group, writes a transaction over three partitions led by different hosts (markers
and KIP-890 verification between hosts) with `min.insync.replicas=3`, so every commit
needs every follower's fetch; her own replica Fetch and WriteTxnMarkers are refused as
Kafka refuses them. A host's controlled shutdown asks the controller over the same
login.

The SCRAM credentials are written into ZooKeeper before the hosts start, as
`kafka-configs.sh --zookeeper` writes them before Kafka's brokers start; Alice's ACLs
are created through one host and reach the others through ZooKeeper."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.security_config import SASL_PLAINTEXT
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    CreateAclsRequest,
    DescribeAclsRequest,
    DescribeLogDirsRequest,
    FetchRequest,
    MetadataRequest,
    WriteTxnMarkersRequest,
)
from broker.protocol.messages.create_acls_request import AclCreation
from broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from broker.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)
from broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.hosts.host_processes import Host, Hosts, wait_until
from tests.hosts.sasl_hosts import MECHANISM, ask_as, sasl_hosts

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
TOPIC = "sasl-hosts"
PARTITIONS = 3
TRANSACTIONAL_ID = "alice-txn"
GROUP = "alice-group"
DEADLINE_S = 60.0
SETTINGS = {
    "num.replica.fetchers": "2",
    "zookeeper.session.timeout.ms": "6000",
    "transaction.state.log.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "controlled.shutdown.retry.backoff.ms": "1000",
    "replica.lag.time.max.ms": "3000",
}


@pytest.fixture
def hosts(tmp_path: Path, zookeeper_connect: str) -> Iterator[Hosts]:
    with sasl_hosts(tmp_path, zookeeper_connect, USERS, SETTINGS) as hosts:
        yield hosts


def client_settings(hosts: Hosts, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": hosts.bootstrap,
        "security.protocol": SASL_PLAINTEXT,
        "sasl.mechanism": MECHANISM,
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def ask(host: Host, request: Any, version: int = -1, user: str = "admin") -> Any:
    return ask_as(host, request, user, USERS[user], version)


def metadata() -> MetadataRequest:
    return MetadataRequest(topics=None)


def grant_alice(host: Host) -> None:
    creations = tuple(
        AclCreation(
            resource_type=kind,
            resource_name=name,
            resource_pattern_type=PatternType.LITERAL,
            principal="User:alice",
            host="*",
            operation=AclOperation.ALL,
            permission_type=AclPermissionType.ALLOW,
        )
        for kind, name in (
            (ResourceType.TOPIC, TOPIC),
            (ResourceType.TRANSACTIONAL_ID, TRANSACTIONAL_ID),
            (ResourceType.GROUP, GROUP),
        )
    )
    response = ask(host, CreateAclsRequest(creations=creations), 2)
    assert [r.error_code for r in response.results] == [ErrorCode.NONE] * 3


def alice_acls(host: Host) -> Any:
    return ask(
        host,
        DescribeAclsRequest(
            resource_type_filter=ResourceType.ANY,
            resource_name_filter=None,
            pattern_type_filter=PatternType.ANY,
            principal_filter="User:alice",
            host_filter=None,
            operation=AclOperation.ANY,
            permission_type=AclPermissionType.ANY,
        ),
        2,
    )


def replica_sizes(host: Host) -> dict[int, int]:
    """The bytes of each of the topic's replicas on this host (DescribeLogDirs)."""
    response = ask(host, DescribeLogDirsRequest(topics=None), 1)
    return {
        p.partition_index: p.partition_size
        for result in response.results
        for t in result.topics
        if t.name == TOPIC
        for p in t.partitions
    }


def read_committed(hosts: Hosts, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            **client_settings(hosts, "alice"),
            "group.id": GROUP,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value() or b"")
    finally:
        consumer.close()
    return got


def test_brokers_log_in_to_each_other_as_a_super_user_and_alice_is_not_a_replica(
    hosts: Hosts,
) -> None:
    grant_alice(hosts.hosts[2])
    wait_until(
        "every host has alice's ACLs",
        lambda: all(len(alice_acls(host).resources) == 3 for host in hosts.hosts.values()),
    )
    admin = AdminClient(client_settings(hosts, "admin"))
    new_topic = NewTopic(
        TOPIC, PARTITIONS, replication_factor=3, config={"min.insync.replicas": "3"}
    )
    admin.create_topics([new_topic])[TOPIC].result(timeout=DEADLINE_S)

    producer = Producer({**client_settings(hosts, "alice"), "transactional.id": TRANSACTIONAL_ID})
    producer.init_transactions(DEADLINE_S)
    values = {p: [f"p{p}-r{r}".encode() for r in range(3)] for p in range(PARTITIONS)}
    for commit in (False, True):
        producer.begin_transaction()
        for partition, records in values.items():
            for value in records:
                producer.produce(
                    TOPIC, (b"" if commit else b"aborted-") + value, partition=partition
                )
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.flush(DEADLINE_S)
            producer.abort_transaction(DEADLINE_S)
    committed = sorted(v for records in values.values() for v in records)
    assert sorted(read_committed(hosts, len(committed))) == committed

    # Every replica holds the same batches, markers included (the followers fetched them).
    def replicated() -> bool:
        sizes = [replica_sizes(host) for host in hosts.hosts.values()]
        return (
            len(sizes[0]) == PARTITIONS
            and all(sizes[0][p] > 0 for p in sizes[0])
            and all(s == sizes[0] for s in sizes)
        )

    wait_until("every replica of the topic the same size on every host", replicated)

    leaders = {
        p.partition_index: p.leader_id
        for t in ask(hosts.hosts[1], metadata()).topics
        if t.name == TOPIC
        for p in t.partitions
    }
    leader = hosts.hosts[leaders[0]]
    fetch = FetchRequest(
        max_wait_ms=0,
        topics=(
            FetchTopic(
                topic=TOPIC,
                partitions=(
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
    )
    as_consumer = ask(leader, fetch, 12, user="alice")
    assert as_consumer.responses[0].partitions[0].error_code == ErrorCode.NONE
    as_replica = ask(
        leader, fetch._replace(replica_id=1 if leader.node_id != 1 else 2), 12, "alice"
    )
    assert as_replica.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert not as_replica.responses[0].partitions[0].records
    marker = WritableTxnMarker(
        producer_id=0,
        producer_epoch=0,
        transaction_result=False,
        topics=(WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(0,)),),
    )
    markers = ask(leader, WriteTxnMarkersRequest(markers=(marker,)), 1, "alice")
    refused = markers.markers[0].topics[0].partitions[0].error_code
    assert refused == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    # A host that is not the controller moves its leaderships away over the login too.
    controller = ask(hosts.hosts[1], metadata()).controller_id
    leaving = next(h for h in hosts.hosts.values() if h.node_id != controller)
    assert leaving.process is not None
    log_path = leaving.process.log_path
    assert leaving.stop() == 0
    assert "controlled shutdown succeeded" in log_path.read_text()
