"""SCRAM users and ACLs of hosts live in ZooKeeper, as Kafka 2.x keeps them: three
`broker serve` hosts on 127.0.0.2-4 whose only listener is SASL_PLAINTEXT with
SCRAM-SHA-256 and an authorizer (`super.users=User:admin`, the admin written into
ZooKeeper before they start, as `kafka-configs.sh --zookeeper` would). A user created
through host 1 logs in on host 3; an ACL created through host 2 is enforced on host 1,
and its deletion through host 3 too; a quota set through host 3 is in force on host 1."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import (
    AlterClientQuotasRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DescribeClientQuotasRequest,
    MetadataRequest,
)
from broker.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from broker.protocol.messages.alter_user_scram_credentials_request import (
    ScramCredentialUpsertion,
)
from broker.protocol.messages.create_acls_request import AclCreation
from broker.protocol.messages.create_topics_request import CreatableTopic
from broker.protocol.messages.delete_acls_request import DeleteAclsFilter
from broker.protocol.messages.describe_client_quotas_request import ComponentData
from broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.hosts.host_processes import Host, Hosts, wait_until
from tests.hosts.sasl_hosts import ask_as, sasl_hosts

PASSWORDS = {"admin": "admin-secret", "bob": "bob-secret"}
TOPIC = "bobs-topic"


@pytest.fixture
def hosts(tmp_path: Path, zookeeper_connect: str) -> Iterator[Hosts]:
    with sasl_hosts(tmp_path, zookeeper_connect, {"admin": PASSWORDS["admin"]}, {}) as hosts:
        yield hosts


def ask(host: Host, request: Any, version: int = -1, user: str = "admin") -> Any:
    return ask_as(host, request, user, PASSWORDS[user], version)


def all_topics() -> MetadataRequest:
    return MetadataRequest(topics=None)


def bob_sees_the_topic(host: Host) -> bool:
    return TOPIC in {t.name for t in ask(host, all_topics(), user="bob").topics}


def test_users_and_acls_changed_through_one_host_reach_every_host(hosts: Hosts) -> None:
    one, two, three = (hosts.hosts[n] for n in (1, 2, 3))
    salt = os.urandom(24)
    salted = hashlib.pbkdf2_hmac("sha256", PASSWORDS["bob"].encode(), salt, 4096)
    bob = ScramCredentialUpsertion(
        name="bob", mechanism=1, iterations=4096, salt=salt, salted_password=salted
    )
    created = ask(one, AlterUserScramCredentialsRequest(upsertions=(bob,)))
    assert [r.error_code for r in created.results] == [ErrorCode.NONE]
    wait_until("bob logs in on host 3", lambda: ask(three, all_topics(), user="bob") is not None)

    topic = CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=3)
    made = ask(one, CreateTopicsRequest(topics=(topic,), timeout_ms=30000))
    assert made.topics[0].error_code == ErrorCode.NONE
    wait_until(
        "every host knows the topic",
        lambda: all(
            TOPIC in {t.name for t in ask(h, all_topics()).topics} for h in (one, two, three)
        ),
    )
    assert not bob_sees_the_topic(one)

    describe = AclCreation(
        resource_type=ResourceType.TOPIC,
        resource_name=TOPIC,
        resource_pattern_type=PatternType.LITERAL,
        principal="User:bob",
        host="*",
        operation=AclOperation.DESCRIBE,
        permission_type=AclPermissionType.ALLOW,
    )
    granted = ask(two, CreateAclsRequest(creations=(describe,)), 2)
    assert [r.error_code for r in granted.results] == [ErrorCode.NONE]
    wait_until("host 1 lets bob see the topic", lambda: bob_sees_the_topic(one))

    everything_of_bob = DeleteAclsFilter(
        resource_type_filter=ResourceType.ANY,
        resource_name_filter=None,
        pattern_type_filter=PatternType.ANY,
        principal_filter="User:bob",
        host_filter=None,
        operation=AclOperation.ANY,
        permission_type=AclPermissionType.ANY,
    )
    deleted = ask(three, DeleteAclsRequest(filters=(everything_of_bob,)), 2)
    assert len(deleted.filter_results[0].matching_acls) == 1
    wait_until("host 1 hides the topic from bob again", lambda: not bob_sees_the_topic(one))

    bobs_rate = EntryData(
        entity=(EntityData(entity_type="user", entity_name="bob"),),
        ops=(OpData(key="producer_byte_rate", value=1024.0),),
    )
    altered = ask(three, AlterClientQuotasRequest(entries=(bobs_rate,)))
    assert [e.error_code for e in altered.entries] == [ErrorCode.NONE]

    def bobs_quotas_on_host_1() -> list[tuple[str, float]]:
        described = ask(
            one,
            DescribeClientQuotasRequest(
                components=(ComponentData(entity_type="user", match_type=0, match="bob"),)
            ),
        )
        return [(v.key, v.value) for e in described.entries or () for v in e.values]

    wait_until(
        "host 1 has bob's quota",
        lambda: bobs_quotas_on_host_1() == [("producer_byte_rate", 1024.0)],
    )
