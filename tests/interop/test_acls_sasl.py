"""ACLs decide for SASL users: SCRAM logins over SASL_PLAINTEXT, each user a principal.

The operator's side runs on the broker's PLAINTEXT listener, whose anonymous principal
is the super user (the "internal listener" set-up of docs/acls.md): it creates the SCRAM
users, the topics, the records and the ACLs. Users then log in with librdkafka and are
allowed or refused by their own ACLs: a user without READ gets TOPIC_AUTHORIZATION_FAILED
and no records, DENY beats ALLOW, and a prefixed DENY covers every matching topic.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from broker.client.connection import KafkaConnection
from tests.integration.broker_harness import (
    BrokerProcess,
    start_broker_process,
    stop_broker_process,
)
from tests.interop.kafka_clients import (
    INTEROP_BROKER_SETTINGS,
    admin,
    confluent_produce,
    consumer_settings,
    create_topic,
    make_messages,
    rdkafka_settings,
)
from tests.security.helpers import create_scram_user

pytestmark = pytest.mark.interop

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"reader": "reader-pw", "stranger": "stranger-pw"}


def login(user: str) -> dict[str, Any]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_username": user,
        "sasl_password": USERS[user],
    }


def allow(
    principal: str,
    name: str,
    operation: AclOperation,
    *,
    resource: ResourceType = ResourceType.TOPIC,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


async def _create_users(port: int) -> None:
    async with await KafkaConnection.connect("127.0.0.1", port, "operator") as connection:
        for user, password in USERS.items():
            await create_scram_user(connection, user, password, "SCRAM-SHA-256")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = {
        **INTEROP_BROKER_SETTINGS,
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": STANDARD,
        "super.users": "User:ANONYMOUS",
    }
    process = start_broker_process(tmp_path_factory.mktemp("acl-sasl") / "data", settings)
    try:
        trio.run(_create_users, process.ports["PLAINTEXT"])
        yield process
    finally:
        assert stop_broker_process(process) == 0, process.log_text()[-4000:]


def read_as(broker: BrokerProcess, user: str, topic: str, timeout_s: float = 15.0) -> Any:
    """(first error code or None, records read) for `user` reading `topic` from the start."""
    bootstrap = f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}"
    settings = consumer_settings(bootstrap, **login(user))
    settings["group.id"] = f"{user}-group"  # librdkafka looks its coordinator up
    consumer = Consumer(settings)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    records = 0
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=100, timeout=0.2):
                error = message.error()
                if error is not None:
                    return error.code(), records
                records += 1
    finally:
        consumer.close()
    return None, records


def write_as(broker: BrokerProcess, user: str, topic: str) -> Any:
    bootstrap = f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}"
    producer = Producer(rdkafka_settings(bootstrap, message_timeout_ms=10000, **login(user)))
    errors: list[Any] = []
    producer.produce(topic, value=b"x", on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(20) == 0
    return errors[0].code() if errors[0] is not None else None


def test_each_sasl_user_reads_and_writes_only_what_its_acls_allow(broker: BrokerProcess) -> None:
    operator = f"127.0.0.1:{broker.ports['PLAINTEXT']}"
    messages = make_messages(20, 1, seed=11)
    for topic in ("orders", "secret-plans", "secret-keys"):
        create_topic(operator, topic)
        confluent_produce(operator, topic, messages)
    client = admin(operator)
    bindings = [
        allow("User:reader", "orders", AclOperation.READ),
        allow("User:reader", "secret-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        allow(
            "User:reader",
            "secret-keys",
            AclOperation.READ,
            permission=AclPermissionType.DENY,
        ),
        allow("User:reader", "reader-group", AclOperation.READ, resource=ResourceType.GROUP),
        allow("User:stranger", "stranger-group", AclOperation.READ, resource=ResourceType.GROUP),
        # The stranger may see every topic, but read none.
        allow("User:stranger", "*", AclOperation.DESCRIBE),
    ]
    for future in client.create_acls(bindings, request_timeout=15).values():
        assert future.result(timeout=20) is None

    assert read_as(broker, "reader", "orders", timeout_s=5) == (None, len(messages))
    assert read_as(broker, "reader", "secret-plans", timeout_s=5) == (None, len(messages))
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert read_as(broker, "reader", "secret-keys") == (denied, 0)
    assert read_as(broker, "stranger", "orders") == (denied, 0)
    assert write_as(broker, "reader", "orders") == denied
    assert write_as(broker, "stranger", "orders") == denied
