"""ACLs through a real broker process and real clients.

On a PLAINTEXT listener every client is User:ANONYMOUS from 127.0.0.1, so these
tests grant and deny that principal (or User:*) by topic name, prefix and host;
other principals are covered by the handler tests. ACLs are managed with
confluent-kafka's and kafka-python's admin clients, and a refused read or write
is seen as librdkafka reports it: TOPIC_AUTHORIZATION_FAILED, and no data.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import ClusterAuthorizationFailedError, SecurityDisabledError

from tests.interop.kafka_clients import (
    admin,
    confluent_produce,
    consumer_settings,
    create_topic,
    interop_broker_running,
    make_messages,
    rdkafka_settings,
    read_all_confluent,
)

pytestmark = pytest.mark.interop

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANONYMOUS = "User:ANONYMOUS"


def binding(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    *,
    resource: ResourceType = ResourceType.TOPIC,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    principal: str = ANONYMOUS,
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


EVERYTHING = AclBindingFilter(
    ResourceType.ANY,
    None,
    ResourcePatternType.ANY,
    None,
    None,
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def create_acls(bootstrap: str, bindings: list[AclBinding]) -> None:
    client = admin(bootstrap)
    for future in client.create_acls(bindings, request_timeout=15).values():
        assert future.result(timeout=20) is None


def describe_acls(bootstrap: str) -> set[AclBinding]:
    client = admin(bootstrap)  # kept alive until the future resolves
    return set(client.describe_acls(EVERYTHING, request_timeout=15).result(timeout=20))


def python_describe_topic_acls(bootstrap: str) -> tuple[list[Any], Any]:
    """kafka-python's describe_acls, which raises the response's error (librdkafka's
    DescribeAcls result drops a top-level error and reports no ACLs)."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        return client.describe_acls(  # type: ignore[no-any-return]
            ACLFilter(
                principal=None,
                host=None,
                operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(
                    KpResourceType.TOPIC, None, ACLResourcePatternType.ANY
                ),
            )
        )
    finally:
        client.close()


def create_acls_error(bootstrap: str) -> Any:
    """The error code confluent-kafka reports for creating one ACL."""
    client = admin(bootstrap)
    (future,) = client.create_acls([binding("t", AclOperation.READ)], request_timeout=15).values()
    with pytest.raises(KafkaException) as refused:
        future.result(timeout=20)
    return refused.value.args[0].code()


def fetch_error(bootstrap: str, topic: str, timeout_s: float = 15.0) -> tuple[Any, int]:
    """The first consumer error for `topic` read from the start, and how many records came."""
    consumer = Consumer(consumer_settings(bootstrap))
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    records = 0
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=0.2):
                error = msg.error()
                if error is not None:
                    return error.code(), records
                records += 1
    finally:
        consumer.close()
    return None, records


def produce_error(bootstrap: str, topic: str) -> Any:
    """The delivery report's error of one message, librdkafka retrying no longer than 10 s."""
    producer = Producer(rdkafka_settings(bootstrap, message_timeout_ms=10000))
    errors: list[Any] = []
    producer.produce(topic, value=b"x", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(20) == 0
    return errors[0].code() if errors[0] is not None else None


def test_acls_are_created_described_deleted_and_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    settings = {"authorizer.class.name": STANDARD, "super.users": ANONYMOUS}
    wanted = [
        binding("orders", AclOperation.READ),
        binding("orders-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
        binding("g", AclOperation.ALL, AclPermissionType.DENY, resource=ResourceType.GROUP),
        # librdkafka calls the CLUSTER resource type BROKER (both are 4).
        binding("kafka-cluster", AclOperation.ALTER, resource=ResourceType.BROKER, host="1.2.3.4"),
    ]
    with interop_broker_running(data, settings) as broker:
        assert describe_acls(broker.bootstrap) == set()
        create_acls(broker.bootstrap, wanted)
        assert describe_acls(broker.bootstrap) == set(wanted)
    with interop_broker_running(data, settings) as broker:
        assert describe_acls(broker.bootstrap) == set(wanted)
        acls, error = python_describe_topic_acls(broker.bootstrap)
        assert error.errno == 0
        assert sorted(a.resource_pattern.resource_name for a in acls) == ["orders", "orders-"]
        client = admin(broker.bootstrap)
        deleted = client.delete_acls(
            [
                AclBindingFilter(
                    ResourceType.TOPIC,
                    None,
                    ResourcePatternType.ANY,
                    None,
                    None,
                    AclOperation.ANY,
                    AclPermissionType.ANY,
                )
            ],
            request_timeout=15,
        )
        (future,) = deleted.values()
        assert set(future.result(timeout=20)) == set(wanted[:2])
    with interop_broker_running(data, settings) as broker:
        assert describe_acls(broker.bootstrap) == set(wanted[2:])


def test_without_an_authorizer_acl_requests_report_security_disabled(tmp_path: Path) -> None:
    with interop_broker_running(tmp_path / "data") as broker:
        assert create_acls_error(broker.bootstrap) == KafkaError.SECURITY_DISABLED
        with pytest.raises(SecurityDisabledError):
            python_describe_topic_acls(broker.bootstrap)


def test_a_consumer_without_read_gets_topic_authorization_failed_and_reads_nothing(
    tmp_path: Path,
) -> None:
    """allow.everyone.if.no.acl.found: resources without ACLs stay open (the admin
    client creates topics and ACLs), and a DENY closes exactly what it names."""
    settings = {"authorizer.class.name": STANDARD, "allow.everyone.if.no.acl.found": "true"}
    messages = make_messages(20, 1, seed=3)
    with interop_broker_running(tmp_path / "data", settings) as broker:
        bootstrap = broker.bootstrap
        for topic in ("open", "secret", "locked"):
            create_topic(bootstrap, topic)
        confluent_produce(bootstrap, "secret", messages)
        confluent_produce(bootstrap, "open", messages)
        create_acls(
            bootstrap,
            [
                # DESCRIBE stays allowed, so the refusal comes from Fetch itself.
                binding("secret", AclOperation.DESCRIBE, principal="User:*"),
                # DENY beats ALLOW: the wildcard ALL does not let anyone read it.
                binding("*", AclOperation.ALL, principal="User:*"),
                binding("secret", AclOperation.READ, AclPermissionType.DENY),
                binding("locked", AclOperation.WRITE, AclPermissionType.DENY, host="127.0.0.1"),
            ],
        )
        assert fetch_error(bootstrap, "secret") == (KafkaError.TOPIC_AUTHORIZATION_FAILED, 0)
        assert produce_error(bootstrap, "locked") == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert len(read_all_confluent(bootstrap, "open", 1, len(messages))) == len(messages)
        assert produce_error(bootstrap, "open") is None


def test_prefixed_and_host_acls_decide_when_no_acl_means_no_access(tmp_path: Path) -> None:
    """ACLs made by a super user, then the broker restarted without one: only the
    persisted ACLs grant anything."""
    data = tmp_path / "data"
    messages = make_messages(10, 1, seed=4)
    acls = [
        binding("*", AclOperation.DESCRIBE, principal="User:*"),
        # librdkafka looks up its group's coordinator even for assign().
        binding("*", AclOperation.DESCRIBE, principal="User:*", resource=ResourceType.GROUP),
        binding("pub-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED, host="127.0.0.1"),
        binding("priv-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED, host="10.9.9.9"),
    ]
    with interop_broker_running(
        data, {"authorizer.class.name": STANDARD, "super.users": ANONYMOUS}
    ) as broker:
        for topic in ("pub-a", "priv-a", "hidden"):
            create_topic(broker.bootstrap, topic)
            confluent_produce(broker.bootstrap, topic, messages)
        create_acls(broker.bootstrap, acls)
    with interop_broker_running(data, {"authorizer.class.name": STANDARD}) as broker:
        bootstrap = broker.bootstrap
        got = read_all_confluent(bootstrap, "pub-a", 1, len(messages))
        assert [c.message.value for c in got] == [m.value for m in messages]
        assert fetch_error(bootstrap, "priv-a") == (KafkaError.TOPIC_AUTHORIZATION_FAILED, 0)
        assert produce_error(bootstrap, "pub-a") == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # Listing topics shows what User:* may describe; ACL management is refused.
        listed = admin(bootstrap).list_topics(timeout=15).topics
        assert {"pub-a", "priv-a", "hidden"} <= set(listed)
        assert create_acls_error(bootstrap) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        with pytest.raises(ClusterAuthorizationFailedError):
            python_describe_topic_acls(bootstrap)
