"""Kafka 2.x's ACL znodes (`/kafka-acl/...`, `/kafka-acl-extended/prefixed/...` and
their change notifications) as AclAuthorizer writes them, without a ZooKeeper."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.coordination.acl_znodes import (
    STORED_PATTERN_TYPES,
    STORED_RESOURCE_TYPES,
    decode_acl_change,
    decode_acl_entries,
    encode_acl_change,
    encode_acl_entries,
    pattern_of,
    resource_path,
)
from broker.coordination.broker_registration import MalformedZnode
from broker.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

entries = st.builds(
    AccessControlEntry,
    st.text(max_size=20).map(lambda name: f"User:{name}"),
    st.sampled_from(["*", "127.0.0.1"]),
    st.sampled_from([o for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY)]),
    st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)
patterns = st.builds(
    ResourcePattern,
    st.sampled_from(STORED_RESOURCE_TYPES),
    st.text(min_size=1, max_size=30),
    st.sampled_from(sorted(STORED_PATTERN_TYPES)),
)


@given(st.lists(entries, max_size=8))
def test_a_resources_acls_survive_their_znode(acls: list[AccessControlEntry]) -> None:
    decoded = decode_acl_entries("/kafka-acl/Topic/t", encode_acl_entries(acls))
    assert sorted(decoded, key=repr) == sorted(acls, key=repr)


def test_the_znode_reads_as_kafkas_acl_authorizer_writes_it() -> None:
    entry = AccessControlEntry(
        "User:alice", "*", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW
    )
    assert json.loads(encode_acl_entries([entry])) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "DescribeConfigs",
                "host": "*",
            }
        ],
    }
    txn = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "app-1", PatternType.LITERAL)
    assert resource_path(txn) == "/kafka-acl/TransactionalId/app-1"
    prefixed = ResourcePattern(ResourceType.TOPIC, "orders-", PatternType.PREFIXED)
    assert resource_path(prefixed) == "/kafka-acl-extended/prefixed/Topic/orders-"
    assert encode_acl_change(txn) == ("/kafka-acl-changes", b"TransactionalId:app-1")
    parent, data = encode_acl_change(prefixed)
    assert parent == "/kafka-acl-extended-changes"
    assert json.loads(data) == {
        "version": 1,
        "resourceType": "Topic",
        "name": "orders-",
        "patternType": "Prefixed",
    }


@given(patterns)
def test_every_pattern_has_one_znode_and_one_notification(pattern: ResourcePattern) -> None:
    path = resource_path(pattern)
    parent, _, element = path.rpartition("/")
    assert pattern_of(pattern.pattern_type, pattern.resource_type, element) == pattern
    assert parent.count("/") == (1 if pattern.pattern_type == PatternType.LITERAL else 2) + 1
    notification_parent, data = encode_acl_change(pattern)
    assert decode_acl_change(f"{notification_parent}/acl_changes_0000000007", data) == pattern


@pytest.mark.parametrize(
    "data",
    [
        b"{",
        b"{}",
        b'{"version":1,"acls":[{"principal":"User:a"}]}',
        b'{"version":1,"acls":[{"principal":"User:a","host":"*","operation":"Fly","permissionType":"Allow"}]}',
    ],
)
def test_a_malformed_acl_znode_names_its_path(data: bytes) -> None:
    with pytest.raises(MalformedZnode, match="/kafka-acl/Topic/t"):
        decode_acl_entries("/kafka-acl/Topic/t", data)


@given(st.binary(max_size=80))
def test_any_notification_bytes_decode_or_are_malformed_znode(data: bytes) -> None:
    for path in ("/kafka-acl-changes/acl_changes_1", "/kafka-acl-extended-changes/acl_changes_1"):
        try:
            decode_acl_change(path, data)
        except MalformedZnode as exc:
            assert path in str(exc)
